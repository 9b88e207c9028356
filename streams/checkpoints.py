"""The stages a worker holds, restored from and saved to the compacted state topic.

A stage is restored from its latest snapshot when its partition is first seen here, its
input is held unacked until a snapshot covering it is delivered (`streams.state`), and
it is saved and let go of when its partition moves away.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Awaitable, Callable

import faust

from engine import checkpoint
from engine.pipeline import CorrelateStage, DetectStage
from streams import state
from streams.detect_child import ChildStage
from streams.settings import WorkerSettings

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
        self._carried: dict[str, list] = {}  # key -> input of snapshots not delivered: acked by the next that is
        self.undelivered = 0  # snapshots the broker did not take (/metrics)
        self.restored = 0
        self.refused = 0  # snapshots the stages refused (rebuilt from input instead)
        self.revocations = 0  # rebalances that took partitions away (a stage being rebuilt may be one's)
        # Whether the stage of a key may be saved now: not the correlation while incident
        # changes wait for the store (its snapshot would cover input whose changes are not stored).
        self.may_save: Callable[[str], bool] = lambda key: True

    async def stage(self, key: str, make: Callable[[], DetectStage | CorrelateStage],
                    rebuild: Callable[[DetectStage | CorrelateStage], Awaitable[object]] | None = None,
                    fresh: Callable[[], object] | None = None):
        """The stage for `key`: held, else restored from its latest snapshot, else new.
        A new stage whose snapshot was refused is first given its partition's input
        before the committed offset by `rebuild(stage)` (`streams.rebuild`). `fresh()`,
        when given, makes the stage of a key without a snapshot (a stage in the detect
        child: made there, not here and sent)."""
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
                return await self.stage(key, make, rebuild, fresh)
        offset, blob = self._cache.pop(key, (-1, b""))
        stage = fresh() if fresh is not None and not blob else make()
        if blob and not self._restore(key, stage, blob, offset):
            stage, offset = make(), -1  # a fresh stage instead, rebuilt from its input
            if rebuild is not None:
                revocations = self.revocations
                await rebuild(stage)  # (not among `stages` meanwhile: no timer saves or applies it)
                if revocations != self.revocations:  # partitions moved meanwhile: start again from the snapshots
                    return await self.stage(key, make, rebuild, fresh)
        self.stages[key], self.covered[key], self.unacked[key] = stage, offset, []
        self.saved_at[key] = time.monotonic()
        return stage

    def _restore(self, key: str, stage, blob: bytes, offset: int) -> bool:
        """Restore `stage` from its snapshot; False (logged, counted) when the stage
        refuses it (`engine.checkpoint.CheckpointError` is a ValueError): a refused
        snapshot is never used, and the stage is rebuilt from its partition's input."""
        try:
            stage.restore(blob)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            self.refused += 1
            log.warning("checkpoint of %s at offset %d refused (%s: %s); rebuilding the stage from the "
                        "partition's input", key, offset, type(exc).__name__, str(exc)[:200])
            return False
        self.restored += 1
        log.info("restored %s from its snapshot at offset %d", key, offset)
        return True

    def prefetch(self) -> None:
        """Start reading the state topic, unless read or being read: on assignment, so
        that the read overlaps the consumer's first fetch instead of holding up the first
        message of each new partition."""
        if self._cache is None and self._reading is None:
            self._reading = asyncio.ensure_future(patiently(self._read, "reading the checkpoints"))

    def forget_cache(self) -> None:
        """Partitions moved: snapshots written by other workers must be read again."""
        self.revocations += 1
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
        asked = self.start_save(key)
        if asked is not None:
            await asked

    def start_save(self, key: str) -> Awaitable[None] | None:
        """`save` up to the snapshot: taken now from a stage in this process (None), or asked
        for from a stage in the detect child (`streams.detect_child`) behind the messages
        sent to it, taken when it arrives: the awaitable says when."""
        stage = self.stages[key]
        in_child = isinstance(stage, ChildStage)
        if not (self.unacked.get(key) or self._carried.get(key) or (in_child and stage.has_unanswered())) \
                or not self.may_save(key):
            return None  # (nothing new, and nothing held back by a snapshot the broker did not take)
        self.saved_at[key] = time.monotonic()
        if in_child:
            return stage.packed_state_in_order(lambda packed: self._snapshot(key, stage, packed))
        self._snapshot(key, stage, checkpoint.pack(stage.state()))  # packed now: it reads the live stage
        return None

    def _snapshot(self, key: str, stage, packed: bytes) -> None:
        """Deliver `packed`, the snapshot of `stage` covering its input held so far
        (compressed in a thread: zlib lets the agents run meanwhile)."""
        if self.stages.get(key) is not stage:
            return  # let go of meanwhile (its partition moved)
        events, offset = self.unacked[key], self.covered[key]
        self.unacked[key] = []
        previous = self._delivering.get(key)
        self._delivering[key] = asyncio.ensure_future(self._deliver(previous, key, offset, packed, events))

    async def _deliver(self, previous, key: str, offset: int, packed: bytes, events: list) -> None:
        """Deliver one snapshot after the stage's one before (in order on the state topic);
        then ack its input, and that of earlier ones the broker did not take: a snapshot is
        the whole state, so one delivered covers every input before its offset. A stage
        whose snapshots fail (the broker away, one over the topic's max.message.bytes) goes
        on; its input stays unacked until one is delivered, and the first failure of a run
        is logged (`undelivered` counts each)."""
        if previous is not None:
            await previous  # (never raises)
        try:
            blob = await asyncio.get_running_loop().run_in_executor(None, checkpoint.compress, packed)
            await self.app.producer.flush()
            delivery = await self.topic.send(key=key.encode(), value=state.encode(offset, blob))
            await delivery
        except Exception:
            self.undelivered += 1
            if key not in self._carried:
                log.exception("snapshot of %s at offset %d (%d bytes) not delivered; its input stays unacked "
                              "until one is (fabric_rca_snapshots_undelivered_total counts them)",
                              key, offset, len(packed))
            self._carried.setdefault(key, []).extend(events)
            return
        for event in self._carried.pop(key, []) + events:
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
            stage = self.stages.get(key)
            if isinstance(stage, ChildStage):  # let go of it in the detect child too
                stage.close()
            for d in (self.stages, self.covered, self.unacked, self.saved_at, self._delivering, self._carried):
                d.pop(key, None)
