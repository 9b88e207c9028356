"""Incident changes into the store, off the event loop and through store outages.

Changes are written in a thread (the store's client blocks) and awaited; while the store
refuses, they wait in a bounded queue, in order, and one writer task retries them. While the store refuses, the writer retries with a growing
wait and reports the store unavailable; the correlation goes on, and only stops taking
input (`wait_for_room`) when the queue is full. Nothing queued is ever dropped: the
correlate stage's checkpoint is not saved while changes are queued (`caught_up`), so a
worker killed during an outage restarts from a snapshot whose input is still unacked,
and derives the unstored changes again. A store down when the worker starts is reached at the
first write instead (`LazySink`), so the worker starts anyway.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

log = logging.getLogger("fabric_rca.worker")

MAX_PENDING = 100_000  # incident changes queued at most; the correlation waits beyond that
BATCH = 500  # changes per write


class StoreWriter:
    def __init__(self, write: Callable[[list[dict]], None], *, max_pending: int = MAX_PENDING,
                 first_wait_s: float = 0.5, max_wait_s: float = 5.0):
        self._write, self.max_pending = write, max_pending
        self.first_wait_s, self.max_wait_s = first_wait_s, max_wait_s
        self.pending: deque[dict] = deque()
        self.available = True  # False from a failed write until the next one succeeds
        self.failures = 0  # writes refused so far
        self.unavailable_since: float | None = None
        self._task: asyncio.Task | None = None
        self._room = asyncio.Event()
        self._room.set()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fabric-rca-store")

    async def write(self, changes: list[dict]) -> None:
        """Write `changes` after those queued. With nothing queued, the write is awaited
        (in the writer's thread); if the store refuses it, or changes are queued already,
        they are queued and the writer task retries: this never raises."""
        if not self.pending:
            try:
                await asyncio.get_running_loop().run_in_executor(self._executor, self._write, changes)
                self._back()
                return
            except Exception as exc:  # noqa: BLE001 - any refusal of the store: keep the changes, retry
                self._failed(exc, self.first_wait_s)
        self.pending.extend(changes)
        if len(self.pending) >= self.max_pending:
            self._room.clear()
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._drain(delay=self.first_wait_s))

    async def wait_for_room(self) -> None:
        """Return once the queue is below its bound (at once, unless the store is away long)."""
        await self._room.wait()

    def caught_up(self) -> bool:
        """Every change submitted so far is stored."""
        return not self.pending

    async def settle(self) -> None:
        """Wait until the queue is written (tests, shutdown)."""
        while self._task is not None and not self._task.done():
            await asyncio.shield(self._task)

    async def _drain(self, delay: float = 0.0) -> None:
        wait = self.first_wait_s
        await asyncio.sleep(delay)
        loop = asyncio.get_running_loop()
        while self.pending:
            batch = [self.pending[i] for i in range(min(BATCH, len(self.pending)))]
            try:
                await loop.run_in_executor(self._executor, self._write, batch)
            except Exception as exc:  # noqa: BLE001 - any refusal of the store: keep the changes, retry
                self._failed(exc, wait)
                await asyncio.sleep(wait)
                wait = min(wait * 2, self.max_wait_s)
                continue
            for _ in batch:
                self.pending.popleft()
            wait = self.first_wait_s
            self._back()
        self._room.set()

    def _failed(self, exc: Exception, wait: float) -> None:
        self.failures += 1
        if self.available:
            self.available, self.unavailable_since = False, time.monotonic()
        log.warning("store unavailable (%s: %s); %d incident changes kept, retrying in %.1f s",
                    type(exc).__name__, str(exc).splitlines()[0][:200] if str(exc) else "", len(self.pending), wait)

    def _back(self) -> None:
        if not self.available:
            log.warning("store available again after %.1f s; writing %d queued incident changes",
                        time.monotonic() - (self.unavailable_since or time.monotonic()), len(self.pending))
            self.available, self.unavailable_since = True, None
        if len(self.pending) < self.max_pending:
            self._room.set()


class LazySink:
    """A `StoreSink` (schema and topology written) when the worker starts, or, if the
    store is down then, at the first write: the worker runs, its changes wait in the queue."""

    def __init__(self, db_url: str, *, topology: dict | None = None, notifier=None):
        self.db_url, self.topology, self.notifier = db_url, topology, notifier
        self._sink = None
        try:
            self.write([])
        except Exception as exc:  # noqa: BLE001 - any refusal of the store: connect at the first write
            log.warning("store unavailable at start (%s: %s); connecting at the first write",
                        type(exc).__name__, str(exc).splitlines()[0][:200] if str(exc) else "")

    @property
    def written(self) -> int:
        return self._sink.written if self._sink is not None else 0

    def write(self, changes: list[dict]) -> None:
        if self._sink is None:
            from api.store.sink import StoreSink

            self._sink = StoreSink(self.db_url, topology=self.topology, notifier=self.notifier)  # creates the schema
        if changes:
            self._sink.write(changes)

