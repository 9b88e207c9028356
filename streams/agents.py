"""The worker's agents: thin `async for` loops, each calling one function of `Agents` per
message, which decodes nothing itself and calls the pure core (`engine.pipeline`).

    detect     telemetry message -> DetectStage.feed -> symptoms topic (+ dead letters)
    jobs       placement message -> job_event -> symptoms topic (+ dead letters)
    correlate  symptoms message  -> CorrelateStage -> store + incidents topic
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Callable

import faust
import orjson
from faust.types import TP

from compose import EngineParts, new_correlate_stage, new_detect_stage
from engine.events import TICK, decode_batch, encode_batch
from engine.job_sources import job_message_events
from engine.pipeline import CorrelateStage, DetectStage
from streams.checkpoints import Checkpoints, log, patiently
from streams.deadletter import DeadLetters, letters
from streams.detect_child import ChildStage, DetectChild
from streams.rebuild import Rebuilder
from streams.settings import WorkerSettings
from streams.sources import Sources, telemetry_sources
from streams.store import StoreWriter
from streams.transport import manual_events

AGENT_PREFIX = "streams.app."  # the agents' names (faust's default: their module), kept when they moved here


@dataclass
class Counters:
    incident_changes: int = 0
    incident_changes_unpublished: int = 0  # incident changes the broker refused on the incidents topic (stored all the same)
    symptom_messages_unpublished: int = 0  # symptoms messages the broker refused (their events never reach correlation)
    first_read_at: float | None = None  # wall time of the first telemetry message (/metrics)
    last_read_at: float | None = None  # ... and of the latest


class Topics:
    """The worker's topics, all raw bytes."""

    def __init__(self, app: faust.App, settings: WorkerSettings):
        raw = dict(key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw")
        self.telemetry = app.topic(*settings.telemetry_topics, **raw)
        self.jobs = app.topic(settings.jobs_topic, **raw)
        self.symptoms = app.topic(settings.symptoms_topic, partitions=1, **raw)
        self.incidents = app.topic(settings.incidents_topic, **raw)
        self.dlq = app.topic(settings.dlq_topic, **raw)
        self.state = app.topic(settings.state_topic, partitions=1, **raw)


class Agents:
    """What the agents share, and the one function per message each of them runs."""

    def __init__(self, settings: WorkerSettings, topics: Topics, checkpoints: Checkpoints, *, sink,
                 parts: EngineParts, read_partitions: Callable[[], dict[str, int]], rebuilder: Rebuilder,
                 children: list[DetectChild] = ()):
        self.settings, self.topics, self.checkpoints, self.sink = settings, topics, checkpoints, sink
        self.children = list(children)  # the detect stages' processes (streams.detect_child); none: in this one
        self.rebuilder = rebuilder  # re-reads the input of a stage whose snapshot was refused
        self.parts = parts  # the engine's rules, topology, models and config (compose.build_engine)
        self.read_partitions = read_partitions
        self.counters = Counters()
        self.offsets: dict[tuple[str, int], int] = {}  # (topic, partition) -> latest offset read
        self.names: dict[tuple[str, int], tuple[str, str]] = {}  # (topic, partition) -> (source, stage key)
        self.sources: list[Sources] = []  # the correlation's view of its sources, while it runs here
        self.expected: list[frozenset[str]] = []  # every telemetry partition, asked once
        self.correlate_key = f"correlate:{settings.symptoms_topic}"
        self.emitting = asyncio.Lock()  # the agent and the idle timer both apply and publish: one at a time
        self.dead_letters = DeadLetters(topics.dlq, max_value_bytes=settings.dlq_max_bytes)
        self.store = StoreWriter(sink.write)
        checkpoints.may_save = lambda key: key != self.correlate_key or self.store.caught_up()

    # ------------------------------------------------------------------ detect
    async def dead_letter(self, event, rejects: list, source: str) -> None:
        """The refused records of `event`, each with its own bytes where they can be cut
        out of a batch; returns once the broker has acknowledged them (or they failed)."""
        await self.dead_letters.send_all(event.key, letters(event.value, rejects), source=source)

    def _name(self, msg) -> tuple[str, str]:
        tp = (msg.topic, msg.partition)
        named = self.names.get(tp)
        if named is None:
            source = f"{msg.topic}:{msg.partition}"
            named = self.names[tp] = (source, "detect:" + source)
        return named

    def new_detect(self, source: str) -> DetectStage:
        return new_detect_stage(self.parts, source)

    async def on_telemetry(self, event) -> None:
        counters, checkpoints = self.counters, self.checkpoints
        if counters.first_read_at is None:
            counters.first_read_at = time.time()
        msg = event.message
        source, key = self._name(msg)
        stage = checkpoints.stages.get(key)
        if stage is None:  # first message of a partition here: restore or create its stage
            child = self.children[msg.partition % len(self.children)] if self.children else None
            stage = await checkpoints.stage(key, lambda: self.new_detect(source), lambda fresh: self.rebuilder.run(
                key, fresh, topic=msg.topic, partition=msg.partition, stop=msg.offset, feed=self.reread_telemetry),
                fresh=(lambda: child.new(key, source)) if child is not None else None)
            if child is not None and not isinstance(stage, ChildStage):  # restored or rebuilt here: on to the child
                stage = checkpoints.stages[key] = child.stage(key, source, stage)
        if checkpoints.seen(key, event):
            return
        self.offsets[(msg.topic, msg.partition)] = msg.offset
        if self.children:
            await stage.child.feed(stage, event.value, lambda answer: self._fed(key, stage, event, source, answer))
            if checkpoints.due(key):
                checkpoints.start_save(key)  # (taken in line behind the messages sent: not awaited here)
            return
        # rejects or events to hand on (about once a second), taken as a child's answer is
        answer = (stage.take_rejects(), stage.events()) if stage.feed(event.value) else None
        await self._fed(key, stage, event, source, answer)
        if checkpoints.due(key):
            await checkpoints.save(key)

    async def _fed(self, key: str, stage, event, source: str, answer: tuple | None) -> None:
        """A stage's answer to one message (from the detect child, in order, or from a stage
        in this process at once): handed on, then held."""
        if self.checkpoints.stages.get(key) is not stage:
            return  # let go of meanwhile: the next owner re-reads it from the last snapshot
        if answer is not None:
            rejects, events = answer
            await self._hand_on(event, rejects, events, f"{source}@{event.message.offset}")
        self.checkpoints.hold(key, event)
        self.counters.last_read_at = time.time()

    @staticmethod
    def reread_telemetry(stage: DetectStage, value: bytes) -> None:
        """A message before the committed offset, re-read to rebuild `stage`: fed as
        `on_telemetry` feeds it; its events and rejects were published before (dropped)."""
        if stage.feed(value):
            stage.events()
            stage.take_rejects()

    async def _hand_on(self, event, rejects: list | None, events: list | bytes | None, where: str) -> None:
        """A message's dead letters, then its stage events (a list, or encoded by the child)."""
        if rejects:  # before the input is held for acking: a dead letter is never lost
            await self.dead_letter(event, rejects, where)
        if events:  # one message for what this input produced (a few seconds' ticks)
            value = events if isinstance(events, bytes) else encode_batch(events)
            sent = await self.topics.symptoms.send(key=b"stage", value=value)
            self._watch(sent, "symptom_messages_unpublished", self.settings.symptoms_topic,
                        "their events never reach correlation")

    # -------------------------------------------------------------------- jobs
    async def on_job(self, event) -> None:
        """A job_placement record, or an squeue / pod document expanded into its jobs."""
        msg = event.message
        events, rejects = job_message_events(event.value, received=msg.timestamp, source="jobs",
                                             labels=self.parts.pod_labels)
        for e in events:  # one message each: a job of 65,536 hosts fits one, a document of them would not
            await self.topics.symptoms.send(key=b"stage", value=e.to_bytes())
        if rejects:
            await self.dead_letter(event, rejects, f"{msg.topic}:{msg.partition}@{msg.offset}")

    # --------------------------------------------------------------- correlate
    def new_correlate(self) -> CorrelateStage:
        return new_correlate_stage(self.parts, self.expected[0])

    async def correlation(self, stop: int) -> CorrelateStage:
        """The correlation's stage; `stop`, the offset of the symptoms message in hand,
        bounds the re-read of a stage whose snapshot was refused."""
        key = self.correlate_key
        held = self.checkpoints.stages.get(key)
        if held is not None:
            return held
        if not self.expected:  # new here: wall-time silence counts from now
            counts = await patiently(self.read_partitions, "reading the telemetry topics' partition counts")
            self.expected[:] = [telemetry_sources(counts)]
        self.sources[:] = [Sources(self.expected[0], self.settings.idle_partition_s)]
        return await self.checkpoints.stage(key, self.new_correlate, lambda fresh: self.rebuilder.run(
            key, fresh, topic=self.settings.symptoms_topic, partition=0, stop=stop, feed=self.reread_symptoms))

    def _take_symptoms(self, stage: CorrelateStage, value: bytes) -> None:
        events = decode_batch(value)
        for e in events:
            if e.kind == TICK:
                self.sources[0].tick(e.source)
        for e in events:
            stage.add(e)

    def reread_symptoms(self, stage: CorrelateStage, value: bytes) -> None:
        """A symptoms message before the committed offset, re-read to rebuild `stage`:
        taken and applied as `on_symptoms` does; its incident changes were stored and
        published before (dropped)."""
        self._take_symptoms(stage, value)
        stage.advance(idle=self.sources[0].idle())
        stage.changes()

    async def apply(self, stage: CorrelateStage) -> None:
        stage.advance(idle=self.sources[0].idle())
        changes = stage.changes()
        if changes:
            self.counters.incident_changes += len(changes)
            await self.store.write(changes)  # idempotent upserts by incident id; queued while the store is away
            for inc in changes:
                sent = await self.topics.incidents.send(key=inc["id"].encode(), value=orjson.dumps(inc))
                self._watch(sent, "incident_changes_unpublished", self.settings.incidents_topic,
                            "it is stored all the same")

    def _watch(self, sent, counter: str, topic: str, consequence: str) -> None:
        """Count (`Counters.<counter>`, /metrics `fabric_rca_<counter>_total`) a message the
        broker does not take, such as one over the max.message.bytes of a topic made before
        streams/topics.py took 16 MiB; faust logs a warning each time, this an error once,
        saying what it costs."""
        def done(fut) -> None:
            error = "cancelled" if fut.cancelled() else fut.exception()
            if error is None:
                return
            n = getattr(self.counters, counter) + 1
            setattr(self.counters, counter, n)
            if n == 1:
                log.error("a message was not published on %s (%s): %s; fabric_rca_%s_total counts them", topic,
                          str(error)[:200] or type(error).__name__, consequence, counter)
        sent.add_done_callback(done)

    async def on_symptoms(self, event) -> None:
        key = self.correlate_key
        stage = await self.correlation(event.message.offset)
        await self.store.wait_for_room()  # (only when the store has been away for long)
        if self.checkpoints.seen(key, event):
            return
        async with self.emitting:
            self._take_symptoms(stage, event.value)
            await self.apply(stage)
        self.checkpoints.hold(key, event)
        if self.checkpoints.due(key):
            await self.checkpoints.save(key)

    async def release_idle_sources(self) -> None:
        """Events held for a partition that went silent are applied once it counts as idle,
        even when no further event arrives to trigger it."""
        stage = self.checkpoints.stages.get(self.correlate_key)
        if isinstance(stage, CorrelateStage) and self.sources and self.sources[0].idle():
            async with self.emitting:
                await self.apply(stage)

    # ------------------------------------------------------------- partitions
    async def save_idle_stages(self) -> None:
        for key in list(self.checkpoints.stages):
            if self.checkpoints.due(key):
                await self.checkpoints.save(key)

    async def on_revoked(self, revoked: set[TP]) -> None:
        keys = [f"detect:{tp.topic}:{tp.partition}" for tp in revoked]
        keys += [self.correlate_key] if any(tp.topic == self.settings.symptoms_topic for tp in revoked) else []
        try:  # best effort: what is not saved is re-read from the last snapshot by the next owner
            await asyncio.wait_for(self.checkpoints.drop(keys), timeout=5.0)
        except Exception as exc:  # noqa: BLE001 - shutting down or broker away: the snapshots cover us
            log.warning("could not save stages %s on revocation: %s", keys, exc)
            self.checkpoints.discard(keys)
        self.checkpoints.forget_cache()


def _answers_of(child: DetectChild):
    async def detect_answers() -> None:
        await child.run()  # (fails, and faust stops the worker, if the child does)
    return detect_answers


def register(app: faust.App, agents: Agents) -> None:
    """The agents, timers and rebalance handlers of the worker app."""
    topics = agents.topics

    @app.agent(topics.telemetry, name=AGENT_PREFIX + "detect", concurrency=1)
    async def detect(stream):
        on_telemetry = agents.on_telemetry
        async for event in manual_events(stream):  # as stream.noack().events(), for less (streams.transport)
            await on_telemetry(event)

    @app.agent(topics.jobs, name=AGENT_PREFIX + "jobs", concurrency=1)
    async def jobs(stream):
        async for event in stream.events():
            await agents.on_job(event)

    @app.agent(topics.symptoms, name=AGENT_PREFIX + "correlate", concurrency=1)
    async def correlate(stream):
        async for event in manual_events(stream):
            await agents.on_symptoms(event)

    for child in agents.children:
        app.task(_answers_of(child))

    @app.timer(interval=1.0)
    async def release_idle_sources():
        await agents.release_idle_sources()

    @app.timer(interval=agents.settings.checkpoint_every_s)
    async def save_idle_stages():
        await agents.save_idle_stages()

    @app.on_partitions_assigned.connect
    async def on_assigned(sender, assigned: set[TP], **kwargs) -> None:
        agents.checkpoints.prefetch()

    @app.on_partitions_revoked.connect
    async def on_revoked(sender, revoked: set[TP], **kwargs) -> None:
        await agents.on_revoked(revoked)
