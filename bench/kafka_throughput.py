"""Kafka throughput: records/s of the faust workers end to end vs. consuming alone.

    .venv/bin/python bench/kafka_throughput.py [--records 200000] [--bootstrap HOST:PORT]
                                               [--out docs/benchmarks.md] [--mapped]

Generates (once, cached under .cache/bench/) a pfc_storm scenario of at least --records
telemetry records, starts a broker of its own (scripts/kafka-dev on free ports, a temporary
state folder; testkit.services.KafkaDev) unless --bootstrap is given, publishes the scenario
to fresh topic prefixes (raw, one per one-worker run, two workers) and measures, in one run (the raw
consumers and one worker --repeat times, interleaved; the run of median duration counts):
  raw aiokafka - an AIOKafkaConsumer (the Kafka client under faust) reading the telemetry
              topic from the beginning to its end offsets in getmany batches, no processing
  raw faust - the workers' own faust app (`streams.app.new_app`: same transport and
              settings) in a fresh process with one agent that only counts the messages;
              timed from its first message to its last
  1 worker  - one `cli.main worker` process: from the moment it answers /healthz until
              /metrics fabric_rca_records_total reaches the records published and the
              incident is in its SQLite store
  2 workers - the same with two worker processes, measured from the moment both answer
              /healthz plus 3 s for the consumer group to settle (the data is already in
              the topic: measurement starts when consumption can start)
For the ratio to faust's raw rate, a worker is timed by its own clock, as the raw consumers
time themselves: from the first telemetry message it took to the last it finished
(fabric_rca_first_read_timestamp_seconds, fabric_rca_last_read_timestamp_seconds).
It also samples fabric_rca_processing_delay_seconds every 0.25 s (the max is reported) and
reads the incident's detection delay in event time (detected_at - opened_at) from the store.
Every process it starts (broker, workers, the raw consumer) is stopped at the end.
`--mapped` measures one worker with mapping on instead (bench/kafka_mapped.py says how).

FABRIC_RCA_BENCH_PROFILE=DIR runs the one-worker process under cProfile and writes
DIR/worker-one.prof (profiling slows the worker down: the figures of that run are not
comparable).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.kafka_report import FABRIC, SAMPLE_EVERY_S, SETTLE_S, Measured, report  # noqa: E402
from bench.kafka_report import messages as telemetry_messages  # noqa: E402
from testkit.ports import free_port  # noqa: E402
from testkit.services import KafkaDev  # noqa: E402
from testkit.store import stored_incidents  # noqa: E402
from testkit.workers import Fleet, WorkerProcess  # noqa: E402

RECORDS_PER_SECOND = 528  # of that fabric, measured: ports + queues, NICs, storage
STALL_S = 60.0  # no record counted for this long: the worker is stuck (see its log)


# ------------------------------------------------------------------ the scenario


def generate(records: int, cache: Path) -> Path:
    """A pfc_storm scenario of >= `records` records, generated once. The fault's start and
    length scale with a duration shorter than the nominal 300 s, so it stays inside."""
    import sim

    spec = sim.FabricSpec(**FABRIC)
    duration = int(records / RECORDS_PER_SECOND * 1.02) + 5
    out = cache / f"kafka-{records}"
    truth_file = out / "truth.json"
    if truth_file.exists():
        cached = json.loads(truth_file.read_text())
        if cached["records"] >= records and all(cached["fabric"][k] == v for k, v in FABRIC.items()):
            return out
    print(f"generating >= {records:,} records into {out} (once) ...", file=sys.stderr)
    while True:
        truth = sim.simulate(out=out, scenario="pfc_storm", seed=3, fabric=spec, duration=duration)
        fault_inside = all(truth["start"] <= f["start"] and f["end"] <= truth["end"] for f in truth["faults"])
        if truth["records"] >= records and fault_inside:
            return out
        duration = int(duration * max(1.0, records / truth["records"]) * 1.05) + 10


# ------------------------------------------------------------------ measurements


async def _consume_all(bootstrap: str, topic: str) -> dict:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                auto_offset_reset="earliest")
    await consumer.start()
    try:
        # partitions_for_topic only knows subscribed topics: ask the cluster's metadata instead
        cluster = await consumer._client.fetch_all_metadata()
        tps = [TopicPartition(topic, p) for p in sorted(cluster.partitions_for_topic(topic) or ())]
        if not tps:
            raise RuntimeError(f"topic {topic} has no partitions")
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        end = {tp: off for tp, off in (await consumer.end_offsets(tps)).items()}
        remaining = {tp for tp in tps if end[tp] > 0}
        n = nbytes = 0
        t0 = time.perf_counter()
        while remaining:
            batches = await consumer.getmany(*remaining, timeout_ms=1000)
            for tp, msgs in batches.items():
                n += len(msgs)  # Kafka messages: one metric, or one host's batch of metrics
                nbytes += sum(len(m.value) for m in msgs)
                if msgs[-1].offset + 1 >= end[tp]:
                    remaining.discard(tp)
        return {"messages": n, "seconds": time.perf_counter() - t0, "bytes": nbytes}
    finally:
        await consumer.stop()


def measure_raw(bootstrap: str, topic: str, *, records: int, messages: int) -> dict:
    """aiokafka alone, in a fresh process (as the workers are). It reads messages without
    decoding them, so its records are the ones published in those messages."""
    out = subprocess.run([sys.executable, __file__, "--child-raw", bootstrap, topic], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"the raw consumer failed ({out.returncode}):\n{out.stderr[-3000:]}")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    if r["messages"] != messages:
        raise RuntimeError(f"the raw consumer read {r['messages']:,} messages of {topic}, {messages:,} were published")
    r["records"] = records
    r["rate"] = records / r["seconds"]
    return r


def _faust_count(bootstrap: str, prefix: str, messages: int, topology: str, tmp: str, attempt: str) -> None:
    """The child of `measure_faust`: the worker's faust app (`streams.app.new_app`: same
    transport, consumer and broker settings) with one agent that only counts the telemetry
    messages (no decoding, acked as faust acks), as a worker process runs it. Prints the
    seconds from the first message to the last as JSON, then stops like a worker on SIGTERM."""
    import asyncio

    from faust.worker import Worker as FaustWorker

    from streams.app import new_app
    from compose import EngineSettings
    from streams.settings import WorkerSettings

    settings = WorkerSettings.with_prefix(f"{prefix}faustraw{attempt}.", bootstrap=bootstrap, db_url="sqlite://",
                                          engine=EngineSettings(topology=Path(topology)), web_port=free_port(),
                                          data_dir=Path(tmp))
    app = new_app(settings)
    telemetry = app.topic(prefix + "fabric.telemetry", key_type=bytes, value_type=bytes,
                          key_serializer="raw", value_serializer="raw")
    seen = {"n": 0, "bytes": 0, "t0": 0.0}

    @app.agent(telemetry, concurrency=1)
    async def count(stream):
        async for event in stream.events():
            if seen["n"] == 0:
                seen["t0"] = time.perf_counter()
            seen["n"] += 1
            seen["bytes"] += len(event.value)
            if seen["n"] == messages:
                print(json.dumps({"messages": seen["n"], "bytes": seen["bytes"],
                                  "seconds": time.perf_counter() - seen["t0"]}), flush=True)
                asyncio.get_running_loop().call_soon(os.kill, os.getpid(), signal.SIGTERM)

    worker = FaustWorker(app, loglevel="WARNING", quiet=True, redirect_stdouts=False)
    worker.spinner = None  # as run_worker does when not on a terminal: no escape codes around the JSON
    worker.execute_from_commandline()


def measure_faust(bootstrap: str, prefix: str, *, records: int, messages: int, topology: Path, tmp: Path,
                  tag: str) -> dict:
    """faust-streaming alone (the library the workers consume with), in a fresh process.
    Timed from its first message to its last, so group joining is not counted: a worker is
    timed from /healthz, which comes before it, so this ratio is the conservative one."""
    for attempt in range(3):
        # A fresh group (a new app id) each time. On a broker that has just started, the
        # first consumer group can meet "GroupCoordinatorNotAvailable" while the offsets
        # topic is being created, and faust then stops without error: try again.
        folder = tmp / f"faust-raw-{tag}-{attempt}"
        folder.mkdir(exist_ok=True)
        out = subprocess.run([sys.executable, __file__, "--child-faust", bootstrap, prefix, str(messages),
                              str(topology), str(folder), f"{tag}-{attempt}"],
                             cwd=ROOT, capture_output=True, text=True, timeout=600)
        # faust's terminal codes (cursor off/on) may precede the JSON on its line
        lines = [ln[ln.index("{"):] for ln in out.stdout.splitlines() if "{" in ln]
        if lines:
            break
        print(f"the faust consumer printed no result ({out.returncode}), trying again:\n{out.stderr[-1000:]}",
              file=sys.stderr)
    else:
        raise RuntimeError(f"the faust consumer printed no result ({out.returncode}):\n{out.stderr[-3000:]}")
    r = json.loads(lines[-1])
    r["records"] = records
    r["rate"] = records / r["seconds"]
    return r


def _ts(text: str | None) -> float | None:
    return None if text is None else datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _found(incidents: list[dict], cause: str) -> dict | None:
    for inc in incidents:
        if any(rc["cause"] == cause for rc in inc["root_causes"]):
            return inc
    return None


def _start_workers(fleet: Fleet, n: int, label: str, profile: bool) -> list[WorkerProcess]:
    """n workers answering /healthz (the one of a one-worker run under cProfile with
    FABRIC_RCA_BENCH_PROFILE and `profile`)."""
    from api.store.db import create_schema, make_engine

    # The schema first: workers started together on a fresh SQLite file race on CREATE TABLE
    # (the loser exits with "table ... already exists").
    engine = make_engine(f"sqlite:///{fleet.db}")
    create_schema(engine)
    engine.dispose()
    profile_dir = os.environ.get("FABRIC_RCA_BENCH_PROFILE") if profile else None
    for i in range(n):
        prof = Path(profile_dir) / f"worker-{label}.prof" if profile_dir and n == 1 else None
        if prof:
            prof.parent.mkdir(parents=True, exist_ok=True)
        fleet.spawn(f"{label}-{i}", profile=prof)
    deadline = time.monotonic() + 90
    waiting = list(fleet.workers)
    while waiting:
        if time.monotonic() > deadline:
            raise RuntimeError("workers did not answer /healthz within 90 s:\n" + "\n".join(w.tail() for w in waiting))
        waiting = [w for w in waiting if not w.healthy()]
        if waiting:
            time.sleep(0.1)
    return fleet.workers


def _until_done(workers: list[WorkerProcess], db: Path, *, published: int, cause: str,
                timeout_s: float) -> tuple[dict, dict]:
    """Sample /metrics every SAMPLE_EVERY_S s until the records published are counted and
    the incident is stored: (the seconds it took from now and what the samples saw, the
    incident)."""
    t0 = time.perf_counter()
    at_start = sum(w.metrics()["fabric_rca_records_total"] for w in workers)
    max_delay, samples, counted, incident = 0.0, 0, at_start, None
    next_sample = moved = t0
    while True:
        now = time.perf_counter()
        if now - t0 > timeout_s or now - moved > STALL_S:
            why = f"after {timeout_s:.0f} s" if now - t0 > timeout_s else f"no progress for {STALL_S:.0f} s"
            raise RuntimeError(f"{len(workers)} worker(s): {counted:,.0f} of {published:,} records and incident "
                               f"{'found' if incident else 'not found'} {why}:\n"
                               + "\n".join(w.tail() for w in workers))
        ms = [w.metrics() for w in workers]
        before, counted = counted, sum(m["fabric_rca_records_total"] for m in ms)
        if counted != before:
            moved = now
        max_delay = max([max_delay] + [m["fabric_rca_processing_delay_seconds"] for m in ms])
        samples += 1
        if incident is None:
            incident = _found(stored_incidents(db), cause)
        if counted >= published and incident is not None:
            return {"seconds": time.perf_counter() - t0, "counted": int(counted), "counted_at_start": int(at_start),
                    "max_delay_s": max_delay, "samples": samples}, incident
        next_sample += SAMPLE_EVERY_S
        time.sleep(max(0.0, next_sample - time.perf_counter()))


def _rejects(clocks: list[dict[str, float]]) -> dict[str, int]:
    """The workers' rejects by reason, then their dead-lettered messages and duplicates."""
    rejects: dict[str, int] = {}
    for m in clocks:
        for name, v in m.items():
            if name.startswith('fabric_rca_rejects_total{reason="') and v:
                reason = name.split('"')[1]
                rejects[reason] = rejects.get(reason, 0) + int(v)
        rejects["(dead-lettered)"] = rejects.get("(dead-lettered)", 0) + int(m["fabric_rca_dead_lettered_total"])
        rejects["(duplicates)"] = rejects.get("(duplicates)", 0) + int(m["fabric_rca_duplicates_total"])
    return rejects


