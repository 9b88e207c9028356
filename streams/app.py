"""The faust-streaming app: thin agents around the two stages of the pure core.

    fabric.telemetry (keyed by host) --detect--> fabric.symptoms (1 partition)
    fabric.jobs ---------------------jobs-----^          |
    unreadable records --> fabric.telemetry.dlq     --correlate--> store + fabric.incidents

`detect` keeps one `DetectStage` per telemetry partition (state follows the partition's
hosts); `correlate` runs the one `CorrelateStage`. Agents run with concurrency 1 and
decode, call the core, encode: no diagnosis logic lives here.
"""
from __future__ import annotations

import logging
from collections import Counter

import faust
import orjson
from faust.types import TP

from api.store.sink import StoreSink
from engine.events import JOB, StageEvent
from engine.jobs import JobBook, JobError, job_from_placement, load_jobs
from engine.normalize import parse_line
from engine.pipeline import CorrelateStage, DetectStage, EngineConfig
from engine.topology import Topology, load_topology
from rules.loader import load_rules
from streams.metrics import WorkerMetrics, render
from streams.settings import WorkerSettings

log = logging.getLogger("fabric_rca.worker")


def build_app(settings: WorkerSettings, *, config: EngineConfig = EngineConfig()) -> faust.App:
    rules = load_rules(list(settings.rule_files) or None)
    topology: Topology = load_topology(settings.topology)
    book = JobBook()
    if settings.jobs_file:
        for _, job in load_jobs(settings.jobs_file):
            book.update(job)
    roles = {d: topology.role(d) for d in topology.devices()}
    sink = StoreSink(settings.db_url, topology=topology.to_dict())

    app = faust.App(
        settings.app_id,
        broker=f"kafka://{settings.bootstrap}",
        store="memory://",
        datadir=str(settings.data_dir),
        topic_partitions=settings.partitions,
        topic_replication_factor=1,
        consumer_auto_offset_reset="earliest",
        web_enabled=True,
        web_port=settings.web_port,
        web_bind=settings.web_bind,
        web_host=settings.web_bind,
        key_serializer="raw",
        value_serializer="raw",
    )
    raw = dict(key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw")
    telemetry = app.topic(*settings.telemetry_topics, **raw)
    jobs_topic = app.topic(settings.jobs_topic, **raw)
    symptoms = app.topic(settings.symptoms_topic, partitions=1, **raw)
    incidents = app.topic(settings.incidents_topic, **raw)
    dlq = app.topic(settings.dlq_topic, **raw)

    stages: dict[str, DetectStage] = {}
    offsets: dict[tuple[str, int], int] = {}  # (topic, partition) -> last offset read
    counters = {"dead_lettered": 0, "incident_changes": 0}
    correlate_stage = CorrelateStage(topology=topology, rules=rules, jobs=book, config=config)
    app.fabric_state = {"stages": stages, "correlate": correlate_stage, "sink": sink}  # for health/metrics

    @app.agent(telemetry, concurrency=1)
    async def detect(stream):
        async for event in stream.events():
            msg = event.message
            source = f"{msg.topic}:{msg.partition}"
            stage = stages.get(source)
            if stage is None:
                stage = stages[source] = DetectStage(rules=rules, roles=roles, config=config, source=source)
            offsets[(msg.topic, msg.partition)] = msg.offset
            stage.feed(event.value)
            for r in stage.take_rejects():
                counters["dead_lettered"] += 1
                await dlq.send(key=event.key, value=event.value, headers=[
                    ("reason", r.reason.encode()), ("detail", r.detail.encode()),
                    ("source", f"{source}@{msg.offset}".encode())])
            for e in stage.events():
                await symptoms.send(key=b"stage", value=e.to_bytes())

    @app.agent(jobs_topic, concurrency=1)
    async def jobs(stream):
        async for event in stream.events():
            metrics, rejects = parse_line(event.value)
            for m in metrics:
                try:
                    job = job_from_placement(tags=m.tags, fields=m.fields, ts=m.ts)
                except JobError as exc:
                    await dlq.send(key=event.key, value=event.value, headers=[
                        ("reason", b"bad_job"), ("detail", str(exc).encode())])
                    continue
                await symptoms.send(key=b"stage", value=StageEvent(JOB, m.ts, "jobs", job=job).to_bytes())
            for r in rejects:
                await dlq.send(key=event.key, value=event.value, headers=[
                    ("reason", r.reason.encode()), ("detail", r.detail.encode())])

    @app.agent(symptoms, concurrency=1)
    async def correlate(stream):
        async for value in stream:
            correlate_stage.add(StageEvent.from_bytes(value))
            correlate_stage.advance()
            changes = correlate_stage.changes()
            if changes:
                counters["incident_changes"] += len(changes)
                sink.write(changes)
                for inc in changes:
                    await incidents.send(key=inc["id"].encode(), value=orjson.dumps(inc))

    @app.page("/healthz")
    async def healthz(web, request):
        return web.json({"status": "ok", "partitions": sorted(stages), "applied_to": correlate_stage.applied_to})

    @app.page("/metrics")
    async def metrics(web, request):
        return web.text(render(_metrics(app, stages, offsets, counters, correlate_stage)),
                        content_type="text/plain; version=0.0.4")

    return app


def _metrics(app, stages, offsets, counters, correlate_stage) -> WorkerMetrics:
    m = WorkerMetrics(dead_lettered=counters["dead_lettered"], incident_changes=counters["incident_changes"])
    rejects: Counter = Counter()
    clocks = []
    for stage in stages.values():
        st = stage.stats
        m.records += st.records
        m.duplicates += st.duplicates
        m.symptoms += st.symptoms
        rejects.update(st.rejects)
        if stage.detector.clock != float("-inf"):
            clocks.append(stage.detector.clock)
    m.rejects = dict(rejects)
    m.incidents_opened = correlate_stage.correlator.opened
    m.incidents_resolved = correlate_stage.correlator.resolved
    m.newest_event_time = max(clocks) if clocks else None
    m.applied_event_time = correlate_stage.applied_to if correlate_stage.applied_to != float("-inf") else None
    for (topic, partition), offset in offsets.items():
        try:
            high = app.consumer.highwater(TP(topic, partition))
        except Exception:  # not assigned (any more) or not known yet: no figure rather than a wrong one
            continue
        if high is not None:
            m.consumer_lag[f"{topic}:{partition}"] = max(0, high - offset - 1)
    return m


def run_worker(settings: WorkerSettings) -> None:
    """Run until SIGTERM/SIGINT (blocking)."""
    from faust.worker import Worker

    app = build_app(settings)
    Worker(app, loglevel=settings.loglevel, quiet=True, redirect_stdouts=False).execute_from_commandline()
