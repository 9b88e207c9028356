"""`fabric-rca`: replay, incidents, serve, simulate, evaluate, train, rules check, mappings check, worker, demo."""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path

from cli.engine_flags import positive as _positive

EXIT_USAGE = 2


class CliError(Exception):
    """A problem the user can fix; printed without a traceback."""


def _db(args) -> str:
    from api.store.db import resolve_db_url
    return resolve_db_url(args.db, os.environ)


def cmd_replay(args) -> int:
    if args.to_kafka:
        return _replay_to_kafka(args)
    if args.mappings:
        _use_mappings(args.mappings)
    from api.store.db import redacted_url
    from api.store.sink import StoreSink
    from cli.progress import Progress
    from cli.engine_flags import engine_settings
    from cli.run import failed_files_line, failure_dict, replay_exit_code
    from compose import build_engine, new_pipeline
    from engine.replay import replay

    parts = build_engine(engine_settings(args))
    topology, models = parts.topology, parts.models
    pipeline = new_pipeline(parts)
    if models is not None and not args.quiet:
        print(f"anomaly models from {args.models}: {models.describe()}", file=sys.stderr)
    db_url = _db(args)
    sink = StoreSink(db_url, topology=topology.to_dict())
    progress = Progress(enabled=False if args.quiet else None)
    failures: list = []  # files that broke part-way (engine.replay.FileFailure): reported, then exit 1
    stats = replay(pipeline, args.files, sink=sink.write, speed=args.speed, rejects_path=args.rejects,
                   progress=progress, on_file_error=failures.append)
    progress.done()
    summary = stats.summary() | {"db": redacted_url(db_url), "rejects_file": str(args.rejects) if stats.rejects else None,
                                 "failed_files": [failure_dict(f) for f in failures]}
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"replayed {summary['records']:,} records from {len(args.files)} file(s) into {summary['db']}")
        print(f"  incidents opened: {summary['incidents_opened']}, resolved: {summary['incidents_resolved']}, "
              f"symptoms: {summary['symptoms']}")
        print(f"  rejected: {summary['rejected']}" + (f" {summary['rejects']} -> {args.rejects}" if summary["rejected"] else ""))
        print(f"  duplicates dropped: {summary['duplicates']}, counter resets: {summary['counter_resets']}, "
              f"ignored measurements: {summary['ignored_measurements'] or 0}, ignored fields: {summary['ignored_fields']}")
        if summary["mapped"]:
            print(f"  mapped from real exporters: {summary['mapped']}")
        if summary["merged_halves"]:
            print(f"  halves merged: {summary['merged_halves']} ({summary['conflicting_fields']} conflicting fields)")
        for host, c in summary["clock_suspect_devices"].items():
            print(f"  device {host}'s clock is {c['ahead_s']:.0f} s ahead: {c['future_timestamps']} records quarantined")
    if failures:
        print(failed_files_line(failures, total=len(args.files)), file=sys.stderr)
    return replay_exit_code(failures)


def _replay_to_kafka(args) -> int:
    from engine.topology import load_topology
    from streams.publish import publish_files

    load_topology(args.topology)  # fail early on a bad topology, as the embedded replay does
    show = sys.stderr.isatty() and not args.quiet

    def progress(st) -> None:
        if show:
            sys.stderr.write(f"\r{st.records:,} records sent  {st.rate:,.0f} rec/s   ")
            sys.stderr.flush()

    from streams import security
    from streams.topics import DEFAULT_PARTITIONS, ensure_topics
    kafka = security.from_args(args)
    # Create the topics as the workers expect them (auto-creation would make 1 partition).
    ensure_topics(bootstrap=args.to_kafka, topics={args.topic: DEFAULT_PARTITIONS, args.jobs_topic: DEFAULT_PARTITIONS},
                  security=kafka)
    stats = publish_files(args.files, bootstrap=args.to_kafka, topic=args.topic, jobs_file=args.jobs,
                          jobs_topic=args.jobs_topic, speed=args.speed, progress=progress, security=kafka,
                          rejects_path=args.rejects)
    if show:
        sys.stderr.write("\n")
    from cli.run import failed_files_line, replay_exit_code
    print(f"sent {stats.records:,} records and {stats.jobs} job snapshots to {args.to_kafka} ({args.topic}); "
          f"rejected {stats.rejected}" + (f" {dict(sorted(stats.rejects.items()))}" if stats.rejected else "")
          + (f" -> {args.rejects}" if stats.rejected and args.rejects else ""))
    if stats.failed_files:
        print(failed_files_line(stats.failed_files, total=len(args.files)), file=sys.stderr)
    return replay_exit_code(stats.failed_files)


