"""The faust-streaming app: thin agents around the two stages of the pure core.

    fabric.telemetry (keyed by host) --detect--> fabric.symptoms (1 partition)
    fabric.jobs ---------------------jobs-----^          |
    unreadable records --> fabric.telemetry.dlq     --correlate--> store + fabric.incidents
    stage snapshots <-----------------------------> fabric.state (compacted)

`detect` keeps one `DetectStage` per telemetry partition (state follows the partition);
`correlate` runs the one `CorrelateStage`. Agents decode, call the core, encode; no
diagnosis logic lives here. Delivery is at least once: input is acked only after a
snapshot covering it has been delivered (see `streams.state`), and what a restarted
stage reads twice is dropped downstream or rewritten idempotently.
"""
from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections import Counter
from typing import Callable

import faust
import orjson
from faust.types import TP

from api.store.sink import StoreSink
from engine.events import TICK, StageEvent, decode_batch, encode_batch
from engine.jobs import JobBook
from engine.normalize import parse_line
from engine.pipeline import CorrelateStage, DetectStage, EngineConfig, job_event
from engine.topology import load_topology
from rules.loader import load_rules
from streams import state
from streams.metrics import WorkerMetrics, render
from streams.settings import WorkerSettings
from streams.topics import partition_counts
from streams.transport import Transport

log = logging.getLogger("fabric_rca.worker")


async def patiently(read: Callable[[], object], what: str, *, first_wait_s: float = 1.0, max_wait_s: float = 10.0):
    """`read()` (a blocking broker read) in a thread, retried until it succeeds: a worker
    that cannot read its checkpoints or the partition counts waits for the broker
    rather than crash its agent (and lose its place)."""
    wait = first_wait_s
    while True:
        try:
            return await asyncio.get_running_loop().run_in_executor(None, read)
        except Exception as exc:  # noqa: BLE001 - any failure of the broker read: say so, wait, retry
            log.warning("%s failed (%s: %s); retrying in %.0f s", what, type(exc).__name__, exc, wait)
            await asyncio.sleep(wait)
            wait = min(wait * 2, max_wait_s)


