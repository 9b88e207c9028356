"""The worker's detect stages in a child process, so that stage 1 (parse, order, features,
detect: most of a worker's CPU) runs beside faust, correlation and the store on another core.

A worker holds one `DetectStage` per telemetry partition. With `WorkerSettings.
detect_processes` N > 0 (the `worker` command's default is 4 on a machine of two cores or
more) they live in N child processes, partition p's in child p mod N, each forked when the
app is built (it inherits the engine's parts: rules, topology, models), and the worker's
main process holds a `ChildStage` for each: what `Checkpoints` holds, restores and saves,
and what /metrics reads.

Order is the whole design. Every request (make or load a stage, feed a message, pack a
snapshot, drop a stage) goes down one pipe and is answered in the order it was sent, and the
answers are taken in that order by one task (`DetectChild.run`):

- a fed message's dead letters and symptoms are handed on, then the message is held for
  acking (`Checkpoints.hold`), as the in-process agent does, one message after another;
- a snapshot is asked for in line behind the messages already sent, so it covers exactly
  the messages held when its answer is taken (`Checkpoints.save` waits for it);
- the agent does not wait for its message's answer (that is the point) but for room:
  at most `MAX_IN_FLIGHT` messages are sent and not answered.

A stage restored from its snapshot or rebuilt from its input (`Checkpoints.stage`,
`streams.rebuild`) is made in the main process as before, then sent down as a snapshot;
a new one is made in the child.
A request that fails in the child (a bug: the stage reads untrusted input without
raising) fails the task with the child's traceback; a child that dies fails it too, and
faust then stops the worker rather than go on without its stages.
"""
from __future__ import annotations

import asyncio
import logging
import multiprocessing
import queue
import signal
import threading
import traceback
from collections import deque
from dataclasses import dataclass, field
from typing import Awaitable, Callable

from compose import EngineParts, new_detect_stage
from engine import checkpoint
from engine.events import encode_batch
from engine.pipeline import DetectStage

log = logging.getLogger("fabric_rca.worker")

# Messages sent to a child and not answered, and their bytes: room for the agent to run
# ahead to other partitions' messages while one child works through a fetch of its own
# (faust hands on a partition's fetch at once: at 512, 3.8-4.0 s on the Kafka bench, at
# 4096, 3.5 s), bounded in memory.
MAX_IN_FLIGHT = 4096
MAX_IN_FLIGHT_BYTES = 64 << 20
MAX_BATCH = 256  # requests per write to the pipe (a busy agent sends them together)


@dataclass
class Figures:
    """What /metrics reads of one detect stage (`DetectStage.stats`, its clock)."""
    records: int = 0
    duplicates: int = 0
    superseded: int = 0
    symptoms: int = 0
    rejects: dict = field(default_factory=dict)
    unused: dict = field(default_factory=dict)  # reason -> (count, first example)
    clock: float = float("-inf")


def figures(stage: DetectStage | ChildStage) -> Figures:
    """The figures of a stage in this process or (as last reported) in the child."""
    if isinstance(stage, ChildStage):
        return stage.figures
    st = stage.stats
    return Figures(st.records, st.duplicates, st.superseded, st.symptoms, dict(st.rejects),
                   st.unused_figures(), stage.detector.clock)


class ChildFailed(RuntimeError):
    """The child process failed a request, or died."""