def cmd_train(args) -> int:
    from cli.engine_flags import engine_settings
    from engine.topology import load_topology
    from models.store import save
    from models.train import train

    topologies = [load_topology(t) for t in args.topology]
    show = sys.stderr.isatty() and not args.quiet

    def progress(data) -> None:
        if show:
            sys.stderr.write(f"\r{data.records:,} records read   ")
            sys.stderr.flush()

    models, training = train(args.from_files, topologies=topologies, window_s=args.window_s, seed=args.seed,
                             z_min=args.z_min, progress=progress,
                             config=engine_settings(args).config)
    if show:
        sys.stderr.write("\n")
    meta = save(models, args.out, training=training)
    print(f"trained on {training['records']:,} records ({training['from']} .. {training['to']}): "
          f"{models.describe()}")
    if training["foreign_records"]:
        print(f"  skipped {training['foreign_records']:,} records of devices in no topology given")
    print(f"  wrote {args.out} (metadata: {meta})")
    return 0


def cmd_worker(args) -> int:
    from streams.app import run_worker

    run_worker(worker_settings(args))
    return 0


def worker_settings(args):
    """The worker's settings from its flags, falling back to FABRIC_RCA_* variables."""
    from cli.engine_flags import engine_settings
    from compose.engine import load_models
    from streams import security
    from streams.settings import WorkerSettings
    from streams.topics import parse_bootstrap

    env = os.environ
    engine = engine_settings(args, env)
    load_models(engine.models_dir)  # fail now, with the reason, rather than inside the worker
    bootstrap = args.bootstrap or env.get("FABRIC_RCA_BOOTSTRAP")
    if not bootstrap or engine.topology is None:
        raise CliError("--bootstrap (or FABRIC_RCA_BOOTSTRAP) and --topology (or FABRIC_RCA_TOPOLOGY) are required")
    common = dict(
        bootstrap=parse_bootstrap(bootstrap), db_url=_db(args), engine=engine,
        web_port=args.metrics_port, web_bind=args.metrics_bind, loglevel=args.loglevel, log_format=args.log_format,
        data_dir=Path(args.data_dir), idle_partition_s=args.idle_partition_s,
        rebuild_max_records=args.rebuild_max_records, rebuild_max_bytes=args.rebuild_max_bytes,
        kafka_security=security.from_args(args, env),
    )
    settings = WorkerSettings.with_prefix(args.topic_prefix, **common) if args.topic_prefix else WorkerSettings(**common)
    topics = args.telemetry_topic or [t.strip() for t in env.get("FABRIC_RCA_TELEMETRY_TOPICS", "").split(",") if t.strip()]
    if topics:
        settings = dataclasses.replace(settings, telemetry_topics=tuple(args.topic_prefix + t for t in topics))
    return settings


def cmd_topics(args) -> int:
    from streams import security
    from streams.topics import ensure_topics, parse_bootstrap, pipeline_topics

    bootstrap = parse_bootstrap(args.bootstrap or os.environ.get("FABRIC_RCA_BOOTSTRAP", ""))
    wanted = pipeline_topics(args.prefix, args.partitions)
    created = ensure_topics(bootstrap=bootstrap, topics=wanted, security=security.from_args(args))
    for name in wanted:
        print(f"{name}: {'created' if name in created else 'exists'}")
    return 0