class Checkpoints:
    """The stages this worker holds, restored from and saved to the state topic."""

    def __init__(self, app: faust.App, settings: WorkerSettings, topic,
                 read: Callable[[], dict[str, tuple[int, bytes]]]):
        self.app, self.settings, self.topic, self._read = app, settings, topic, read
        self.stages: dict[str, DetectStage | CorrelateStage] = {}
        self.covered: dict[str, int] = {}  # key -> highest input offset inside the stage
        self.unacked: dict[str, list] = {}
        self.saved_at: dict[str, float] = {}
        self._cache: dict[str, tuple[int, bytes]] | None = None
        self._reading: asyncio.Future | None = None  # the read of the state topic under way
        self._delivering: dict[str, asyncio.Future] = {}  # key -> its latest snapshot's delivery
        self.restored = 0

    async def stage(self, key: str, make: Callable[[], DetectStage | CorrelateStage]):
        """The stage for `key`: held, else restored from its latest snapshot, else new."""
        held = self.stages.get(key)
        if held is not None:
            return held
        if self._cache is None:
            self.prefetch()
            reading = self._reading
            cache = await reading
            if reading is self._reading:  # (not a read from before a rebalance)
                self._cache = cache
            else:
                return await self.stage(key, make)
        stage = make()
        offset, blob = self._cache.pop(key, (-1, b""))
        if blob:
            stage.restore(blob)
            self.restored += 1
            log.info("restored %s from its snapshot at offset %d", key, offset)
        self.stages[key], self.covered[key], self.unacked[key] = stage, offset, []
        self.saved_at[key] = time.monotonic()
        return stage

    def prefetch(self) -> None:
        """Start reading the state topic, unless read or being read: on assignment, so
        that the read overlaps the consumer's first fetch instead of holding up the first
        message of each new partition."""
        if self._cache is None and self._reading is None:
            self._reading = asyncio.ensure_future(patiently(self._read, "reading the checkpoints"))

    def forget_cache(self) -> None:
        """Partitions moved: snapshots written by other workers must be read again."""
        self._cache = None
        self._reading = None

    def seen(self, key: str, event) -> bool:
        """True when `event` is already inside the stage's state (a re-read after a restart)."""
        if event.message.offset <= self.covered[key]:
            event.ack()
            return True
        return False

    def hold(self, key: str, event) -> None:
        self.covered[key] = event.message.offset
        self.unacked[key].append(event)

    def due(self, key: str) -> bool:
        return time.monotonic() - self.saved_at[key] >= self.settings.checkpoint_every_s

    async def save(self, key: str) -> None:
        """Snapshot the stage now; deliver everything it produced so far, the snapshot,
        then ack its input in the background, so the agent goes on processing while the
        broker confirms (deliveries of one stage stay in order: each waits for the last)."""
        events = self.unacked.get(key)
        if not events:
            return
        blob, offset = self.stages[key].snapshot(), self.covered[key]
        self.unacked[key] = []
        self.saved_at[key] = time.monotonic()
        previous = self._delivering.get(key)
        self._delivering[key] = asyncio.ensure_future(self._deliver(previous, key, offset, blob, events))

    async def _deliver(self, previous, key: str, offset: int, blob: bytes, events: list) -> None:
        if previous is not None:
            await previous  # a failed earlier delivery fails this one too: nothing is acked past it
        try:
            await self.app.producer.flush()
            delivery = await self.topic.send(key=key.encode(), value=state.encode(offset, blob))
            await delivery
        except Exception:
            log.exception("snapshot of %s at offset %d not delivered; its input stays unacked", key, offset)
            raise
        for event in events:
            event.ack()

    async def settle(self, keys: list[str]) -> None:
        """Wait until the snapshots of `keys` taken so far are delivered (or failed)."""
        pending = [self._delivering[k] for k in keys if k in self._delivering]
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)

    async def drop(self, keys: list[str]) -> None:
        """Save, then let go of, the stages of partitions this worker no longer owns."""
        for key in keys:
            if key in self.stages:
                await self.save(key)
        await self.settle(keys)
        self.discard(keys)

    def discard(self, keys: list[str]) -> None:
        for key in keys:
            for d in (self.stages, self.covered, self.unacked, self.saved_at, self._delivering):
                d.pop(key, None)


def new_app(settings: WorkerSettings) -> faust.App:
    """The faust app with the worker's broker, producer and consumer settings and no agents:
    `build_app` adds the stages; the Kafka benchmark's raw consumer adds a counting agent,
    so both read through exactly the same client stack."""
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
        # Input stays unacked until a snapshot covers it, so faust must not wait for
        # "in-flight" events on rebalance or shutdown: the next owner re-reads them.
        stream_wait_empty=False,
        producer_max_request_size=16 * 1024 * 1024,  # stage snapshots of a large fabric
        # Stage events go out as the detect stage ticks, about a hundred a second for a busy
        # worker; sent one request each, the sends took 5% of the worker's time (py-spy).
        # 50 ms batches them (Kafka Streams lingers 100 ms); snapshots are delivered as late.
        producer_linger=0.05,
        # A killed worker's partitions move to the others after this long, not a minute.
        broker_session_timeout=settings.session_timeout_s,
        broker_heartbeat_interval=max(1.0, settings.session_timeout_s / 4),
        **settings.kafka_security.faust(),
    )
    app.transport = Transport(app.conf.broker_consumer, app)  # see streams.transport
    return app


