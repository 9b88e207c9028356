"""`fabric-rca replay`: recorded telemetry through the engine into the store, or onto Kafka."""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from cli.common import DB_HELP, db_url, kafka_security_arguments, positive


def add(sub) -> None:
    from cli.engine_flags import add_engine_arguments
    from cli.notify_flags import add_notify_arguments
    r = sub.add_parser("replay", help="replay recorded telemetry in-process into the store")
    r.add_argument("files", nargs="+", type=Path, metavar="FILE", help=".jsonl or .jsonl.gz telemetry")
    add_engine_arguments(r, from_env=False, required=("--topology",))
    r.add_argument("--db", help=DB_HELP)
    r.add_argument("--speed", type=positive, help="pace event time at N times real time (default: as fast as possible)")
    r.add_argument("--shards", type=shard_count, default=None, metavar="N",
                   help="detect on N processes, each taking a share of the devices, with the same incidents "
                        "(default: one per usable core, at most 4; 1: all in this process; a paced replay, --speed, "
                        "runs in this process)")
    r.add_argument("--rejects", type=Path, default=Path("rejects.jsonl"), help="where unreadable records go")
    r.add_argument("--to-kafka", metavar="HOST:PORT", help="publish to Kafka (keyed by host) instead of diagnosing in-process")
    r.add_argument("--topic", default="fabric.telemetry", help="telemetry topic for --to-kafka")
    r.add_argument("--jobs-topic", default="fabric.jobs", help="jobs topic for --to-kafka")
    r.add_argument("--json", action="store_true", help="print the end summary as JSON")
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    add_notify_arguments(r)
    kafka_security_arguments(r)
    r.set_defaults(fn=run)


def shard_count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if not 1 <= n <= 64:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to 64, got {text!r}")
    return n


def run(args) -> int:
    if args.to_kafka:
        return _to_kafka(args)
    from api.store.db import redacted_url
    from api.store.sink import StoreSink
    from cli.engine_flags import engine_settings
    from cli.progress import Progress
    from cli.run import failed_files_line, failure_dict, replay_exit_code
    from api.maintenance import StoreWindows
    from cli.notify_flags import notifier_from
    from compose import build_engine, replay_with
    from engine.shards import default_shards

    parts = build_engine(engine_settings(args))
    url = db_url(args)
    notifier = notifier_from(args, console_default="http://127.0.0.1:8000", topology=args.topology)
    sink = StoreSink(url, topology=parts.topology.to_dict(), notifier=notifier)
    windows = StoreWindows(engine=sink.engine)  # the store's windows mark incidents as they are published
    parts = dataclasses.replace(parts, maintenance=windows)
    if parts.models is not None and not args.quiet:
        print(f"anomaly models from {args.models}: {parts.models.describe()}", file=sys.stderr)
    progress = Progress(enabled=False if args.quiet else None)
    failures: list = []  # files that broke part-way (engine.replay.FileFailure): reported, then exit 1
    shards = args.shards or default_shards()
    stats = replay_with(parts, args.files, shards=shards, speed=args.speed, sink=sink.write, rejects_path=args.rejects,
                        progress=progress, on_file_error=failures.append)
    progress.done()
    windows.close()
    summary = stats.summary() | {"shards": 1 if args.speed else shards, "db": redacted_url(url), "rejects_file": str(args.rejects) if stats.rejects else None,
                                 "failed_files": [failure_dict(f) for f in failures]}
    if parts.cabling is not None:  # --lldp: how the survey's cabling compares (miswired links are incidents)
        summary["cabling"] = parts.cabling.summary
    if notifier is not None:
        unsent = notifier.close(timeout=30.0)
        summary["notifications"] = {name: fig | {"unsent": unsent[name]} for name, fig in notifier.figures().items()}
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        _print_summary(summary, args)
    if failures:
        print(failed_files_line(failures, total=len(args.files)), file=sys.stderr)
    return replay_exit_code(failures)


