"""Put records back in event-time order behind a watermark, and drop duplicates.

Records may arrive a few seconds late or out of order (contract section 1). The
reorderer holds each record until the watermark (the newest event time seen, minus the
allowed lateness) passes it, then releases records sorted by time. A record older than
the watermark is too late to be placed and is rejected; a record whose series and time
were already seen is a duplicate and is dropped.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from engine.types import Metric, Reject


@dataclass
class Reorderer:
    lateness_s: float = 5.0
    watermark: float = float("-inf")
    duplicates: int = 0
    _heap: list = field(default_factory=list)
    _seq: int = 0
    _seen: dict = field(default_factory=dict)  # (series, ts) -> ts, pruned behind the watermark
    _prune_at: float = float("-inf")

    def push(self, metrics: list[Metric], rejects: list[Reject]) -> list[Metric]:
        """Add records; return those now behind the watermark, oldest first."""
        heap, seen = self._heap, self._seen
        newest = self.watermark + self.lateness_s
        for m in metrics:
            ts = m.ts
            key = (m.series, ts)
            if key in seen:
                self.duplicates += 1
                continue
            if ts < self.watermark:
                rejects.append(Reject("too_late", f"event time {ts:.3f} is {self.watermark - ts:.3f} s behind the watermark", m.series))
                continue
            seen[key] = ts
            self._seq += 1
            heapq.heappush(heap, (ts, self._seq, m))
            if ts > newest:
                newest = ts
        return self._release(newest - self.lateness_s)

    def flush(self) -> list[Metric]:
        """Release everything (end of a recorded file)."""
        return self._release(float("inf"))

    def _release(self, watermark: float) -> list[Metric]:
        if watermark <= self.watermark:
            return []
        out = []
        heap = self._heap
        while heap and heap[0][0] <= watermark:
            out.append(heapq.heappop(heap)[2])
        if watermark != float("inf"):
            self.watermark = watermark
        elif out:
            self.watermark = max(self.watermark, out[-1].ts)
        if self.watermark - self._prune_at >= 10.0:
            horizon = self.watermark - self.lateness_s
            self._seen = {k: t for k, t in self._seen.items() if t >= horizon}
            self._prune_at = self.watermark
        return out
