"""`fabric-rca`: replay, incidents, serve, simulate, evaluate, rules check, demo."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

EXIT_USAGE = 2


class CliError(Exception):
    """A problem the user can fix; printed without a traceback."""


def _db(args) -> str:
    from api.store.db import resolve_db_url
    return resolve_db_url(args.db, os.environ)


def _store_sink(db_url: str):
    from sqlmodel import Session

    from api.store.db import create_schema, make_engine
    from api.store.repository import upsert_incidents

    engine = make_engine(db_url)
    create_schema(engine)

    def sink(changes: list[dict]) -> None:
        with Session(engine) as session:
            upsert_incidents(session, incidents=changes)
    return engine, sink


def cmd_replay(args) -> int:
    from sqlmodel import Session

    from api.store.repository import save_topology
    from cli.progress import Progress
    from cli.run import build_pipeline
    from engine.topology import load_topology

    from engine.correlate import CorrelationConfig
    from engine.pipeline import EngineConfig

    topology = load_topology(args.topology)
    config = EngineConfig(lateness_s=args.lateness, correlation=CorrelationConfig(resolve_after_s=args.resolve_after))
    pipeline = build_pipeline(topology=topology, jobs_file=args.jobs, rule_files=args.rules, config=config)
    db_url = _db(args)
    engine, sink = _store_sink(db_url)
    with Session(engine) as session:
        save_topology(session, document=topology.to_dict())
    progress = Progress(enabled=False if args.quiet else None)
    from engine.replay import replay
    stats = replay(pipeline, args.files, sink=sink, speed=args.speed, rejects_path=args.rejects, progress=progress)
    progress.done()
    summary = stats.summary() | {"db": db_url, "rejects_file": str(args.rejects) if stats.rejects else None}
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"replayed {summary['records']:,} records from {len(args.files)} file(s) into {db_url}")
        print(f"  incidents opened: {summary['incidents_opened']}, resolved: {summary['incidents_resolved']}, "
              f"symptoms: {summary['symptoms']}")
        print(f"  rejected: {summary['rejected']}" + (f" {summary['rejects']} -> {args.rejects}" if summary["rejected"] else ""))
        print(f"  duplicates dropped: {summary['duplicates']}, counter resets: {summary['counter_resets']}, "
              f"ignored measurements: {summary['ignored_measurements'] or 0}, ignored fields: {summary['ignored_fields']}")
    return 0


def cmd_incidents(args) -> int:
    from sqlmodel import Session

    from api.format import incidents_table
    from api.store.db import create_schema, make_engine
    from api.store.repository import list_incidents

    engine = make_engine(_db(args))
    create_schema(engine)
    with Session(engine) as session:
        found = list_incidents(session, status=args.status, cause=args.cause, limit=args.limit)
    if args.format == "json":
        print(json.dumps(found, indent=2))
    else:
        print(incidents_table(found) if found else "no incidents")
    return 0


def cmd_serve(args) -> int:
    from api.server import serve
    from engine.topology import load_topology

    topology = load_topology(args.topology).to_dict() if args.topology else None
    db_url = _db(args)
    print(f"serving {db_url} on http://{args.host}:{args.port} (API docs: /docs)", file=sys.stderr)
    serve(db_url=db_url, host=args.host, port=args.port, topology=topology)
    return 0


def cmd_simulate(args) -> int:
    import sim

    if args.suite:
        paths = sim.simulate_suite(out=args.out, seed=args.seed)
        print(f"wrote {len(paths)} scenarios under {args.out}")
        return 0
    if not args.scenario:
        raise CliError(f"--scenario is required (one of: {', '.join(sim.SCENARIOS)}) unless --suite is given")
    truth = sim.simulate(out=args.out, scenario=args.scenario, seed=args.seed, duration=args.duration)
    print(f"wrote scenario {args.scenario!r} ({truth['records']:,} records, {len(truth['faults'])} fault(s)) to {args.out}")
    return 0


def cmd_evaluate(args) -> int:
    from cli.run import find_scenarios, replay_scenario
    from engine.evaluate import misses, score_scenario, table

    results = []
    for folder in find_scenarios(args.dirs):
        truth, incidents, stats = replay_scenario(folder, rule_files=args.rules)
        results.append(score_scenario(truth, incidents))
        print(f"  {folder.name}: {stats.records:,} records, {len(incidents)} incident(s)", file=sys.stderr)
    print(table(results))
    for line in misses(results):
        print("  miss: " + line)
    if args.write:
        args.write.parent.mkdir(parents=True, exist_ok=True)
        args.write.write_text(_accuracy_doc(results, args))
        print(f"wrote {args.write}", file=sys.stderr)
    return 0


def _accuracy_doc(results, args) -> str:
    from engine.evaluate import misses, table
    lines = [
        "# Diagnosis accuracy",
        "",
        "Generated by `fabric-rca evaluate " + " ".join(str(d) for d in args.dirs) + f" --write {args.write}` "
        "on scenarios from `fabric-rca simulate --suite` (rules only, no anomaly models); "
        "`scripts/accuracy` rebuilds the suite and this page in one command.",
        "Expectations come from each scenario's `truth.json` (what the generator injected), not from the engine.",
        "",
        "Columns: detection recall; top-1/top-3 root-cause accuracy (cause and entity); incident precision "
        "(incidents that are the one incident of an injected fault / all incidents); false incidents per hour "
        "of clean telemetry; affected-job precision/recall/F1; detection delay (`detected_at` minus fault start, "
        "event time).",
        "",
        table(results, markdown=True),
        "",
        "Scenarios: " + ", ".join(f"`{r.scenario}`" for r in results) + ".",
        "",
    ]
    bad = misses(results)
    lines += ["Misses:", ""] + [f"- {m}" for m in bad] if bad else ["Misses: none."]
    return "\n".join(lines) + "\n"


def cmd_rules_check(args) -> int:
    from rules.loader import default_rule_files, load_rules

    files = args.files or default_rule_files()
    ruleset = load_rules(files)
    print(f"ok: {len(ruleset.rules) + len(ruleset.silence)} rules in {len(files)} file(s)")
    return 0


def cmd_demo(args) -> int:
    from cli.demo import run_demo
    return run_demo(out=args.out, port=args.port, serve=not args.no_serve, seed=args.seed)


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be greater than 0")
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fabric-rca", description="Root-cause diagnosis for AI-cluster RoCE fabrics.")
    sub = p.add_subparsers(dest="command", required=True)
    db_help = "SQLAlchemy URL or SQLite file (default: $FABRIC_RCA_DB, else sqlite:///fabric-rca.db)"

    r = sub.add_parser("replay", help="replay recorded telemetry in-process into the store")
    r.add_argument("files", nargs="+", type=Path, metavar="FILE", help=".jsonl or .jsonl.gz telemetry")
    r.add_argument("--topology", type=Path, required=True, help="DOT, containerlab YAML or fabric-rca JSON")
    r.add_argument("--jobs", type=Path, help="job_placement .jsonl or squeue --json document")
    r.add_argument("--db", help=db_help)
    r.add_argument("--speed", type=_positive, help="pace event time at N times real time (default: as fast as possible)")
    r.add_argument("--rules", type=Path, action="append", help="rule file (repeatable; default: built-in catalogue)")
    r.add_argument("--rejects", type=Path, default=Path("rejects.jsonl"), help="where unreadable records go")
    r.add_argument("--resolve-after", type=_positive, default=60.0, metavar="SECONDS",
                   help="resolve an incident after its symptoms stay quiet this long (event time; default 60)")
    r.add_argument("--lateness", type=_positive, default=5.0, metavar="SECONDS",
                   help="how late a record may arrive and still be put in order (default 5)")
    r.add_argument("--json", action="store_true", help="print the end summary as JSON")
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    r.set_defaults(fn=cmd_replay)

    i = sub.add_parser("incidents", help="list stored incidents")
    i.add_argument("--db", help=db_help)
    i.add_argument("--format", choices=("table", "json"), default="table")
    i.add_argument("--status", choices=("open", "resolved"))
    i.add_argument("--cause")
    i.add_argument("--limit", type=int, default=100)
    i.set_defaults(fn=cmd_incidents)

    s = sub.add_parser("serve", help="serve the HTTP API")
    s.add_argument("--db", help=db_help)
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--topology", type=Path, help="serve this topology at /topology (default: the one stored by replay)")
    s.set_defaults(fn=cmd_serve)

    g = sub.add_parser("simulate", help="generate a scenario: topology, jobs, telemetry and truth")
    g.add_argument("--out", type=Path, required=True)
    g.add_argument("--scenario")
    g.add_argument("--seed", type=int, default=1)
    g.add_argument("--duration", type=float, help="seconds of event time (default: the scenario's)")
    g.add_argument("--suite", action="store_true", help="write every scenario under OUT/<name>/")
    g.set_defaults(fn=cmd_simulate)

    e = sub.add_parser("evaluate", help="replay scenarios and score the diagnosis against their truth")
    e.add_argument("dirs", nargs="+", type=Path, metavar="DIR")
    e.add_argument("--rules", type=Path, action="append")
    e.add_argument("--write", type=Path, help="also write the results as Markdown (e.g. docs/accuracy.md)")
    e.set_defaults(fn=cmd_evaluate)

    ru = sub.add_parser("rules", help="rule files")
    rsub = ru.add_subparsers(dest="rules_command", required=True)
    rc = rsub.add_parser("check", help="validate rule files offline")
    rc.add_argument("files", nargs="*", type=Path)
    rc.set_defaults(fn=cmd_rules_check)

    d = sub.add_parser("demo", help="generate a small faulty fabric, replay it, serve the API")
    d.add_argument("--out", type=Path, default=Path("demo-out"))
    d.add_argument("--port", type=int, default=8000)
    d.add_argument("--seed", type=int, default=1)
    d.add_argument("--no-serve", action="store_true", help="stop after printing the incidents")
    d.set_defaults(fn=cmd_demo)
    return p


def main(argv: list[str] | None = None) -> int:
    from api.store.db import StoreError
    from engine.jobs import JobError
    from engine.replay import ReplayError
    from engine.topology import TopologyError
    from rules.loader import RuleError

    args = parser().parse_args(argv)
    try:
        return args.fn(args)
    except (CliError, TopologyError, RuleError, JobError, ReplayError, StoreError, ValueError, FileNotFoundError) as exc:
        print(f"fabric-rca {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