class Sources:
    """Which telemetry partitions correlation may stop waiting for, by wall time.

    Stage 2 applies a tick only when every partition has passed it (`CorrelateStage`). A
    partition that sends no ticks would hold correlation back for ever, so it becomes idle
    (not waited for until it ticks again):

    - one never heard from: `idle_s` after the first tick of any partition (no hosts hash
      to it, or a replay that has none of its hosts);
    - one heard from before: once it has been silent `idle_s` longer than the most
      recently heard partition (its collectors are down). When every partition falls
      silent (the broker away, the telemetry ended) none of these becomes idle, so nothing
      is applied out of order when they come back."""

    def __init__(self, expected: frozenset[str], idle_s: float, clock: Callable[[], float] = time.monotonic):
        self.expected, self.idle_s, self.clock = expected, idle_s, clock
        self.heard: dict[str, float] = {}
        self.first: float | None = None  # wall time of the first tick heard
        self.newest = float("-inf")

    def tick(self, source: str) -> None:
        now = self.heard[source] = self.newest = self.clock()
        if self.first is None:
            self.first = now

    def idle(self) -> frozenset[str]:
        if self.first is None:
            return frozenset()
        horizon = self.newest - self.idle_s
        unheard_idle = self.clock() - self.first >= self.idle_s
        heard = self.heard
        return frozenset(s for s in self.expected
                         if (heard[s] <= horizon if s in heard else unheard_idle))


def telemetry_sources(partitions: dict[str, int]) -> frozenset[str]:
    """The stage-1 source names (as `detect` labels them) of every telemetry partition."""
    return frozenset(f"{topic}:{p}" for topic, n in partitions.items() for p in range(n))