def measure_workers(n: int, *, bootstrap: str, folder: Path, prefix: str, published: int, cause: str,
                    tmp: Path, timeout_s: float, label: str, profile: bool = False) -> dict:
    db = tmp / f"{label}.db"
    fleet = Fleet(tmp, folder, bootstrap, prefix=prefix, db=db)
    try:
        workers = _start_workers(fleet, n, label, profile)
        if n > 1:
            time.sleep(SETTLE_S)
        run, incident = _until_done(workers, db, published=published, cause=cause, timeout_s=timeout_s)
        incident = _found(stored_incidents(db), cause) or incident  # its latest version
        # Busy time by the workers' own clocks, as the raw consumers time themselves: from the
        # first telemetry message any of them took to the last one any of them finished.
        clocks = [w.metrics() for w in workers]
        first = min(m["fabric_rca_first_read_timestamp_seconds"] for m in clocks
                    if m["fabric_rca_first_read_timestamp_seconds"] > 0)
        busy_s = max(m["fabric_rca_last_read_timestamp_seconds"] for m in clocks) - first
        health = [w.health() for w in workers]
        return run | {
            "records": published, "rate": published / run["seconds"],
            "busy_s": busy_s, "busy_rate": published / busy_s,
            "detection_delay_s": _ts(incident["detected_at"]) - _ts(incident["opened_at"]),
            "incident": incident["id"], "top_cause": incident["root_causes"][0]["cause"],
            "top_entity": incident["root_causes"][0]["entity"]["id"],
            "stages": [sorted(h["stages"]) for h in health], "rejects": _rejects(clocks),
        }
    finally:
        for w in fleet.workers:
            try:
                w.stop()
            except Exception as exc:  # noqa: BLE001 - stop the others regardless
                print(f"could not stop worker {w.name}: {exc}", file=sys.stderr)