def _print_summary(summary: dict, args) -> None:
    print(f"replayed {summary['records']:,} records from {len(args.files)} file(s) into {summary['db']}")
    print(f"  incidents opened: {summary['incidents_opened']}, resolved: {summary['incidents_resolved']}, "
          f"symptoms: {summary['symptoms']}")
    print(f"  rejected: {summary['rejected']}" + (f" {summary['rejects']} -> {args.rejects}" if summary["rejected"] else ""))
    print(f"  duplicates dropped: {summary['duplicates']}, counter resets: {summary['counter_resets']}, "
          f"ignored measurements: {summary['ignored_measurements'] or 0}, ignored fields: {summary['ignored_fields']}")
    for reason, fig in summary["unused"].items():
        print(f"  not used ({reason.replace('_', ' ')}): {fig['count']:,}, e.g. {fig['example']}")
    if summary["mapped"]:
        print(f"  mapped from real exporters: {summary['mapped']}")
    if summary["merged_halves"]:
        print(f"  halves merged: {summary['merged_halves']} ({summary['conflicting_fields']} conflicting fields)")
    if summary["late_superseded"]:
        print(f"  late records behind a newer sample of their series (taken, no rate): {summary['late_superseded']}")
    if "cabling" in summary:
        c = summary["cabling"]
        print(f"  cabling against {args.lldp}: {c['matching']} matching, {c['miswired']} miswired (link_miswired "
              f"incidents), {c['missing']} missing, {c['extra']} extra, {c['unverified']} unverified")
    for host, c in summary["clock_suspect_devices"].items():
        print(f"  device {host}'s clock is {c['ahead_s']:.0f} s ahead: {c['future_timestamps']} records quarantined")
    for name, fig in summary.get("notifications", {}).items():
        print(f"  {name}: {fig['sent']} sent, {fig['failures']} failed attempts, "
              f"{fig['refused'] + fig['dropped']} dropped, {fig['unsent']} unsent")


def _to_kafka(args) -> int:
    from cli.engine_flags import engine_settings
    from cli.run import failed_files_line, replay_exit_code
    from engine.topology import load_topology
    from streams import security
    from streams.publish import publish_files
    from streams.topics import DEFAULT_PARTITIONS, ensure_topics

    load_topology(args.topology)  # fail early on a bad topology, as the embedded replay does
    if args.lldp is not None:  # (not a record: nothing to send; the workers check their own survey)
        print(f"note: --lldp {args.lldp} is not sent to Kafka: give it to the workers (--lldp or FABRIC_RCA_LLDP)",
              file=sys.stderr)
    show = sys.stderr.isatty() and not args.quiet

    def progress(st) -> None:
        if show:
            sys.stderr.write(f"\r{st.records:,} records sent  {st.rate:,.0f} rec/s   ")
            sys.stderr.flush()

    kafka = security.from_args(args)
    # Create the topics as the workers expect them (auto-creation would make 1 partition).
    ensure_topics(bootstrap=args.to_kafka, topics={args.topic: DEFAULT_PARTITIONS, args.jobs_topic: DEFAULT_PARTITIONS},
                  security=kafka)
    stats = publish_files(args.files, bootstrap=args.to_kafka, topic=args.topic, jobs_file=args.jobs,
                          jobs_topic=args.jobs_topic, speed=args.speed, progress=progress, security=kafka,
                          rejects_path=args.rejects, job_labels=engine_settings(args).pod_labels)
    if show:
        sys.stderr.write("\n")
    print(f"sent {stats.records:,} records and {stats.jobs} job snapshots to {args.to_kafka} ({args.topic}); "
          f"rejected {stats.rejected}" + (f" {dict(sorted(stats.rejects.items()))}" if stats.rejected else "")
          + (f" -> {args.rejects}" if stats.rejected and args.rejects else ""))
    if stats.failed_files:
        print(failed_files_line(stats.failed_files, total=len(args.files)), file=sys.stderr)
    return replay_exit_code(stats.failed_files)