# ------------------------------------------------------------------------ the child
def _serve(conn, parts: EngineParts) -> None:
    """The child's loop: batches of requests in, a batch of answers (and the figures of
    the stages fed) out, until the pipe closes. Ctrl-C in a terminal reaches the whole
    process group: the worker stops on it and ends its children (SIGTERM, or the pipe
    closing), rather than see them die first and report a crash."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stages: dict[str, DetectStage] = {}
    while True:
        try:
            batch = conn.recv()
        except (EOFError, OSError):
            return
        answers, fed = [], set()
        for op, key, arg in batch:
            try:
                answers.append(_answer(stages, parts, op, key, arg))
            except Exception:  # noqa: BLE001 - reported to the parent, which fails loudly
                answers.append(ChildFailed(f"{op} {key}: {traceback.format_exc()}"))
            if op == "feed":
                fed.add(key)
        conn.send((answers, {k: figures(stages[k]) for k in fed if k in stages}))


def _answer(stages: dict[str, DetectStage], parts: EngineParts, op: str, key: str, arg):
    if op == "feed":
        stage = stages[key]
        if not stage.feed(arg):
            return None
        rejects, events = stage.take_rejects(), stage.events()
        return (rejects or None, encode_batch(events) if events else None)
    if op == "state":
        return checkpoint.pack(stages[key].state())
    if op == "new":  # arg: its source
        stages[key] = new_detect_stage(parts, arg)
        return None
    if op == "load":  # arg: (source, the stage's checkpoint)
        source, blob = arg
        stage = new_detect_stage(parts, source)
        stage.restore(blob)
        stages[key] = stage
        return None
    if op == "drop":
        stages.pop(key, None)
        return None
    raise ValueError(f"unknown request {op!r}")


# ----------------------------------------------------------------------- the parent
class ChildStage:
    """A detect stage living in the child: what the main process holds in its place."""

    def __init__(self, child: DetectChild, key: str):
        self.child, self.key = child, key
        self.figures = Figures()
        self.sent_since_state = 0  # messages fed since the last snapshot was asked for

    def packed_state_in_order(self, take: Callable[[bytes], None]) -> Awaitable[None]:
        """Ask for a snapshot behind every message sent so far; `take(packed)` runs when
        it arrives, after those messages were handed on and held. Awaited: done."""
        self.sent_since_state = 0
        return self.child.request("state", self, None, take)

    def has_unanswered(self) -> bool:
        return self.sent_since_state > 0

    def close(self) -> None:
        """Let go of the stage in the child (its partition moved away)."""
        if self.child.stages.get(self.key) is self:
            del self.child.stages[self.key]
        if self.child.failure is None:
            self.child.send("drop", self, None)


@dataclass
class _Pending:
    op: str
    stage: ChildStage
    then: Callable | None  # feed: the handler of its answer; state: take(packed)
    size: int = 0  # feed: the message's bytes
    done: asyncio.Future | None = None


class DetectChild:
    """The child process, the pipe's writer and reader threads, and the answer task."""

    def __init__(self, parts: EngineParts):
        ctx = multiprocessing.get_context("fork")  # inherits the parts; before faust starts its threads
        self._conn, child_end = ctx.Pipe()
        self.process = ctx.Process(target=_serve, args=(child_end, parts), name="fabric-rca-detect", daemon=True)
        self.process.start()
        child_end.close()
        self._out: queue.SimpleQueue = queue.SimpleQueue()
        self._pending: deque[_Pending] = deque()
        self._answers: asyncio.Queue | None = None
        self._room: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.stages: dict[str, ChildStage] = {}  # key -> the latest stage sent down (figures go to it)
        self.in_flight = 0
        self.in_flight_bytes = 0
        self.failure: BaseException | None = None
        self._closed = False
        threading.Thread(target=self._write, name="fabric-rca-detect-writer", daemon=True).start()

    # ---- threads
    def _write(self) -> None:
        while True:
            item = self._out.get()
            if item is None:
                break
            batch = [item]
            while len(batch) < MAX_BATCH:
                try:
                    more = self._out.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self._out.put(None)
                    break
                batch.append(more)
            try:
                self._conn.send(batch)
            except (OSError, ValueError):
                break

    def _read(self) -> None:
        while True:
            try:
                got = self._conn.recv()
            except (EOFError, OSError):
                if self._closed:
                    return
                self.process.join(timeout=1)
                got = ChildFailed(f"the detect child process ended (exit code {self.process.exitcode})")
            try:
                self._loop.call_soon_threadsafe(self._answers.put_nowait, got)
            except RuntimeError:  # the loop closed: the worker is gone
                return
            if isinstance(got, ChildFailed):
                return

    def start(self) -> None:
        """Start taking answers (on the worker's event loop)."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
            self._answers, self._room = asyncio.Queue(), asyncio.Event()
            self._room.set()
            threading.Thread(target=self._read, name="fabric-rca-detect-reader", daemon=True).start()

    # ---- requests
    def stage(self, key: str, source: str, local: DetectStage) -> ChildStage:
        """Move a stage made here (new, restored or rebuilt) into the child."""
        stage = self.stages[key] = ChildStage(self, key)
        stage.figures = figures(local)
        self.send("load", stage, (source, checkpoint.encode(local.state())))
        return stage

    def new(self, key: str, source: str) -> ChildStage:
        """A new stage, made in the child (no snapshot to restore)."""
        stage = self.stages[key] = ChildStage(self, key)
        self.send("new", stage, source)
        return stage

    def send(self, op: str, stage: ChildStage, arg, then: Callable | None = None, size: int = 0) -> None:
        self._check()
        self._pending.append(_Pending(op, stage, then, size))
        self._out.put((op, stage.key, arg))

    async def feed(self, stage: ChildStage, value: bytes, then: Callable) -> None:
        """Send one message; `then(answer)` is awaited in order when its answer comes.
        Returns at once while there is room for it."""
        while self.in_flight >= MAX_IN_FLIGHT or (self.in_flight and self.in_flight_bytes >= MAX_IN_FLIGHT_BYTES):
            self._room.clear()
            await self._room.wait()
            self._check()
        self.in_flight += 1
        self.in_flight_bytes += len(value)
        stage.sent_since_state += 1
        self.send("feed", stage, value, then, len(value))

    def request(self, op: str, stage: ChildStage, arg, then: Callable) -> Awaitable[None]:
        self.send(op, stage, arg, then)
        done = self._pending[-1].done = self._loop.create_future()
        done.add_done_callback(lambda f: f.cancelled() or f.exception())  # (a failure is raised by `run`)
        return done

    def _check(self) -> None:
        if self.failure is not None:
            raise ChildFailed(str(self.failure)) from self.failure

    # ---- answers
    async def run(self) -> None:
        """Take the answers in order, for as long as the worker runs."""
        self.start()
        while True:
            got = await self._answers.get()
            try:
                await self._take(got)
            except BaseException as exc:
                self.failure = exc
                for p in self._pending:
                    if p.done is not None and not p.done.done():
                        p.done.set_exception(ChildFailed(str(exc)))
                self._room.set()
                raise

    async def _take(self, got) -> None:
        if isinstance(got, ChildFailed):
            raise got
        answers, reported = got
        for answer in answers:
            p = self._pending.popleft()
            if isinstance(answer, ChildFailed):
                raise answer
            if p.op == "feed":
                self.in_flight -= 1
                self.in_flight_bytes -= p.size
                if self.in_flight < MAX_IN_FLIGHT and self.in_flight_bytes < MAX_IN_FLIGHT_BYTES:
                    self._room.set()
                await p.then(answer)
            elif p.then is not None:
                p.then(answer)
            if p.done is not None:
                p.done.set_result(None)
        for key, fig in reported.items():
            stage = self.stages.get(key)
            if stage is not None:
                stage.figures = fig

    def close(self) -> None:
        """End the child (it ends by itself too when this process does: its pipe closes)."""
        self._closed = True
        self._out.put(None)
        try:
            self._conn.close()
        except OSError:
            pass
        self.process.join(timeout=2)
        if self.process.is_alive():
            self.process.kill()
