"""Which telemetry partitions correlation waits for, and which it may stop waiting for
(by wall time: the only wall clock of the correlation, kept out of the core)."""
from __future__ import annotations

import time
from typing import Callable


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
