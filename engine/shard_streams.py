"""The hand-over of a replay on several cores (engine/shards.py): which shard owns a
device (`Shard`), the parent's stream of what the reading stage releases to each shard
(`Router`), a shard's process (`run_shard`), and the processes and pipes between them
(`Children`).

The parent sends each shard a stream of batches (msgpack: its records, each series'
name and tags the first time; as a float, the time of another shard's record that
reaches a new tick; as a dict, the sample intervals estimated anew) and reads what they
send back, on two threads per child, so that the reading never waits on a pipe (a few
batches queue; more hold the reading back) and neither side waits for the other with a
full one. The reading stage sets the pace, so the shards run at a lower priority
(`NICE`): on two cores, three processes at one priority gave the reading stage two
thirds of a core.
"""
from __future__ import annotations

import gc
import multiprocessing
import os
import queue
import threading
import traceback
import zlib
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Callable

import msgspec

from contract.measurements import JOB_MEASUREMENT
from engine.pipeline import CorrelateStage, DetectStage, Stats
from engine.replay import ReplayError
from engine.types import Metric

NICE = 10  # the shards yield to the reading stage, whose pace is the replay's
SEND_EVERY = 4096  # records and times handed over, over all shards, between two batches
QUEUED = 16  # batches waiting for a shard's pipe before the reading waits


