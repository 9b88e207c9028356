"""`fabric-rca worker`: the faust-streaming workers on Kafka, with the engine flags of replay."""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from cli.common import DB_HELP, CliError, count, db_url, kafka_security_arguments, positive


MAX_DETECT_PROCESSES = 16
DEFAULT_DETECT_PROCESSES = 4


def add(sub) -> None:
    from cli.engine_flags import add_engine_arguments
    from cli.notify_flags import add_notify_arguments
    w = sub.add_parser("worker", help="run the faust-streaming workers on Kafka")
    w.add_argument("--bootstrap", metavar="HOST:PORT", help="Kafka bootstrap (or FABRIC_RCA_BOOTSTRAP)")
    w.add_argument("--db", help=DB_HELP)
    add_engine_arguments(w, from_env=True)
    w.add_argument("--topic-prefix", default="", help="prefix every topic and the consumer group (tests, shared brokers)")
    w.add_argument("--telemetry-topic", action="append", metavar="TOPIC",
                   help="a telemetry topic to read, keyed by host (repeat for several; or FABRIC_RCA_TELEMETRY_TOPICS, "
                        "comma-separated; default fabric.telemetry)")
    w.add_argument("--idle-partition-s", type=positive, default=30.0, metavar="S",
                   help="correlation waits for every telemetry partition; one silent this many seconds longer "
                        "than the others is not waited for until it sends again (default 30)")
    w.add_argument("--rebuild-max-records", type=count, default=1_000_000, metavar="N",
                   help="a stage whose checkpoint is refused re-reads at most the last N messages of its partition "
                        "(default 1000000; 0: none)")
    w.add_argument("--rebuild-max-bytes", type=count, default=1 << 30, metavar="B",
                   help="... and at most B bytes of them (default 1 GiB)")
    w.add_argument("--detect-processes", type=int, choices=range(MAX_DETECT_PROCESSES + 1), metavar="N",
                   help="child processes the detect stages run in, beside faust and correlation (a partition's stage in "
                        "child partition %% N); 0: in the worker's process (or FABRIC_RCA_DETECT_PROCESSES; "
                        "default 4 with two usable cores or more, else 0)")
    w.add_argument("--metrics-port", type=int, default=9108, help="HTTP port of /healthz (default 9108)")
    w.add_argument("--metrics-bind", default="127.0.0.1")
    w.add_argument("--data-dir", default=".fabric-rca-worker", help="faust's local state folder")
    w.add_argument("--loglevel", default="WARNING", help="WARNING (default: quiet), INFO or DEBUG")
    w.add_argument("--log-format", choices=("json", "text"), default="json", help="structured JSON lines (default)")
    add_notify_arguments(w)
    kafka_security_arguments(w)
    w.set_defaults(fn=run)


def run(args) -> int:
    from streams.app import run_worker

    run_worker(worker_settings(args))
    return 0


def worker_settings(args):
    """The worker's settings from its flags, falling back to FABRIC_RCA_* variables."""
    from cli.engine_flags import engine_settings
    from cli.notify_flags import notify_settings_from
    from compose.engine import load_models
    from engine.mapping import default_mappings
    from streams import security
    from streams.settings import WorkerSettings
    from streams.topics import parse_bootstrap

    env = os.environ
    engine = engine_settings(args, env)
    load_models(engine.models_dir)  # fail now, with the reason, rather than inside the worker
    default_mappings(engine.mapping_dirs)  # (MappingError names the file, the mapping and the key)
    bootstrap = args.bootstrap or env.get("FABRIC_RCA_BOOTSTRAP")
    if not bootstrap or engine.topology is None:
        raise CliError("--bootstrap (or FABRIC_RCA_BOOTSTRAP) and --topology (or FABRIC_RCA_TOPOLOGY) are required")
    common = dict(
        bootstrap=parse_bootstrap(bootstrap), db_url=db_url(args), engine=engine,
        web_port=args.metrics_port, web_bind=args.metrics_bind, loglevel=args.loglevel, log_format=args.log_format,
        data_dir=Path(args.data_dir), idle_partition_s=args.idle_partition_s,
        rebuild_max_records=args.rebuild_max_records, rebuild_max_bytes=args.rebuild_max_bytes,
        kafka_security=security.from_args(args, env), detect_processes=detect_processes(args, env),
        notify=notify_settings_from(args, console_default="http://127.0.0.1:8000", topology=engine.topology,
                                    env=env),
    )
    settings = WorkerSettings.with_prefix(args.topic_prefix, **common) if args.topic_prefix else WorkerSettings(**common)
    topics = args.telemetry_topic or [t.strip() for t in env.get("FABRIC_RCA_TELEMETRY_TOPICS", "").split(",") if t.strip()]
    if topics:
        settings = dataclasses.replace(settings, telemetry_topics=tuple(args.topic_prefix + t for t in topics))
    return settings


def detect_processes(args, env) -> int:
    """--detect-processes, else FABRIC_RCA_DETECT_PROCESSES, else DEFAULT_DETECT_PROCESSES where a
    second core can run them (one per partition of a default topic: on 2 cores 1, 2 and 4 children
    took a worker to 21, 26 and 28 % of faust's raw rate, docs/benchmarks.md)."""
    from engine.shards import usable_cores

    if args.detect_processes is not None:
        return args.detect_processes
    raw = env.get("FABRIC_RCA_DETECT_PROCESSES", "").strip()
    if not raw:
        return DEFAULT_DETECT_PROCESSES if usable_cores() >= 2 else 0
    if not raw.isdigit() or int(raw) > MAX_DETECT_PROCESSES:
        raise CliError(f"FABRIC_RCA_DETECT_PROCESSES={raw!r}: expected a count from 0 to {MAX_DETECT_PROCESSES}")
    return int(raw)


def add_topics(sub) -> None:
    t = sub.add_parser("topics", help="Kafka topics")
    tsub = t.add_subparsers(dest="topics_command", required=True)
    tc = tsub.add_parser("create", help="create the pipeline's topics if missing")
    tc.add_argument("--bootstrap", metavar="HOST:PORT")
    tc.add_argument("--partitions", type=int, default=4)
    tc.add_argument("--prefix", default="")
    kafka_security_arguments(tc)
    tc.set_defaults(fn=run_topics)


def run_topics(args) -> int:
    from streams import security
    from streams.topics import ensure_topics, parse_bootstrap, pipeline_topics

    bootstrap = parse_bootstrap(args.bootstrap or os.environ.get("FABRIC_RCA_BOOTSTRAP", ""))
    wanted = pipeline_topics(args.prefix, args.partitions)
    created = ensure_topics(bootstrap=bootstrap, topics=wanted, security=security.from_args(args))
    for name in wanted:
        print(f"{name}: {'created' if name in created else 'exists'}")
    return 0
