"""Replay on several cores: the fabric's devices in shards, one detect stage per shard.

`replay` (engine/replay.py) runs both stages in one process, and stage 1 (parse, order,
features, detect) is most of its time. Here each of `count` child processes reads every
line and runs a whole `DetectStage` with a `Shard` (engine/pipeline.py): it orders all
records and ticks with the whole input, but detects only on its own devices. The parent
runs the one `CorrelateStage`, which waits for every shard's tick before it applies a
tick's events, as it waits for every telemetry partition's in the Kafka workers. So:

- the incidents are those of `replay`: every shard's ticks are the input's ticks (each
  orders all records), every symptom comes from one device's records (a rule's entity
  holds its `{host}`), and the correlator applies a tick's events in canonical order,
  whichever shard sent them (tests/test_shards.py compares them);
- what is read is counted once: records, rejects and duplicates by shard 0 (it alone
  writes the rejects file), what is detected by each shard (summed);
- ordering is done by every shard, and parsing too, but for the common lines of line
  protocol of other shards' devices, which each shard skims (`DetectStage`: their fields
  are read only if the order compares them); detection, the larger part, is split.
  On 2 cores two shards replay a 1 s fabric about 1.2-1.5 times as fast as one process
  (docs/benchmarks.md).

The children are forked: they inherit the loaded parts (topology, rules, models) and
build their own stages from them. A child that fails ends the replay with its traceback;
one that dies (killed, out of memory) ends it with its exit code.
"""
from __future__ import annotations

import gc
import multiprocessing
import os
import time
import traceback
from collections import Counter
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Callable, Iterator

from engine.pipeline import CorrelateStage, DetectStage, Stats
from engine.replay import (FileBroken, FileFailure, Outbox, ReplayError, RejectWriter, Sink, check_files,
                           numbered_lines, raise_broken)
from engine.skim import Shard

# Counts of what a shard detected on (its own devices), summed over the shards; every
# other count in Stats is of what was read, the same in every shard, taken from shard 0.
PER_SHARD = ("ignored_fields", "counter_resets", "non_numeric_fields", "superseded", "symptoms")
PER_SHARD_COUNTERS = ("ignored_measurements", "unused")
SEND_EVERY = 2048  # lines between a shard's messages (and at least every PROGRESS_S)
PROGRESS_S = 0.5  # (as often as engine.replay.Outbox reports progress)


def usable_cores() -> int:
    """Cores this process may run on (its affinity, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # (not Linux)
        return os.cpu_count() or 1


def default_shards() -> int:
    """Shards for a replay that runs as fast as it can: one per usable core, at most 4
    (each shard parses every line: beyond a few, more shards mostly parse); 1 where
    processes cannot be forked (the shards inherit the loaded parts by fork)."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    return max(1, min(4, usable_cores()))


@dataclass(frozen=True)
class _Progress:
    records: int
    lines: int
    watermark: float | None
    rejects: dict


def _run_shard(make_stage: Callable[[str, Shard], DetectStage], files: list[Path], shard: Shard,
               conn: Connection) -> None:
    """A child: every line of `files` into its stage; events, rejects (shard 0), file
    failures (shard 0) and progress to the parent; its Stats at the end."""
    try:
        stage = make_stage(f"shard{shard.index}", shard)
        gc.freeze()  # (its stage outlives the replay: as engine.replay.replay does)
        feed, first = stage.feed, shard.index == 0
        events: list = []
        rejects: list = []
        last = time.monotonic()

        def send() -> None:
            nonlocal events, rejects, last
            st = stage.stats
            conn.send(("batch", events, rejects, _Progress(st.records, st.lines, st.watermark, dict(st.rejects) if first else {})))
            events, rejects, last = [], [], time.monotonic()

        for path in files:
            try:
                for n, line in numbered_lines(path):
                    if feed(line):
                        if stage.rejected:
                            taken = stage.take_rejects()
                            if first:
                                rejects.append((f"{path}:{n}", taken))
                        if stage.has_events:
                            events.extend(stage.events())
                    if n % SEND_EVERY == 0 and (events or rejects or time.monotonic() - last >= PROGRESS_S):
                        send()
            except FileBroken as exc:
                if first:
                    conn.send(("file_error", exc.failure))
        stage.finish()
        events.extend(stage.events())
        taken = stage.take_rejects()
        if first and taken:
            rejects.append(("end", taken))
        send()
        conn.send(("done", stage.stats))
    except BaseException:  # noqa: BLE001 - whatever it was, the parent says it and stops
        try:
            conn.send(("error", traceback.format_exc()))
        except (OSError, ValueError):
            pass
    finally:
        conn.close()


def merge_stats(shards: list[Stats], correlate: CorrelateStage) -> Stats:
    """One Stats of the whole replay (module docstring: what each count is of)."""
    out = shards[0]
    for name in PER_SHARD:
        setattr(out, name, sum(getattr(s, name) for s in shards))
    for name in PER_SHARD_COUNTERS:
        setattr(out, name, sum((getattr(s, name) for s in shards), Counter()))
    examples: dict = {}
    for s in shards:  # (the first shard's example of a reason stands)
        for reason, example in s.unused_examples.items():
            examples.setdefault(reason, example)
    out.unused_examples = examples
    c = correlate.correlator
    out.incidents_opened, out.incidents_resolved, out.incidents_reopened = c.opened, c.resolved, c.reopened
    return out