def _index(host: str | None, count: int, assigned: dict[str, int]) -> int:
    k = assigned.get(host) if host is not None else 0
    return k if k is not None else zlib.crc32(host.encode()) % count


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count` of a fabric's devices: which devices' records a stage
    detects on. A device is in one shard (`assigned`, else crc32 of its name); records
    without a host are in shard 0 (job placements are the reading stage's: `owner` says
    shard 0, and `Router` never sends them). A rule's entity always holds the record's
    `{host}` (rules/loader.py), so every symptom comes from one device's records and no
    two shards raise the same one. (The router's memo of devices and each shard's set of
    series grow with the input's devices and series, as the order's own tables do.)"""

    index: int
    count: int
    assigned: dict[str, int] = field(default_factory=dict)  # device -> shard (others: crc32)

    def __post_init__(self) -> None:
        if not 0 <= self.index < self.count:
            raise ValueError(f"shard {self.index} of {self.count} does not exist")

    @staticmethod
    def balance(roles: dict[str, str], count: int) -> dict[str, int]:
        """The topology's devices dealt within each role (sorted by name), so that each
        shard has about as many spines, leaves, hosts and storage hosts, and as many
        records, as every other."""
        by_role: dict[str, list[str]] = {}
        for device, role in roles.items():
            by_role.setdefault(role, []).append(device)
        dealt = [0] * count
        out = {}
        for role in sorted(by_role):
            for device in sorted(by_role[role]):
                k = min(range(count), key=lambda i: (dealt[i], i))
                out[device] = k
                dealt[k] += 1
        return out

    def owner(self) -> Callable[[Metric], bool]:
        """The test of a record's device, memoised per device."""
        index, count, assigned = self.index, self.count, self.assigned
        memo: dict[str, bool] = {}

        def mine(m: Metric) -> bool:
            host = m.tags.get("host")
            if host is None or m.name == JOB_MEASUREMENT:
                return index == 0
            own = memo.get(host)
            if own is None:
                own = memo[host] = _index(host, count, assigned) == index
            return own
        return mine


class Router:
    """The parent's half of the hand-over: what the reading stage releases, into one
    stream per shard (`release`), sent in batches (`send`)."""

    def __init__(self, reader: DetectStage, children: "Children", assigned: dict[str, int]):
        self.reader, self.children, self.count, self.assigned = reader, children, children.count, assigned
        self.estimated: list = []
        reader.reorder.estimated = self.estimated
        self.items: list[list] = [[] for _ in range(self.count)]
        self.known: list[set[str]] = [set() for _ in range(self.count)]  # series each shard has the tags of
        self.owners: dict[str, int] = {}
        self.pending = 0
        self.encode = msgspec.msgpack.Encoder().encode

    def release(self, records: list, reach: list[bool]) -> None:
        items, known, owners, count = self.items, self.known, self.owners, self.count
        if self.estimated:
            self._intervals()
        for m, new in zip(records, reach):
            if m.__class__ is float:  # (a job's time that reached a new tick: every shard's)
                for out in items:
                    out.append(m)
                continue
            host = m.tags.get("host")
            k = owners.get(host)  # (the memo inline: the common case costs one lookup)
            if k is None:
                k = self._owner(host)
            series = m.series
            if series in known[k]:
                items[k].append((series, m.ts, m.fields))
            else:
                known[k].add(series)
                items[k].append((series, m.ts, m.fields, m.name, m.tags))
            if new:
                for j in range(count):
                    if j != k:
                        items[j].append(m.ts)
        self.pending += len(records)
        if self.pending >= SEND_EVERY:
            self.send()

    def _owner(self, host: str | None) -> int:
        """The shard of a device (`Shard`), memoised."""
        k = self.owners.get(host)
        if k is None:
            k = self.owners[host] = _index(host, self.count, self.assigned)
        return k

    def _intervals(self) -> None:
        """The intervals estimated anew since the last release, to their series' shards,
        ahead of the records detected with them."""
        interval = self.reader.reorder.interval
        updates: list[dict] = [{} for _ in range(self.count)]
        for host, series in self.estimated:
            iv = interval(series)
            if iv is not None:
                updates[self._owner(host or None)][series] = iv
        self.estimated.clear()
        for k, up in enumerate(updates):
            if up:
                self.items[k].append(up)

    def send(self, end: bool = False) -> None:
        if self.estimated:
            self._intervals()
        for k, out in enumerate(self.items):
            if out or end:
                self.children.send(k, self.encode((out, self.reader.detector.clock if end else None)))
                self.items[k] = []
        self.pending = 0


def run_shard(make_stage: Callable[[str], DetectStage], shard: Shard, inbox: Connection, outbox: Connection) -> None:
    """A child: the batches of its stream into its stage; its events and progress to the
    parent after each; its Stats at the end."""
    try:
        os.nice(NICE)
        stage = make_stage(f"shard{shard.index}")
        gc.freeze()  # (its stage outlives the replay: as engine.replay.replay does)
        decode = msgspec.msgpack.Decoder().decode
        tags: dict[str, tuple[str, dict]] = {}  # series -> its name and tags
        take = stage.take_released
        while True:
            items, clock = decode(inbox.recv_bytes())
            run: list = []
            for it in items:
                c = it.__class__
                if c is float:
                    run.append(it)
                elif c is dict:  # sample intervals: for the records that follow
                    take(run, {})
                    take([], it)
                    run = []
                else:
                    if len(it) == 5:
                        tags[it[0]] = (it[3], it[4])
                    name, tg = tags[it[0]]
                    run.append(Metric(name, tg, it[2], it[1], it[0]))
            take(run, {})
            if clock is not None:
                stage.finish(clock)
            outbox.send(("batch", stage.events(), stage.stats.watermark))
            if clock is not None:
                outbox.send(("done", stage.stats))
                return
    except BaseException:  # noqa: BLE001 - whatever it was, the parent says it and stops
        try:
            outbox.send(("error", traceback.format_exc()))
        except (OSError, ValueError):
            pass
    finally:
        outbox.close()
        inbox.close()


class Children:
    """The shard processes, the write ends of their inboxes, and what they send back (a
    thread per child reads it into `inbox`)."""

    def __init__(self, make_stage: Callable[[str], DetectStage], count: int, assigned: dict[str, int]):
        ctx = multiprocessing.get_context("fork")
        self.count = count
        self.procs: list = []
        self.conns: list[Connection] = []
        self.outboxes: list[queue.Queue] = []
        self.done: dict[int, Stats] = {}
        self.watermarks: list[float | None] = [None] * count
        self.inbox: queue.Queue = queue.Queue()
        try:
            for k in range(count):
                down_r, down_w = ctx.Pipe(duplex=False)
                up_r, up_w = ctx.Pipe(duplex=False)
                p = ctx.Process(target=run_shard, args=(make_stage, Shard(k, count, assigned), down_r, up_w),
                                name=f"fabric-rca-replay-shard{k}", daemon=True)
                p.start()
                down_r.close()
                up_w.close()
                self.procs.append(p)
                self.conns.append(down_w)
                self.outboxes.append(queue.Queue(maxsize=QUEUED))
                threading.Thread(target=self._write, args=(k,), daemon=True,
                                 name=f"fabric-rca-replay-shard{k}-writer").start()
                threading.Thread(target=self._listen, args=(k, up_r), daemon=True,
                                 name=f"fabric-rca-replay-shard{k}-reader").start()
        except BaseException:
            self.close()
            raise

    def _listen(self, k: int, conn: Connection) -> None:
        try:
            while True:
                self.inbox.put((k, conn.recv()))
        except (EOFError, OSError):
            self.inbox.put((k, ("eof",)))
        finally:
            conn.close()

    def send(self, k: int, data: bytes) -> None:
        self.outboxes[k].put(data)

    def _write(self, k: int) -> None:
        conn, box = self.conns[k], self.outboxes[k]
        while (data := box.get()) is not None:
            try:
                conn.send_bytes(data)
            except OSError:  # (its inbox closed: it failed or died, and says which; `take` tells)
                while box.get() is not None:
                    pass
                return

    def take(self, correlate: CorrelateStage, *, wait: bool = False) -> None:
        """What the shards sent so far into `correlate` (with `wait`: until each is done).
        ReplayError for a shard that failed or died."""
        while True:
            try:
                k, msg = self.inbox.get() if wait and len(self.done) < self.count else self.inbox.get_nowait()
            except queue.Empty:
                return
            self._handle(k, msg, correlate)
            if wait and len(self.done) == self.count and self.inbox.empty():
                return

    def _handle(self, k: int, msg: tuple, correlate: CorrelateStage | None) -> None:
        kind = msg[0]
        if kind == "batch":
            _, events, self.watermarks[k] = msg
            if correlate is not None and events:
                for e in events:
                    correlate.add(e)
                correlate.advance()
        elif kind == "done":
            self.done[k] = msg[1]
        elif kind == "error":
            raise ReplayError(f"replay shard {k} of {self.count} failed:\n{msg[1]}")
        elif k not in self.done:  # "eof" before "done"
            self.procs[k].join(5)
            raise ReplayError(f"replay shard {k} of {self.count} ended without finishing "
                              f"(exit code {self.procs[k].exitcode}): its input was not all read")

    def close(self) -> None:
        for box in self.outboxes:
            try:
                box.put_nowait(None)
            except queue.Full:
                pass
        for c in self.conns:
            c.close()
        for p in self.procs:
            if p.is_alive():
                p.terminate()
            p.join(5)