def _delete_topics(bootstrap: str, stem: str) -> None:
    """Best effort, on a broker that is not ours: the run's topics (faust's internal ones too)."""
    from streams.topics import admin_client

    admin = admin_client(bootstrap=bootstrap)
    try:
        mine = [t for t in admin.list_topics() if t.startswith(stem)]
        if mine:
            admin.delete_topics(mine)
    finally:
        admin.close()


# ------------------------------------------------------------------ main


def _on_sigterm(signum, frame):  # so that `finally` blocks stop what we started
    raise SystemExit(128 + signum)


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--bootstrap", metavar="HOST:PORT", help="use this broker instead of starting one")
    ap.add_argument("--cache", type=Path, default=ROOT / ".cache" / "bench")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks.md")
    ap.add_argument("--timeout", type=float, default=600, help="seconds to wait for one measured run")
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs of each raw consumer and of one worker, interleaved; medians are reported")
    ap.add_argument("--mapped", action="store_true",
                    help="one worker with mapping on (nic_port as inputs.ethtool) beside one on contract names, "
                         "--repeat rounds; its own section (bench/kafka_mapped.py)")
    ap.add_argument("--child-raw", nargs=2, metavar=("BOOTSTRAP", "TOPIC"), help=argparse.SUPPRESS)
    ap.add_argument("--child-faust", nargs=6, help=argparse.SUPPRESS)
    return ap


