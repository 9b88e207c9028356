"""Put records back in event-time order behind a watermark, and drop duplicates.

Records may arrive a few seconds late or out of order (contract section 1). The
reorderer holds each record until the watermark (the newest event time seen, minus the
allowed lateness) passes it, then releases records sorted by time (stable: records with
equal times keep their arrival order). A record older than the watermark is too late to
be placed and is rejected; a record whose series and time were already seen is a
duplicate and is dropped.

Held records are kept sorted; new arrivals wait in arrival order and are sorted (by
time, stable) only when records are released, then appended, or merged when some are
older than the newest held. Telemetry is nearly in order, which Python's sort handles
in about linear time, far cheaper than a heap operation per record, and each record is
sorted about once, not once per release while it is held.
"""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from operator import attrgetter

import msgspec

from engine.types import Metric, Reject

_ts = attrgetter("ts")


class HeldRecord(msgspec.Struct, frozen=True, array_like=True):
    """A record held for release, as checkpoint data."""

    name: str
    tags: dict[str, str]
    fields: dict[str, bool | int | float | str]
    ts: float
    series: str

    @classmethod
    def of(cls, m: Metric) -> "HeldRecord":
        return cls(m.name, dict(m.tags), dict(m.fields), m.ts, m.series)

    def metric(self) -> Metric:
        return Metric(self.name, dict(self.tags), dict(self.fields), self.ts, self.series)


class ReorderState(msgspec.Struct, frozen=True):
    """The reorderer's state (a checkpoint): its settings come from the worker's config."""

    watermark: float
    duplicates: int
    held: list[HeldRecord]
    new: list[HeldRecord]
    newest: float
    seen: list[tuple[str, float]]  # oldest first
    prune_at: float
    horizon: float


@dataclass
class Reorderer:
    lateness_s: float = 5.0
    release_step_s: float = 0.25  # release at most this often in event time (batching)
    watermark: float = float("-inf")
    duplicates: int = 0
    stats: object = None  # when given (a pipeline Stats), duplicates are counted into it too
    _held: list = field(default_factory=list)  # sorted by time, stable
    _new: list = field(default_factory=list)  # arrived since the last release, in arrival order
    _newest: float = float("-inf")
    # (series, ts) keys of the records taken, oldest first; those older than `_horizon`
    # count as forgotten (some may still be in it, see `_release`).
    _seen: dict = field(default_factory=dict)
    _prune_at: float = float("-inf")
    _horizon: float = float("-inf")

    def push(self, metrics: list[Metric], rejects: list[Reject]) -> list[Metric]:
        """Add records; return those now behind the watermark, oldest first."""
        seen, held = self._seen, self._new
        newest, watermark = self._newest, self.watermark
        for m in metrics:
            ts = m.ts
            key = (m.series, ts)
            if ts < watermark:  # (rare) a duplicate if still remembered, else too late
                if ts >= self._horizon and key in seen:
                    self._duplicate()
                else:
                    rejects.append(Reject("too_late", f"event time {ts:.3f} is {watermark - ts:.3f} s behind the watermark",
                                          m.series))
                continue
            # One dict operation tests and remembers: the key is its own value, so an
            # earlier arrival's (another tuple) shows a duplicate.
            if seen.setdefault(key, key) is not key:
                self._duplicate()
                continue
            held.append(m)
            if ts > newest:
                newest = ts
        self._newest = newest
        if newest - self.lateness_s >= watermark + self.release_step_s:
            return self._release(newest - self.lateness_s)
        return []

    def _duplicate(self) -> None:
        self.duplicates += 1
        if self.stats is not None:
            self.stats.duplicates += 1

    def snapshot(self) -> ReorderState:
        return ReorderState(self.watermark, self.duplicates, [HeldRecord.of(m) for m in self._held],
                            [HeldRecord.of(m) for m in self._new], self._newest, list(self._seen),
                            self._prune_at, self._horizon)

    def restore(self, state: ReorderState) -> None:
        """Continue from `state` (the duplicates counted into `stats` are the stage's)."""
        self.watermark, self.duplicates = state.watermark, state.duplicates
        self._held = sorted((r.metric() for r in state.held), key=_ts)  # (sorted: stable, and kept so)
        self._new = [r.metric() for r in state.new]
        self._newest, self._prune_at, self._horizon = state.newest, state.prune_at, state.horizon
        self._seen = {k: k for k in state.seen}

    def flush(self) -> list[Metric]:
        """Release everything (end of a recorded file)."""
        return self._release(float("inf"))

    def _release(self, watermark: float) -> list[Metric]:
        held, new = self._held, self._new
        if new:
            new.sort(key=_ts)
            if held and new[0].ts < held[-1].ts:  # merge with the held records newer than the oldest arrival
                k = bisect_right(held, new[0].ts, key=_ts)
                tail = held[k:] + new
                tail.sort(key=_ts)  # stable: at equal times the held (earlier arrivals) stay first
                held[k:] = tail
            else:
                held.extend(new)
            self._new = []
        cut = bisect_right(held, watermark, key=_ts)
        out, self._held = held[:cut], held[cut:]
        if watermark != float("inf"):
            self.watermark = watermark
        elif out:
            self.watermark = max(self.watermark, out[-1].ts)
        if self.watermark - self._prune_at >= 10.0:
            # Forget the oldest keys in place rather than rebuild the dict: keys arrive in
            # nearly time order, so stop at the first recent one. The few older ones behind
            # it stay until a later prune; `push` ignores them (`_horizon`).
            horizon = self._horizon = self.watermark - self.lateness_s
            seen = self._seen
            old = []
            for key in seen:
                if key[1] >= horizon:
                    break
                old.append(key)
            for key in old:
                del seen[key]
            self._prune_at = self.watermark
        return out
