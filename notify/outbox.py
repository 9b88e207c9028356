"""A bounded, coalescing queue with one sender thread, retries and counters.

What waits is keyed (an incident id, an alert's label set): a newer item under a waiting
key replaces it, so a burst of changes of one incident sends its latest state once. The
queue holds at most `max_items` keys; beyond that the oldest waiting item is dropped and
counted (for Alertmanager the next resend restores an open incident's alert). A send
that fails is retried with a growing wait (0.5 s doubling to 30 s); a send the receiver
refuses as malformed (`Refused`) is dropped and counted, never retried. Nothing here
raises into the caller: the worker or the replay that submits never stops for a receiver.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Protocol

log = logging.getLogger("fabric_rca.notify")

MAX_ITEMS = 10_000
BATCH = 100


class Refused(Exception):
    """The receiver answered that the payload is wrong (HTTP 4xx): retrying cannot help."""


class Channel(Protocol):
    name: str

    def send(self, batch: list[Any]) -> None:
        """Deliver `batch`; raise `Refused` for a permanent refusal, anything else to retry."""

    def tick(self, now: float) -> list[tuple[Hashable, Any]]:
        """Items due by time alone (resends), asked about once a second."""


@dataclass
class OutboxStats:
    sent: int = 0  # items delivered
    failures: int = 0  # send attempts that failed (each retried)
    refused: int = 0  # items the receiver refused (dropped)
    dropped: int = 0  # items dropped because the queue was full
    last_error: str = ""


class Outbox:
    def __init__(self, channel: Channel, *, max_items: int = MAX_ITEMS, batch: int = BATCH,
                 first_wait_s: float = 0.5, max_wait_s: float = 30.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.channel, self.max_items, self.batch = channel, max_items, batch
        self.first_wait_s, self.max_wait_s, self.clock = first_wait_s, max_wait_s, clock
        self.stats = OutboxStats()
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._in_flight = 0
        self._cond = threading.Condition()
        self._stop = False
        self._thread = threading.Thread(target=self._run, name=f"fabric-rca-notify-{channel.name}", daemon=True)
        self._thread.start()

    @property
    def pending(self) -> int:
        with self._cond:
            return len(self._items) + self._in_flight

    def put(self, items: list[tuple[Hashable, Any]]) -> None:
        with self._cond:
            for key, item in items:
                self._items.pop(key, None)
                self._items[key] = item
            while len(self._items) > self.max_items:
                self._items.popitem(last=False)
                self.stats.dropped += 1
            self._cond.notify_all()

    def close(self, timeout: float = 10.0) -> int:
        """Send what waits (for at most `timeout` seconds), stop; returns the items left."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while (self._items or self._in_flight) and time.monotonic() < deadline:
                self._cond.wait(min(0.1, max(0.0, deadline - time.monotonic())))
            self._stop = True
            left = len(self._items) + self._in_flight
            self._cond.notify_all()
        self._thread.join(timeout=max(1.0, deadline - time.monotonic()))
        return left

    def _run(self) -> None:
        wait = self.first_wait_s
        while True:
            batch = self._take()
            if batch is None:
                return
            if not batch:
                continue
            try:
                self.channel.send([item for _, item in batch])
            except Refused as exc:
                self._done(batch, refused=True, error=exc)
            except Exception as exc:  # noqa: BLE001 - any failure of the receiver: keep the items, retry
                self._retry(batch, exc, wait)
                self._pause(wait)
                wait = min(wait * 2, self.max_wait_s)
                continue
            else:
                self._done(batch)
            wait = self.first_wait_s

    def _pause(self, seconds: float) -> None:
        """Wait `seconds` before a retry; new items do not cut it short, `close` does."""
        deadline = time.monotonic() + seconds
        with self._cond:
            while not self._stop and (left := deadline - time.monotonic()) > 0:
                self._cond.wait(left)

    def _take(self) -> list[tuple[Hashable, Any]] | None:
        due = self.channel.tick(self.clock())
        if due:
            self.put(due)
        with self._cond:
            if self._stop:
                return None
            if not self._items:
                self._cond.wait(1.0)
                return []
            batch = []
            while self._items and len(batch) < self.batch:
                batch.append(self._items.popitem(last=False))
            self._in_flight = len(batch)
            return batch

    def _done(self, batch: list, *, refused: bool = False, error: Exception | None = None) -> None:
        with self._cond:
            self._in_flight = 0
            if refused:
                self.stats.refused += len(batch)
                self.stats.last_error = _short(error)
                log.warning("%s refused %d notification(s): %s", self.channel.name, len(batch), _short(error))
            else:
                self.stats.sent += len(batch)
            self._cond.notify_all()

    def _retry(self, batch: list, exc: Exception, wait: float) -> None:
        with self._cond:
            self._in_flight = 0
            self.stats.failures += 1
            self.stats.last_error = _short(exc)
            for key, item in reversed(batch):  # back at the head, unless a newer one came meanwhile
                if key not in self._items:
                    self._items[key] = item
                    self._items.move_to_end(key, last=False)
            while len(self._items) > self.max_items:
                self._items.popitem(last=False)
                self.stats.dropped += 1
        log.warning("%s unreachable (%s); %d notification(s) kept, retrying in %.1f s",
                    self.channel.name, _short(exc), self.pending, wait)


def _short(exc: BaseException | None) -> str:
    if exc is None:
        return ""
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"[:200]