def cmd_incidents(args) -> int:
    from sqlmodel import Session

    from api.format import incidents_table
    from api.store.db import create_schema, make_engine
    from api.store.repository import count_incidents, list_incidents

    engine = make_engine(_db(args))
    create_schema(engine)
    filters = {"status": args.status, "cause": args.cause}
    with Session(engine) as session:
        # one query (one snapshot): every match unless --limit, as the contract says
        found = list_incidents(session, **filters, limit=args.limit)
        total = len(found) if args.limit is None or len(found) < args.limit else count_incidents(session, **filters)
    if args.format == "json":
        print(json.dumps(found, indent=2))
    else:
        print(incidents_table(found) if found else "no incidents")
    if total > len(found):
        print(f"fabric-rca incidents: showing {len(found)} of {total} matching incidents (--limit {args.limit}); "
              "drop --limit for all", file=sys.stderr)
    return 0


def cmd_serve(args) -> int:
    from api.server import serve
    from api.store.db import redacted_url
    from engine.topology import load_topology

    topology = load_topology(args.topology).to_dict() if args.topology else None
    db_url = _db(args)
    print(f"serving {redacted_url(db_url)} on http://{args.host}:{args.port} (API docs: /docs)", file=sys.stderr)
    serve(db_url=db_url, host=args.host, port=args.port, topology=topology)
    return 0


def cmd_simulate(args) -> int:
    import time

    import sim

    if args.suite is not None:
        out = Path(args.suite) if args.suite else args.out
        if out is None:
            raise CliError("--suite needs a folder: --suite DIR (or --suite --out DIR)")
        total, t0 = 0, time.perf_counter()

        def done(entry, truth, seconds: float) -> None:
            nonlocal total
            total += truth["records"]
            faults = len(truth["faults"])
            print(f"  {entry.name:<40} {truth['records']:>10,} records  {faults} fault(s)  "
                  f"{truth['hosts']:>4} hosts  {seconds:6.1f} s", flush=True)

        if args.split:
            from sim.split import simulate_split
            paths = simulate_split(out=out, split=args.split, clean_hours=args.clean_hours,
                                   repeats=args.repeats, only=args.only, on_entry=done)
        else:
            paths = sim.simulate_suite(out=out, seed=args.seed, only=args.only, on_entry=done)
        print(f"wrote {len(paths)} scenarios under {out}: {total:,} records in "
              f"{time.perf_counter() - t0:.0f} s")
        return 0
    if not args.scenario:
        raise CliError(f"--scenario is required (one of: {', '.join(sim.ALL_SCENARIOS)}) unless --suite is given")
    if args.out is None:
        raise CliError("--out DIR is required with --scenario")
    truth = sim.simulate(out=args.out, scenario=args.scenario, seed=args.seed, duration=args.duration,
                         intensity=args.intensity, target=args.target, fabric=args.fabric)
    print(f"wrote scenario {args.scenario!r} ({truth['records']:,} records, {len(truth['faults'])} fault(s)) to {args.out}")
    return 0


def _fabric_spec(text: str):
    """SPINESxLEAVESxHOSTS_PER_LEAF[xSTORAGE_HOSTS], e.g. 8x32x16x4."""
    from sim import FabricSpec
    try:
        parts = [int(x) for x in text.lower().split("x")]
        if len(parts) not in (3, 4):
            raise ValueError
        return FabricSpec(*parts)
    except (TypeError, ValueError) as exc:
        detail = f": {exc}" if str(exc) else ""
        raise argparse.ArgumentTypeError(
            f"{text!r} is not SPINESxLEAVESxHOSTS[xSTORAGE] (e.g. 8x32x16x4){detail}") from None


