"""Replay on several cores: one process reads, the fabric's devices in shards detect.

`replay` (engine/replay.py) runs both stages in one process: parse, order, features,
detect, correlate. Here the parent reads: one `DetectStage` parses, maps and orders every
line once (`release_to`) and applies the jobs' placements; what its order releases goes,
record by record, to the child process of the record's device (`Shard`), where a whole
`DetectStage` detects on it (`take_released`). The parent runs the one `CorrelateStage`,
which waits for every shard's tick before it applies a tick's events, as it waits for
every telemetry partition's in the Kafka workers. So:

- the incidents are those of `replay`: each shard is handed, besides its own records in
  the reading stage's order, the time of every other record that reaches a new tick, so
  it ticks where the one process ticks, with the sample intervals the reading stage
  estimated (`Reorderer.estimated`, sent before the records detected with them), and it
  ends on the newest time detected on; every symptom comes from one device's records (a
  rule's entity holds its `{host}`), and the correlator applies a tick's events in
  canonical order, whichever shard sent them (tests/test_shards.py compares them);
- what is read is counted once, by the reading stage (records, rejects, duplicates,
  mapped records; the rejects file is written as one process writes it), what is detected
  by each shard (summed: `merge_stats`);
- parsing and ordering are done once; detection, the larger part at coarse polling, is
  split. The reading stage is one process's work, so more shards help only while it
  keeps up (docs/benchmarks.md).

The children are forked: they inherit the loaded parts (topology, rules, models) and
build their own stages from them; how the parent streams to them is engine/shard_streams.py.
A child that fails ends the replay with its traceback; one that dies (killed, out of
memory) ends it with its exit code.
"""
from __future__ import annotations

import gc
import multiprocessing
import os
from collections import Counter
from pathlib import Path
from typing import Callable

from engine.pipeline import CorrelateStage, DetectStage, Stats
from engine.replay import FileBroken, FileFailure, Outbox, RejectWriter, Sink, check_files, numbered_lines, \
    raise_broken
from engine.shard_streams import Children, Router, Shard  # noqa: F401  (Shard: who owns a device)

# Counts of what a shard detected on (its own devices), summed over the shards; every
# other count in Stats is of what was read, the reading stage's.
PER_SHARD = ("ignored_fields", "counter_resets", "non_numeric_fields", "superseded", "symptoms")
PER_SHARD_COUNTERS = ("ignored_measurements", "unused")


def usable_cores() -> int:
    """Cores this process may run on (its affinity, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # (not Linux)
        return os.cpu_count() or 1


def default_shards() -> int:
    """Shards for a replay that runs as fast as it can: one per usable core, at most 4
    (the reading stage is one process's work: beyond a few, more shards wait for it); 1
    where processes cannot be forked (the shards inherit the loaded parts by fork)."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    return max(1, min(4, usable_cores()))


def merge_stats(read: Stats, shards: list[Stats], correlate: CorrelateStage) -> Stats:
    """One Stats of the whole replay (module docstring: what each count is of)."""
    out = read
    for name in PER_SHARD:
        setattr(out, name, sum(getattr(s, name) for s in shards))
    for name in PER_SHARD_COUNTERS:
        setattr(out, name, sum((getattr(s, name) for s in shards), Counter()))
    examples: dict = {}
    for s in shards:  # (the first shard's example of a reason stands)
        for reason, example in s.unused_examples.items():
            examples.setdefault(reason, example)
    out.unused_examples = examples
    marks = [s.watermark for s in shards if s.watermark is not None]
    out.watermark = min(marks) if marks else None
    c = correlate.correlator
    out.incidents_opened, out.incidents_resolved, out.incidents_reopened = c.opened, c.resolved, c.reopened
    return out


def replay_sharded(
    make_stage: Callable[[str], DetectStage],
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
    """`engine.replay.replay` (as fast as it can: no pacing) on `shards` processes and
    this one. `make_stage(source)` builds a detect stage: the reading stage here (source
    `shard0`, whose job events it sends), each shard's in its child; `correlate` must wait
    for the sources `shard0` ... (`CorrelateStage(sources=...)`); `roles` (the topology's
    device -> role) deals the devices out evenly (`Shard.balance`)."""
    if shards < 1:
        raise ValueError(f"shards must be at least 1, got {shards}")
    files = check_files(files)
    names = [f"shard{k}" for k in range(shards)]
    if set(correlate.sources) != set(names):
        raise ValueError(f"the correlate stage must wait for {names}, not {sorted(correlate.sources)}")
    assigned = Shard.balance(roles or {}, shards)
    rejects = RejectWriter(rejects_path)
    failures: list[FileFailure] = []
    out = Outbox(sink, batch, progress)
    gc.freeze()  # what exists now outlives the replay (engine.replay.replay), and the children share its pages
    try:
        children = Children(make_stage, shards, assigned)
    except BaseException:
        gc.unfreeze()
        raise
    try:
        reader = make_stage(names[0])
        router = Router(reader, children, assigned)
        reader.release_to(router.release)
        _read(reader, files, correlate, children, rejects, out, failures, on_file_error)
        reader.finish()
        rejects.write(reader.take_rejects(), source="end")
        for e in reader.events():
            correlate.add(e)
        router.send(end=True)
        children.take(correlate, wait=True)
        correlate.advance()  # (every shard ended on the same tick: the input's last)
        out.take(correlate.changes(), final=True)
    finally:
        gc.unfreeze()
        rejects.close()
        children.close()
    stats = merge_stats(reader.stats, [children.done[k] for k in range(shards)], correlate)
    if progress:
        progress(stats)
    raise_broken(failures, files, told=on_file_error is not None)
    return stats


def _read(reader: DetectStage, files: list[Path], correlate: CorrelateStage, children: Children,
          rejects: RejectWriter, out: Outbox, failures: list[FileFailure],
          on_file_error: Callable[[FileFailure], None] | None) -> None:
    """Every line of `files` into the reading stage, as `engine.replay.replay` feeds its
    pipeline: its rejects written as they come, its job events to `correlate`, and what
    the shards sent taken now and then."""
    feed = reader.feed
    for path in files:
        try:
            for n, line in numbered_lines(path):
                if feed(line):
                    rejects.write(reader.take_rejects(), source=f"{path}:{n}")
                    for e in reader.events():
                        correlate.add(e)
                if n & 255 == 0:
                    children.take(correlate)
                    out.take(correlate.changes(), lambda: _progress_stats(reader, children, correlate))
        except FileBroken as exc:
            failures.append(exc.failure)
            if on_file_error is not None:
                on_file_error(exc.failure)


def _progress_stats(reader: DetectStage, children: Children, correlate: CorrelateStage) -> Stats:
    """What progress shows mid-replay: what was read, the slowest shard's watermark."""
    read = reader.stats
    st = Stats(records=read.records, lines=read.lines, rejects=Counter(read.rejects))
    marks = children.watermarks
    st.watermark = min(marks) if all(w is not None for w in marks) else None
    c = correlate.correlator
    st.incidents_opened, st.incidents_resolved = c.opened, c.resolved
    return st