def _child(args) -> None:
    """The raw consumers' processes, with the workers' process settings (cli.main applies them there)."""
    from cli.runtime import tune_gc

    tune_gc()
    if args.child_faust:
        bootstrap, prefix, n, topology, tmp, attempt = args.child_faust
        _faust_count(bootstrap, prefix, int(n), topology, tmp, attempt)
    else:
        import asyncio

        print(json.dumps(asyncio.run(_consume_all(*args.child_raw))))


def _publish(bootstrap: str, folder: Path, prefixes: dict[str, str]) -> dict[str, object]:
    from streams.publish import publish_files
    from streams.topics import ensure_topics, pipeline_topics

    for prefix in prefixes.values():
        ensure_topics(bootstrap=bootstrap, topics=pipeline_topics(prefix))
    published = {}
    for name, prefix in prefixes.items():
        print(f"publishing {folder.name} to {prefix}* ...", file=sys.stderr)
        published[name] = publish_files([folder / "telemetry.jsonl.gz"], bootstrap=bootstrap,
                                        topic=prefix + "fabric.telemetry", jobs_topic=prefix + "fabric.jobs")
    return published


def _rounds(args, bootstrap: str, folder: Path, truth: dict, prefixes: dict[str, str], tmp: Path) -> Measured:
    """Publish, then the raw consumers and one worker --repeat times, interleaved (so a
    noisy minute hits all three alike), then two workers."""
    published = _publish(bootstrap, folder, prefixes)
    cause = truth["faults"][0]["cause"]
    records, raw_messages = published["raw"].records, telemetry_messages(published["raw"])
    raws, fraws, oneruns = [], [], []
    for i in range(args.repeat):
        name = f"one{i}"
        print(f"round {i + 1} of {args.repeat}: raw aiokafka consumer, raw faust-streaming consumer, "
              "one worker ...", file=sys.stderr)
        raws.append(measure_raw(bootstrap, prefixes["raw"] + "fabric.telemetry", records=records,
                                messages=raw_messages))
        fraws.append(measure_faust(bootstrap, prefixes["raw"], records=records, messages=raw_messages,
                                   topology=folder / "topology.dot", tmp=tmp, tag=str(i)))
        oneruns.append(measure_workers(1, bootstrap=bootstrap, folder=folder, prefix=prefixes[name],
                                       cause=cause, published=published[name].records, tmp=tmp,
                                       timeout_s=args.timeout, label=name, profile=i == 0))
    print("two workers ...", file=sys.stderr)
    two = measure_workers(2, bootstrap=bootstrap, folder=folder, prefix=prefixes["two"], cause=cause,
                          published=published["two"].records, tmp=tmp, timeout_s=args.timeout, label="two")
    return Measured(folder=folder, truth=truth, prefixes=prefixes, published=published, raws=raws, fraws=fraws,
                    oneruns=oneruns, two=two, broker=args.bootstrap, repeat=args.repeat)