def cmd_evaluate(args) -> int:
    from evaluation.report import accuracy_doc, choose_methods, console_text, run_suite

    try:
        methods = choose_methods(args.methods, models=bool(args.models))
    except ValueError as exc:
        raise CliError(str(exc)) from None
    run = run_suite(args.dirs, methods=methods, rule_files=args.rules, models_dir=args.models,
                    on_scenario=lambda line: print("  " + line, file=sys.stderr, flush=True))
    print(console_text(run))
    print("time: " + ", ".join(f"{m} {run.seconds[m]:.1f} s" for m in methods)
          + (f" ({'+'.join(run.baselines)} share one read of the telemetry)" if len(run.baselines) > 1 else ""),
          file=sys.stderr)
    if args.write:
        command = "fabric-rca evaluate " + " ".join(str(d) for d in args.dirs)
        command += f" --methods {args.methods}" if args.methods else ""
        command += f" --models {args.models}" if args.models else ""
        args.write.parent.mkdir(parents=True, exist_ok=True)
        args.write.write_text(accuracy_doc(run, command=command + f" --write {args.write}"))
        print(f"wrote {args.write}", file=sys.stderr)
    return 0


def cmd_rules_check(args) -> int:
    from rules.loader import default_rule_files, load_rules

    files = args.files or default_rule_files()
    ruleset = load_rules(files)
    print(f"ok: {len(ruleset.rules) + len(ruleset.silence)} rules in {len(files)} file(s)")
    return 0


def _use_mappings(folders: list[Path]) -> None:
    """Mapping folders for this process (before $FABRIC_RCA_MAPPINGS' and the shipped ones),
    loaded now so that a bad file stops the command before it reads telemetry."""
    from engine import mapping

    dirs = [str(d) for d in folders] + [d for d in os.environ.get(mapping.ENV, "").split(os.pathsep) if d]
    os.environ[mapping.ENV] = os.pathsep.join(dirs)
    mapping.default_mappings()


def cmd_mappings_check(args) -> int:
    from engine.mapping import load_mappings, shipped_files

    files = args.files or shipped_files()
    found = load_mappings(files)
    print(f"ok: {len(found)} mappings in {len(files)} file(s)")
    return 0


def cmd_demo(args) -> int:
    from cli.demo import run_demo
    return run_demo(out=args.out, port=args.port, serve=not args.no_serve, seed=args.seed, cli=main)


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be 0 or more")
    return value


def kafka_security_arguments(p: argparse.ArgumentParser) -> None:
    from streams.security import add_arguments
    add_arguments(p)


