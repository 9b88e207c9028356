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
import zlib
from dataclasses import dataclass
from gzip import open as _std_gzip_open
from pathlib import Path
from typing import Callable, Iterator

from isal.igzip import open as _gzip_open  # gzip's API; inflates about 3x faster (docs/design.md "Speed tricks")
from isal.isal_zlib import error as _IsalError

from engine.pipeline import Pipeline, Stats
from engine.types import Reject

Sink = Callable[[list[dict]], None]
# What a broken gzip file raises: BadGzipFile is an OSError, a truncated one an EOFError;
# deflate data no decoder accepts is neither (zlib.error, isal's IsalError)
_BROKEN = (OSError, EOFError, ValueError, zlib.error, _IsalError)
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


@dataclass(frozen=True)
class FileFailure:
    """A telemetry file that broke part-way: how far it was read, and why it stopped.
    The lines before the break were used."""

    path: Path
    lines: int  # physical lines read before the error (blank ones too)
    bytes: int  # bytes of (decompressed) text read before the error
    error: str

    def describe(self) -> str:
        return f"{self.path}: {self.error} (after {self.lines:,} lines, {self.bytes:,} bytes)"


class FileBroken(ReplayError):
    """Raised by `numbered_lines` after the last line it could read from a broken file."""

    def __init__(self, failure: FileFailure):
        self.failure = failure
        super().__init__(failure.describe())


def open_lines(path: Path) -> Iterator[bytes]:
    """Non-blank lines of a recorded file; gzip is recognised by its magic bytes, not its
    name. A file that breaks part-way raises FileBroken after its last good line."""
    for _, line in numbered_lines(path):
        yield line


def numbered_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(physical line number, line) of every non-blank line (blank lines are counted,
    not yielded: a reject names the line an editor shows). A corrupt, truncated or
    unreadable file raises FileBroken after the last complete line read before the error;
    a file named .gz that is not gzip raises it at once."""
    path = Path(path)
    if not path.is_file():
        raise ReplayError(f"{path}: no such telemetry file")
    at = [0, 0]  # physical lines and bytes handed on so far
    try:
        with open(path, "rb") as fh:
            magic = fh.read(2)
        packed = magic == b"\x1f\x8b"
        if not packed and magic and path.name.lower().endswith(".gz"):
            raise ValueError(f"named .gz but not gzip (starts with {magic!r})")
        try:
            yield from _chunked_lines(path, _gzip_open if packed else open, at, skip=0)
        except _BROKEN:
            if not packed:
                raise
            # ISA-L checks a member's CRC, and meets a broken block, within the call that
            # inflates it, and that call's text is lost; the standard module hands over
            # what it inflated first. Read again past what was handed on, so a broken
            # file gives all it can (and the standard module's words for the break).
            yield from _chunked_lines(path, _std_gzip_open, at, skip=at[0])
    except _BROKEN as exc:
        raise FileBroken(FileFailure(path, at[0], at[1], f"{type(exc).__name__}: {exc}")) from None


def _chunked_lines(path: Path, opener, at: list[int], *, skip: int) -> Iterator[tuple[int, bytes]]:
    """numbered_lines' reading: whole decompressed chunks split into lines in C (read1
    hands over what was decompressed before an error, so only a broken chunk is lost).
    The first `skip` lines were handed on before; `at` counts what is handed on."""
    n = 0
    with opener(path, "rb") as fh:
        read, carry = fh.read1, b""
        while chunk := read(READ_CHUNK):
            if carry:
                chunk = carry + chunk
            cut = chunk.rfind(b"\n") + 1
            carry = chunk[cut:]
            for line in io.BytesIO(chunk[:cut] if carry else chunk):
                n += 1
                if n > skip:
                    at[0] = n
                    at[1] += len(line)
                    if not line.isspace():  # (bytes.isspace: the same set as strip)
                        yield n, line
        if carry:  # a last line without a newline
            n += 1
            at[0] = n
            at[1] += len(carry)
            if not carry.isspace():
                yield n, carry


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
    on_file_error: Callable[[FileFailure], None] | None = None,
) -> Stats:
    """Feed every line of `files` (in the order given) and flush incident changes to `sink`.

    A file that breaks part-way (corrupt or truncated gzip, unreadable) fails alone: the
    lines read before the error are used, `on_file_error` is told, and the next file is
    read. Without `on_file_error`, ReplayError names the broken files once all are read
    (and their incidents flushed)."""
    files = check_files(files)
    failures: list[FileFailure] = []
    pacer = Pacer(speed)
    writer = RejectWriter(rejects_path)
    out = Outbox(sink, batch, progress)
    stats = lambda: pipeline.stats  # noqa: E731  (what progress shows)

    # What exists now (topology, rules, jobs, modules) outlives the replay: frozen, the
    # collector stops walking it on every full collection (a few % of replay time).
    gc.freeze()
    try:
        feed = pipeline.feed  # (bound once: the loop runs per line)
        for path in files:
            try:
                for n, line in numbered_lines(path):
                    if feed(line):  # rejects wait (rare): the common line costs one test
                        writer.write(pipeline.take_rejects(), source=f"{path}:{n}")
                    if n & 255 == 0:
                        out.take(pipeline.changes(), stats)
                    if speed and n & 15 == 0 and pipeline.stats.watermark:
                        pacer.wait_for(pipeline.stats.watermark)
            except FileBroken as exc:
                failures.append(exc.failure)
                if on_file_error is not None:
                    on_file_error(exc.failure)
        pipeline.finish()
        writer.write(pipeline.take_rejects(), source="end")
        out.take(pipeline.changes(), final=True)
    finally:
        gc.unfreeze()
        writer.close()
    if progress:
        progress(pipeline.stats)
    raise_broken(failures, files, told=on_file_error is not None)
    return pipeline.stats


class Outbox:
    """Incident changes on their way to the sink, the latest of each incident kept: sent
    once `batch` wait, at least every 2 s (so a paced replay shows up live) and at the
    end (`final`); progress told at most every 0.5 s. One per replay, sharded or not."""

    def __init__(self, sink: Sink, batch: int, progress: Callable[[Stats], None] | None):
        self.sink, self.batch, self.progress = sink, batch, progress
        self.pending: dict[str, dict] = {}
        self.last_flush = self.last_report = time.monotonic()

    def take(self, changes: list[dict], stats: Callable[[], Stats] | None = None, *, final: bool = False) -> None:
        """`changes` in; the sink and progress (`stats()`, read only when due) when it is time."""
        pending = self.pending
        for inc in changes:
            pending[inc["id"]] = inc
        now = time.monotonic()
        if pending and (final or len(pending) >= self.batch or now - self.last_flush >= 2.0):
            self.sink(list(pending.values()))
            pending.clear()
            self.last_flush = now
        if self.progress and stats is not None and now - self.last_report >= 0.5:
            self.progress(stats())
            self.last_report = now


def raise_broken(failures: list[FileFailure], files: list[Path], *, told: bool) -> None:
    """ReplayError naming the files that broke part-way, unless a caller was told of each."""
    if failures and not told:
        raise ReplayError(f"{len(failures)} of {len(files)} file(s) broke part-way (their good lines were used): "
                          + "; ".join(f.describe() for f in failures))