def build_app(settings: WorkerSettings, *, config: EngineConfig = EngineConfig(),
              read_snapshots: Callable[[], dict[str, tuple[int, bytes]]] | None = None,
              read_partitions: Callable[[], dict[str, int]] | None = None) -> faust.App:
    """The worker app. `read_snapshots` (key -> (offset, snapshot)) defaults to reading the
    state topic, `read_partitions` (telemetry topic -> partitions) to asking the broker;
    broker-free tests pass their own."""
    rules = load_rules(list(settings.rule_files) or None)
    models = None
    if settings.models_dir is not None:
        from models.store import load as load_models  # scikit-learn only when models are used
        models = load_models(settings.models_dir)
    topology = load_topology(settings.topology)
    roles = {d: topology.role(d) for d in topology.devices()}
    sink = StoreSink(settings.db_url, topology=topology.to_dict())

    sources: list[Sources] = []  # the correlation's view of its sources, while it runs here
    expected: list[frozenset[str]] = []  # every telemetry partition, asked once

    def new_correlate() -> CorrelateStage:
        return CorrelateStage(topology=topology, rules=rules, jobs=JobBook.from_file(settings.jobs_file),
                              config=config, sources=expected[0],
                              opens_incident=models.scorer().opens_incident if models is not None else None)

    app = new_app(settings)
    raw = dict(key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw")
    telemetry = app.topic(*settings.telemetry_topics, **raw)
    jobs_topic = app.topic(settings.jobs_topic, **raw)
    symptoms = app.topic(settings.symptoms_topic, partitions=1, **raw)
    incidents = app.topic(settings.incidents_topic, **raw)
    dlq = app.topic(settings.dlq_topic, **raw)
    reader = read_snapshots or (lambda: state.read_latest(bootstrap=settings.bootstrap, topic=settings.state_topic,
                                                          security=settings.kafka_security))
    partitions = read_partitions or (lambda: partition_counts(bootstrap=settings.bootstrap, security=settings.kafka_security,
                                                              topics=list(settings.telemetry_topics)))
    checkpoints = Checkpoints(app, settings, app.topic(settings.state_topic, partitions=1, **raw), reader)
    # counts, and the wall times of the first and latest telemetry message (/metrics)
    counters: dict[str, float | None] = {"dead_lettered": 0, "incident_changes": 0, "first_read_at": None,
                                         "last_read_at": None}
    offsets: dict[tuple[str, int], int] = {}
    correlate_key = f"correlate:{settings.symptoms_topic}"

    async def dead_letter(event, reason: str, detail: str, source: str = "", rejected: int = 1) -> None:
        counters["dead_lettered"] += 1
        await dlq.send(key=event.key, value=event.value, headers=[
            ("reason", reason.encode()), ("detail", detail.encode()), ("source", source.encode()),
            ("rejected", str(rejected).encode())])

    names: dict[tuple[str, int], tuple[str, str]] = {}  # (topic, partition) -> (source, stage key)

    @app.agent(telemetry, concurrency=1)
    async def detect(stream):
        stages, held = checkpoints.stages, checkpoints.hold
        wall = time.time
        async for event in stream.noack().events():
            if counters["first_read_at"] is None:
                counters["first_read_at"] = wall()
            msg = event.message
            tp = (msg.topic, msg.partition)
            named = names.get(tp)
            if named is None:
                source = f"{msg.topic}:{msg.partition}"
                named = names[tp] = (source, "detect:" + source)
            source, key = named
            stage = stages.get(key)
            if stage is None:  # first message of a partition here: restore or create its stage
                stage = await checkpoints.stage(key, lambda: DetectStage(rules=rules, roles=roles, config=config,
                                                                          source=source,
                                                                          scorer=models.scorer(learn_rate=config.learn_rate) if models is not None else None))
            if checkpoints.seen(key, event):
                continue
            offsets[tp] = msg.offset
            if stage.feed(event.value):  # rejects or events to hand on (about once a second)
                rejects = stage.take_rejects()
                if rejects:  # the message's bytes once, with every reason its records got
                    reasons = Counter(r.reason for r in rejects)
                    await dead_letter(event, ",".join(sorted(reasons)), rejects[0].detail, f"{source}@{msg.offset}",
                                      rejected=sum(reasons.values()))
                events = stage.events()
                if events:  # one message for what this input produced (a few seconds' ticks)
                    await symptoms.send(key=b"stage", value=encode_batch(events))
            held(key, event)
            counters["last_read_at"] = wall()
            if checkpoints.due(key):
                await checkpoints.save(key)

    @app.agent(jobs_topic, concurrency=1)
    async def jobs(stream):
        async for event in stream.events():
            metrics, rejects = parse_line(event.value)
            for m in metrics:
                result = job_event(m, tick=m.ts, source="jobs")
                if isinstance(result, StageEvent):
                    await symptoms.send(key=b"stage", value=result.to_bytes())
                else:
                    rejects.append(result)
            for r in rejects:
                await dead_letter(event, r.reason, r.detail)

    emitting = asyncio.Lock()  # the agent and the idle timer both apply and publish: one at a time

    async def correlation() -> CorrelateStage:
        if correlate_key not in checkpoints.stages:  # new here: wall-time silence counts from now
            if not expected:
                counts = await patiently(partitions, "reading the telemetry topics' partition counts")
                expected[:] = [telemetry_sources(counts)]
            sources[:] = [Sources(expected[0], settings.idle_partition_s)]
        return await checkpoints.stage(correlate_key, new_correlate)

    async def apply(stage: CorrelateStage) -> None:
        stage.advance(idle=sources[0].idle())
        changes = stage.changes()
        if changes:
            counters["incident_changes"] += len(changes)
            sink.write(changes)  # idempotent upserts by incident id
            for inc in changes:
                await incidents.send(key=inc["id"].encode(), value=orjson.dumps(inc))

    @app.agent(symptoms, concurrency=1)
    async def correlate(stream):
        async for event in stream.noack().events():
            stage = await correlation()
            if checkpoints.seen(correlate_key, event):
                continue
            events = decode_batch(event.value)
            for e in events:
                if e.kind == TICK:
                    sources[0].tick(e.source)
            async with emitting:
                for e in events:
                    stage.add(e)
                await apply(stage)
            checkpoints.hold(correlate_key, event)
            if checkpoints.due(correlate_key):
                await checkpoints.save(correlate_key)

    @app.timer(interval=1.0)
    async def release_idle_sources():
        """Events held for a partition that went silent are applied once it counts as idle,
        even when no further event arrives to trigger it."""
        stage = checkpoints.stages.get(correlate_key)
        if isinstance(stage, CorrelateStage) and sources and sources[0].idle():
            async with emitting:
                await apply(stage)

    @app.timer(interval=settings.checkpoint_every_s)
    async def save_idle_stages():
        for key in list(checkpoints.stages):
            if checkpoints.due(key):
                await checkpoints.save(key)

    @app.on_partitions_assigned.connect
    async def on_assigned(sender, assigned: set[TP], **kwargs) -> None:
        checkpoints.prefetch()

    @app.on_partitions_revoked.connect
    async def on_revoked(sender, revoked: set[TP], **kwargs) -> None:
        keys = [f"detect:{tp.topic}:{tp.partition}" for tp in revoked]
        keys += [correlate_key] if any(tp.topic == settings.symptoms_topic for tp in revoked) else []
        try:  # best effort: what is not saved is re-read from the last snapshot by the next owner
            await asyncio.wait_for(checkpoints.drop(keys), timeout=5.0)
        except Exception as exc:  # noqa: BLE001 - shutting down or broker away: the snapshots cover us
            log.warning("could not save stages %s on revocation: %s", keys, exc)
            checkpoints.discard(keys)
        checkpoints.forget_cache()

    @app.page("/healthz")
    async def healthz(web, request):
        c = checkpoints.stages.get(correlate_key)
        applied = c.applied_to if isinstance(c, CorrelateStage) else float("-inf")
        doc = {"status": "ok", "stages": sorted(checkpoints.stages),
               # event time correlated up to; null before the first second (-inf is not JSON)
               "applied_to": applied if applied != float("-inf") else None}
        if isinstance(c, CorrelateStage) and sources:
            idle = sources[0].idle()
            # correlation holds everything back until these partitions tick (or go idle)
            doc["waiting_for"] = c.waiting_for(idle)
            doc["idle_sources"] = sorted(idle)
        return web.json(doc)

    @app.page("/metrics")
    async def metrics(web, request):
        return web.text(render(_metrics(app, checkpoints, offsets, counters, correlate_key,
                                               sources[0] if sources else None)),
                        content_type="text/plain; version=0.0.4")

    app.fabric_checkpoints = checkpoints  # for tests and health
    app.fabric_sink = sink
    return app


def _metrics(app, checkpoints: Checkpoints, offsets, counters, correlate_key: str,
             sources: Sources | None = None) -> WorkerMetrics:
    m = WorkerMetrics(dead_lettered=counters["dead_lettered"], incident_changes=counters["incident_changes"],
                      stages_restored=checkpoints.restored, first_read_at=counters["first_read_at"],
                      last_read_at=counters["last_read_at"])
    rejects: Counter = Counter()
    clocks = []
    for key, stage in checkpoints.stages.items():
        if not isinstance(stage, DetectStage):
            continue
        st = stage.stats
        m.records += st.records
        m.duplicates += st.duplicates
        m.symptoms += st.symptoms
        rejects.update(st.rejects)
        if stage.detector.clock != float("-inf"):
            clocks.append(stage.detector.clock)
    m.rejects = dict(rejects)
    c = checkpoints.stages.get(correlate_key)
    if isinstance(c, CorrelateStage):
        m.incidents_opened, m.incidents_resolved = c.correlator.opened, c.correlator.resolved
        m.applied_event_time = c.applied_to if c.applied_to != float("-inf") else None
        m.late_events = c.late
        if sources is not None:
            m.idle_sources = len(sources.idle())
    m.newest_event_time = max(clocks) if clocks else None
    for (topic, partition), offset in offsets.items():
        try:
            high = app.consumer.highwater(TP(topic, partition))
        except Exception:  # not assigned (any more) or not known yet: no figure rather than a wrong one
            continue
        if high is not None:
            m.consumer_lag[f"{topic}:{partition}"] = max(0, high - offset - 1)
    return m


def run_worker(settings: WorkerSettings) -> None:
    """Create missing topics, then run until SIGTERM/SIGINT (blocking)."""
    from faust.worker import Worker

    from streams.logs import logging_config
    from streams.topics import ensure_topics

    ensure_topics(bootstrap=settings.bootstrap, topics=settings.topics(), security=settings.kafka_security)
    app = build_app(settings, config=EngineConfig(learn_rate=settings.learn_rate))
    worker = Worker(app, loglevel=settings.loglevel, quiet=True, redirect_stdouts=False,
                    logging_config=logging_config(level=settings.loglevel, fmt=settings.log_format))
    if not sys.stdout.isatty():
        # faust's start-up spinner writes cursor escape codes even into a file or a
        # container's log, where they would precede the first JSON line
        worker.spinner = None
    worker.execute_from_commandline()