def parser() -> argparse.ArgumentParser:
    from cli.engine_flags import ORDER, add_engine_arguments
    p = argparse.ArgumentParser(prog="fabric-rca", description="Root-cause diagnosis for AI-cluster RoCE fabrics.")
    sub = p.add_subparsers(dest="command", required=True)
    db_help = "SQLAlchemy URL or SQLite file (default: $FABRIC_RCA_DB, else sqlite:///fabric-rca.db)"

    r = sub.add_parser("replay", help="replay recorded telemetry in-process into the store")
    r.add_argument("files", nargs="+", type=Path, metavar="FILE", help=".jsonl or .jsonl.gz telemetry")
    add_engine_arguments(r, from_env=False, required=("--topology",))
    r.add_argument("--db", help=db_help)
    r.add_argument("--speed", type=_positive, help="pace event time at N times real time (default: as fast as possible)")
    r.add_argument("--rejects", type=Path, default=Path("rejects.jsonl"), help="where unreadable records go")
    r.add_argument("--to-kafka", metavar="HOST:PORT", help="publish to Kafka (keyed by host) instead of diagnosing in-process")
    r.add_argument("--topic", default="fabric.telemetry", help="telemetry topic for --to-kafka")
    r.add_argument("--jobs-topic", default="fabric.jobs", help="jobs topic for --to-kafka")
    r.add_argument("--mappings", type=Path, action="append", metavar="DIR",
                   help="folder of mapping files for real exporters' measurements, tried before the shipped "
                        "ones (repeatable; also $FABRIC_RCA_MAPPINGS)")
    r.add_argument("--json", action="store_true", help="print the end summary as JSON")
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    kafka_security_arguments(r)
    r.set_defaults(fn=cmd_replay)

    i = sub.add_parser("incidents", help="list stored incidents")
    i.add_argument("--db", help=db_help)
    i.add_argument("--format", choices=("table", "json"), default="table")
    i.add_argument("--status", choices=("open", "resolved"))
    i.add_argument("--cause")
    i.add_argument("--limit", type=_count, help="at most N incidents, newest first (default: every match)")
    i.set_defaults(fn=cmd_incidents)

    s = sub.add_parser("serve", help="serve the HTTP API")
    s.add_argument("--db", help=db_help)
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--topology", type=Path, help="serve this topology at /topology (default: the one stored by replay)")
    s.set_defaults(fn=cmd_serve)

    g = sub.add_parser("simulate", help="generate a scenario: topology, jobs, telemetry and truth")
    g.add_argument("--out", type=Path, help="folder for one scenario (with --scenario)")
    g.add_argument("--scenario", help="scenario name (an unknown name lists them all)")
    g.add_argument("--seed", type=int, default=1)
    g.add_argument("--duration", type=float, help="seconds of event time (default: the scenario's)")
    g.add_argument("--intensity", choices=("strong", "medium", "weak"), default="strong",
                   help="how loud the fault is (default strong)")
    g.add_argument("--target", help="where the fault sits: a host, NIC, switch port, link, switch, "
                                    "storage host or job id, as the scenario takes")
    g.add_argument("--fabric", type=_fabric_spec, metavar="SxLxH[xST]",
                   help="spines x leaves x hosts per leaf [x storage hosts] (default 2x4x4x2)")
    g.add_argument("--suite", nargs="?", const="", metavar="DIR",
                   help="build the scenario suite, one folder per entry under DIR (or --out)")
    g.add_argument("--only", metavar="GLOB", help="with --suite: only the entries whose name matches")
    g.add_argument("--split", choices=("tune", "test"),
                   help="with --suite: build the realistic tune or test split (sim/split.py) "
                        "instead of the classic suite; its seeds are fixed, --seed is ignored")
    g.add_argument("--clean-hours", type=float, metavar="H",
                   help="with --split: hours of clean runs (default 0.5 tune, 1.5 test)")
    g.add_argument("--repeats", type=int,
                   help="with --split: runs of each cause (default 2 tune, 3 test)")
    g.set_defaults(fn=cmd_simulate)

    e = sub.add_parser("evaluate", help="replay scenarios and score the diagnosis against their truth")
    e.add_argument("dirs", nargs="+", type=Path, metavar="DIR")
    e.add_argument("--rules", type=Path, action="append")
    e.add_argument("--methods", metavar="M,M...",
                   help="comma-separated: rules, models (needs --models), baro, nsigma, baro_abs, nsigma_abs "
                        "(default: rules,baro,nsigma, and models with --models); one table per cause, a row per method")
    e.add_argument("--models", type=Path, metavar="DIR", help="anomaly models folder, for the method 'models'")
    e.add_argument("--write", type=Path, help="also write the results as Markdown (e.g. docs/accuracy.md)")
    e.set_defaults(fn=cmd_evaluate)

    ru = sub.add_parser("rules", help="rule files")
    rsub = ru.add_subparsers(dest="rules_command", required=True)
    rc = rsub.add_parser("check", help="validate rule files offline")
    rc.add_argument("files", nargs="*", type=Path)
    rc.set_defaults(fn=cmd_rules_check)

    ma = sub.add_parser("mappings", help="mapping files (real exporters' measurements -> the contract's)")
    msub = ma.add_subparsers(dest="mappings_command", required=True)
    mc = msub.add_parser("check", help="validate mapping files offline (default: the shipped ones)")
    mc.add_argument("files", nargs="*", type=Path)
    mc.set_defaults(fn=cmd_mappings_check)

    w = sub.add_parser("worker", help="run the faust-streaming workers on Kafka")
    w.add_argument("--bootstrap", metavar="HOST:PORT", help="Kafka bootstrap (or FABRIC_RCA_BOOTSTRAP)")
    w.add_argument("--db", help=db_help)
    add_engine_arguments(w, from_env=True)
    w.add_argument("--topic-prefix", default="", help="prefix every topic and the consumer group (tests, shared brokers)")
    w.add_argument("--telemetry-topic", action="append", metavar="TOPIC",
                   help="a telemetry topic to read, keyed by host (repeat for several; or FABRIC_RCA_TELEMETRY_TOPICS, "
                        "comma-separated; default fabric.telemetry)")
    w.add_argument("--idle-partition-s", type=_positive, default=30.0, metavar="S",
                   help="correlation waits for every telemetry partition; one silent this many seconds longer "
                        "than the others is not waited for until it sends again (default 30)")
    w.add_argument("--rebuild-max-records", type=_count, default=1_000_000, metavar="N",
                   help="a stage whose checkpoint is refused re-reads at most the last N messages of its partition "
                        "(default 1000000; 0: none)")
    w.add_argument("--rebuild-max-bytes", type=_count, default=1 << 30, metavar="B",
                   help="... and at most B bytes of them (default 1 GiB)")
    w.add_argument("--metrics-port", type=int, default=9108, help="HTTP port of /healthz (default 9108)")
    w.add_argument("--metrics-bind", default="127.0.0.1")
    w.add_argument("--data-dir", default=".fabric-rca-worker", help="faust's local state folder")
    w.add_argument("--loglevel", default="WARNING", help="WARNING (default: quiet), INFO or DEBUG")
    w.add_argument("--log-format", choices=("json", "text"), default="json", help="structured JSON lines (default)")
    kafka_security_arguments(w)
    w.set_defaults(fn=cmd_worker)

    tr = sub.add_parser("train", help="learn anomaly models from recorded (mostly clean) telemetry")
    tr.add_argument("--from", dest="from_files", nargs="+", type=Path, required=True, metavar="FILE",
                    help=".jsonl or .jsonl.gz telemetry to learn normal behaviour from")
    tr.add_argument("--topology", type=Path, required=True, action="append",
                    help="the fabric the telemetry comes from (repeat for telemetry of several fabrics)")
    tr.add_argument("--out", type=Path, required=True, metavar="DIR", help="folder for the models and metadata.json")
    tr.add_argument("--window-s", type=_positive, default=5.0, help="feature window in seconds of event time (default 5)")
    tr.add_argument("--z-min", type=_positive, default=6.0,
                    help="robust score a feature must reach before a window can be anomalous (default 6)")
    tr.add_argument("--seed", type=int, default=0, help="random seed of the forests (same data + seed: same models)")
    add_engine_arguments(tr, from_env=False, groups=(ORDER,))  # the order the models will score in
    tr.add_argument("--quiet", action="store_true", help="no progress")
    tr.set_defaults(fn=cmd_train)

    t = sub.add_parser("topics", help="Kafka topics")
    tsub = t.add_subparsers(dest="topics_command", required=True)
    tc = tsub.add_parser("create", help="create the pipeline's topics if missing")
    tc.add_argument("--bootstrap", metavar="HOST:PORT")
    tc.add_argument("--partitions", type=int, default=4)
    tc.add_argument("--prefix", default="")
    kafka_security_arguments(tc)
    tc.set_defaults(fn=cmd_topics)

    d = sub.add_parser("demo", help="generate a small faulty fabric, replay it, serve the API")
    d.add_argument("--out", type=Path, default=Path("demo-out"))
    d.add_argument("--port", type=int, default=8000)
    d.add_argument("--seed", type=int, default=1)
    d.add_argument("--no-serve", action="store_true", help="stop after printing the incidents")
    d.set_defaults(fn=cmd_demo)
    return p


def main(argv: list[str] | None = None) -> int:
    from api.store.db import StoreError
    from cli.runtime import tune_gc
    from engine.jobs import JobError
    from engine.replay import ReplayError
    from engine.topology import TopologyError
    from rules.loader import RuleError
    from streams.publish import PublishError
    from streams.topics import KafkaUnavailable

    args = parser().parse_args(argv)
    tune_gc()
    try:
        return args.fn(args)
    except (CliError, TopologyError, RuleError, JobError, ReplayError, StoreError, KafkaUnavailable, PublishError,
            ValueError, FileNotFoundError) as exc:  # ValueError includes ModelError and TrainingError
        print(f"fabric-rca {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
