"""A one-line progress display on a terminal (stderr), silent elsewhere."""
from __future__ import annotations

import sys
import time
from typing import TextIO

from engine.pipeline import Stats


class Progress:
    def __init__(self, *, total_hint: int | None = None, stream: TextIO | None = None, enabled: bool | None = None):
        stream = stream or sys.stderr
        self.stream = stream
        self.enabled = stream.isatty() if enabled is None else enabled
        self.started = time.monotonic()
        self.total_hint = total_hint

    def __call__(self, stats: Stats) -> None:
        if not self.enabled:
            return
        elapsed = max(time.monotonic() - self.started, 1e-9)
        rate = stats.records / elapsed
        bar = ""
        if self.total_hint:
            done = min(1.0, stats.records / self.total_hint)
            fill = int(done * 24)
            bar = f"[{'#' * fill}{'.' * (24 - fill)}] {done:4.0%} "
        self.stream.write(
            f"\r{bar}{stats.records:,} records  {rate:,.0f} rec/s  "
            f"{stats.incidents_opened} incidents ({stats.incidents_resolved} resolved)  "
            f"{sum(stats.rejects.values())} rejects   "
        )
        self.stream.flush()

    def done(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()