class _Children:
    """The shard processes and the read ends of their pipes."""

    def __init__(self, make_stage: Callable[[str, Shard], DetectStage], files: list[Path], count: int,
                 assigned: dict[str, int]):
        ctx = multiprocessing.get_context("fork")
        self.count = count
        self.procs: list = []
        self.live: dict[Connection, int] = {}
        self.done: dict[int, Stats] = {}
        try:
            for k in range(count):
                reader, writer = ctx.Pipe(duplex=False)
                p = ctx.Process(target=_run_shard, args=(make_stage, files, Shard(k, count, assigned), writer),
                                name=f"fabric-rca-replay-shard{k}", daemon=True)
                p.start()
                writer.close()
                self.procs.append(p)
                self.live[reader] = k
        except BaseException:
            self.close()
            raise

    def messages(self) -> Iterator[tuple[int, tuple]]:
        """(shard, message) as they come, until every shard said "done" and closed; a
        shard's "done" is kept in `done`. ReplayError for a shard that failed or died."""
        while self.live:
            for conn in wait(list(self.live)):
                k = self.live[conn]
                try:
                    msg = conn.recv()
                except EOFError:
                    del self.live[conn]
                    if k not in self.done:
                        self.procs[k].join(5)
                        raise ReplayError(f"replay shard {k} of {self.count} ended without finishing "
                                          f"(exit code {self.procs[k].exitcode}): its input was not all read") from None
                    continue
                if msg[0] == "error":
                    raise ReplayError(f"replay shard {k} of {self.count} failed:\n{msg[1]}")
                if msg[0] == "done":
                    self.done[k] = msg[1]
                else:
                    yield k, msg

    def close(self) -> None:
        for p in self.procs:
            if p.is_alive():
                p.terminate()
            p.join(5)


def replay_sharded(
    make_stage: Callable[[str, Shard], DetectStage],
    correlate: CorrelateStage,
    files: list[Path],
    *,
    shards: int,
    roles: dict[str, str] | None = None,
    sink: Sink,
    rejects_path: Path | None = None,
    progress: Callable[[Stats], None] | None = None,
    batch: int = 2000,
    on_file_error: Callable[[FileFailure], None] | None = None,
) -> Stats:
    """`engine.replay.replay` (as fast as it can: no pacing) on `shards` processes.
    `make_stage(source, shard)` builds a shard's detect stage (in the child);
    `correlate` must wait for the sources `shard0` ... (`CorrelateStage(sources=...)`);
    `roles` (the topology's device -> role) deals the devices out evenly (`Shard.balance`)."""
    if shards < 1:
        raise ValueError(f"shards must be at least 1, got {shards}")
    files = check_files(files)
    names = [f"shard{k}" for k in range(shards)]
    if set(correlate.sources) != set(names):
        raise ValueError(f"the correlate stage must wait for {names}, not {sorted(correlate.sources)}")
    rejects = RejectWriter(rejects_path)
    failures: list[FileFailure] = []
    out = Outbox(sink, batch, progress)
    seen = [_Progress(0, 0, None, {})] * shards  # each shard's latest progress
    gc.freeze()  # what exists now outlives the replay (engine.replay.replay), and the children share its pages
    try:
        children = _Children(make_stage, files, shards, Shard.balance(roles or {}, shards))
    except BaseException:
        gc.unfreeze()
        raise
    try:
        for k, msg in children.messages():
            if msg[0] == "batch":
                _, events, taken, seen[k] = msg
                for source, rs in taken:
                    rejects.write(rs, source=source)
                for e in events:
                    correlate.add(e)
                if events:
                    correlate.advance()
            else:  # "file_error" (shard 0's)
                failures.append(msg[1])
                if on_file_error is not None:
                    on_file_error(msg[1])
            out.take(correlate.changes(), lambda: _progress_stats(seen, correlate))
        correlate.advance()  # (every shard ended on the same tick: the input's last)
        out.take(correlate.changes(), final=True)
    finally:
        gc.unfreeze()
        rejects.close()
        children.close()
    stats = merge_stats([children.done[k] for k in range(shards)], correlate)
    if progress:
        progress(stats)
    raise_broken(failures, files, told=on_file_error is not None)
    return stats


def _progress_stats(seen: list[_Progress], correlate: CorrelateStage) -> Stats:
    """What progress shows mid-replay: shard 0's reading, the slowest shard's watermark."""
    first = seen[0]
    st = Stats(records=first.records, lines=first.lines, rejects=Counter(first.rejects))
    marks = [p.watermark for p in seen if p.watermark is not None]
    st.watermark = min(marks) if len(marks) == len(seen) else None
    c = correlate.correlator
    st.incidents_opened, st.incidents_resolved = c.opened, c.resolved
    return st
