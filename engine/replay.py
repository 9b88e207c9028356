"""Replay recorded telemetry files through the pipeline (contract section 7).

The file adapter: reads `.jsonl` / `.jsonl.gz` line by line, paces event time when asked,
reports progress, writes rejects, and hands incident changes to a sink in batches (no
per-record database writes).
"""
from __future__ import annotations

import gc
import io
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

try:  # ISA-L's inflate is about 2.5x zlib's; the standard gzip module is the fallback
    from isal.igzip import open as _gzip_open
except ImportError:  # pragma: no cover
    from gzip import open as _gzip_open

from engine.pipeline import Pipeline, Stats
from engine.types import Reject

Sink = Callable[[list[dict]], None]
READ_CHUNK = 1 << 20  # bytes of decompressed text read at once


class ReplayError(ValueError):
    pass


def check_files(files: list[Path]) -> list[Path]:
    """All telemetry files exist, before any work starts; ReplayError names the first missing."""
    paths = [Path(f) for f in files]
    for path in paths:
        if not path.is_file():
            raise ReplayError(f"{path}: no such telemetry file")
    return paths


def open_lines(path: Path) -> Iterator[bytes]:
    """Lines of a recorded file; gzip is recognised by its magic bytes, not its name."""
    path = Path(path)
    if not path.is_file():
        raise ReplayError(f"{path}: no such telemetry file")
    with open(path, "rb") as fh:
        magic = fh.read(2)
    opener = _gzip_open if magic == b"\x1f\x8b" else open
    # Iterating a GzipFile calls its Python-level readline per line; a BufferedReader
    # over it splits lines in C from large decompressed chunks.
    with opener(path, "rb") as raw, io.BufferedReader(raw, READ_CHUNK) as fh:
        for line in fh:
            if not line.isspace():  # blank lines are skipped (bytes.isspace: same set as strip)
                yield line


@dataclass
class Pacer:
    """Paces event time at `speed` times real time (None: as fast as possible)."""

    speed: float | None
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    _origin: tuple[float, float] | None = None

    def wait_for(self, event_ts: float) -> None:
        if not self.speed:
            return
        now = self.clock()
        if self._origin is None:
            self._origin = (event_ts, now)
            return
        due = self._origin[1] + (event_ts - self._origin[0]) / self.speed
        if due > now:
            self.sleep(min(due - now, 5.0))


@dataclass
class RejectWriter:
    path: Path | None
    _fh: object = None

    def write(self, rejects: list[Reject], *, source: str) -> None:
        if not rejects or self.path is None:
            return
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.path, "w", encoding="utf-8")
        for r in rejects:
            self._fh.write(json.dumps({"reason": r.reason, "detail": r.detail, "source": source, "raw": r.raw[:4096]}) + "\n")

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()


def replay(
    pipeline: Pipeline,
    files: list[Path],
    *,
    sink: Sink,
    speed: float | None = None,
    rejects_path: Path | None = None,
    progress: Callable[[Stats], None] | None = None,
    batch: int = 2000,
) -> Stats:
    """Feed every line of `files` (in the order given) and flush incident changes to `sink`."""
    files = check_files(files)
    pacer = Pacer(speed)
    writer = RejectWriter(rejects_path)
    pending: dict[str, dict] = {}
    last_report = last_flush = time.monotonic()

    def flush() -> None:
        if pending:
            sink(list(pending.values()))
            pending.clear()

    # What exists now (topology, rules, jobs, modules) outlives the replay: frozen, the
    # collector stops walking it on every full collection (a few % of replay time).
    gc.freeze()
    try:
        feed = pipeline.feed  # (bound once: the loop runs per line)
        for path in files:
            for n, line in enumerate(open_lines(path), 1):
                if feed(line):  # rejects wait (rare): the common line costs one test
                    writer.write(pipeline.take_rejects(), source=f"{path}:{n}")
                if n & 255 == 0:
                    changes = pipeline.changes()
                    for inc in changes:
                        pending[inc["id"]] = inc
                    now = time.monotonic()
                    if len(pending) >= batch or (pending and now - last_flush >= 2.0):
                        flush()  # in batches, and at least every 2 s so a paced replay shows up live
                        last_flush = now
                    if progress and now - last_report >= 0.5:
                        progress(pipeline.stats)
                        last_report = now
                if speed and n & 15 == 0 and pipeline.stats.watermark:
                    pacer.wait_for(pipeline.stats.watermark)
        pipeline.finish()
        writer.write(pipeline.take_rejects(), source="end")
        for inc in pipeline.changes():
            pending[inc["id"]] = inc
        flush()
    finally:
        gc.unfreeze()
        writer.close()
    if progress:
        progress(pipeline.stats)
    return pipeline.stats