def _measure(args) -> Measured | dict:
    """Every measurement on the broker given, or on one started (and stopped) here."""
    from bench import kafka_mapped

    folder = generate(args.records, args.cache)
    truth = json.loads((folder / "truth.json").read_text())
    stem = f"bench{uuid.uuid4().hex[:6]}."
    names = kafka_mapped.prefix_names(args.repeat) if args.mapped else (
        "raw", *(f"one{i}" for i in range(args.repeat)), "two")
    prefixes = {name: f"{stem}{name}." for name in names}
    measure = kafka_mapped.rounds if args.mapped else _rounds
    with tempfile.TemporaryDirectory(prefix="kafka-bench-") as tmpdir:
        tmp = Path(tmpdir)
        broker = None if args.bootstrap else KafkaDev(tmp / "broker")
        try:
            if broker is not None:
                print("starting a broker (scripts/kafka-dev) ...", file=sys.stderr)
            return measure(args, args.bootstrap or broker.start(), folder, truth, prefixes, tmp)
        finally:
            if broker is not None:
                try:
                    broker.stop()
                except Exception as exc:  # noqa: BLE001
                    print(f"could not stop the broker: {exc}", file=sys.stderr)
            else:
                try:
                    _delete_topics(args.bootstrap, stem)
                except Exception as exc:  # noqa: BLE001
                    print(f"could not delete topics {stem}*: {exc}", file=sys.stderr)


def main() -> None:
    args = _parser().parse_args()
    if args.child_faust or args.child_raw:
        _child(args)
        return
    signal.signal(signal.SIGTERM, _on_sigterm)
    started = time.perf_counter()
    measured = _measure(args)
    print(f"\nwhole run: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    if args.mapped:
        from bench.kafka_mapped import report as report_mapped

        report_mapped(measured, args.out)
    else:
        report(measured, args.out)


if __name__ == "__main__":
    main()
