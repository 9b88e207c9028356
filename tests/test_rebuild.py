"""Rebuilding a stage from its partition's input (streams/rebuild.py) without a broker:
bounds, what is fed, what a failing read leaves, and the hand-off from `Checkpoints`
(a refused snapshot: the fresh stage is rebuilt before it is held). The broker path is
tests/test_kafka_worker_faults.py (a refused checkpoint mid-stream)."""
from __future__ import annotations

import asyncio
import logging

from streams.rebuild import Rebuilder


class Partition:
    """An `InputReader` over an in-memory partition whose first `deleted` offsets the
    broker no longer holds; `fail_at` raises from the read that reaches that offset."""

    def __init__(self, values: list[bytes], *, deleted: int = 0, batch: int = 3, fail_at: int | None = None):
        self.values, self.deleted, self.batch, self.fail_at = values, deleted, batch, fail_at
        self.closed = False

    def bind(self, stop: int, most: int) -> "Partition":
        self.stop, self.pos = stop, max(self.deleted, stop - most)
        return self

    def open(self) -> tuple[int, int]:
        return self.deleted, self.pos

    def read(self) -> list[tuple[int, bytes]]:
        end = min(self.stop, self.pos + self.batch)
        if self.fail_at is not None and self.pos <= self.fail_at < end:
            raise ConnectionError("broker away")
        out = [(o, self.values[o]) for o in range(self.pos, end)]
        self.pos = end
        return out

    def close(self) -> None:
        self.closed = True


def _run(part: Partition, stop: int, **kw) -> tuple[list[bytes], Rebuilder, int]:
    fed: list[bytes] = []
    rebuilder = Rebuilder(lambda topic, partition, stop_, most: part.bind(stop_, most), **kw)
    n = asyncio.run(rebuilder.run("detect:t:0", fed, topic="t", partition=0, stop=stop,
                                  feed=lambda stage, value: stage.append(value)))
    assert part.closed == hasattr(part, "stop")  # (a reader opened is closed; none opened for nothing)
    return fed, rebuilder, n


VALUES = [b"m%02d" % i for i in range(20)]


def test_the_input_before_the_committed_offset_is_fed_in_order_from_the_earliest_retained():
    fed, rebuilder, n = _run(Partition(VALUES, deleted=4), 15)
    assert fed == VALUES[4:15] and n == rebuilder.records == 11 and rebuilder.bounded == 0


def test_nothing_is_read_for_a_partition_read_from_its_start():
    fed, rebuilder, n = _run(Partition(VALUES), 0)
    assert fed == [] and n == rebuilder.records == 0


def test_the_record_bound_keeps_the_latest_messages(caplog):
    with caplog.at_level(logging.WARNING, logger="fabric_rca.worker"):
        fed, rebuilder, _ = _run(Partition(VALUES), 15, max_records=5)
    assert fed == VALUES[10:15] and rebuilder.bounded == 1
    assert any("re-reading the last 5 of its 15 messages" in r.getMessage() for r in caplog.records)


def test_the_byte_bound_stops_the_re_read_and_says_where(caplog):
    with caplog.at_level(logging.WARNING, logger="fabric_rca.worker"):
        fed, rebuilder, n = _run(Partition(VALUES), 15, max_bytes=3 * 4 + 1)
    assert fed == VALUES[:4] and n == rebuilder.records == 4 and rebuilder.bounded == 1
    assert any("stopped at offset 4" in r.getMessage() and "--rebuild-max-bytes" in r.getMessage()
               for r in caplog.records)


def test_a_failing_read_ends_the_re_read_where_it_got_to(caplog):
    with caplog.at_level(logging.WARNING, logger="fabric_rca.worker"):
        fed, rebuilder, n = _run(Partition(VALUES, batch=4, fail_at=9), 15)
    assert fed == VALUES[:8] and n == 8
    assert any("ConnectionError: broker away" in r.getMessage() for r in caplog.records)


def test_no_re_read_when_the_bound_is_zero():
    fed, rebuilder, _ = _run(Partition(VALUES), 15, max_records=0)
    assert fed == [] and rebuilder.records == 0


def test_a_refused_checkpoint_is_counted_never_used_and_the_stage_rebuilt_before_it_is_held(caplog):
    """A snapshot the stage refuses (ValueError: engine.checkpoint's CheckpointError) is
    logged with its key, counted, and a fresh stage is given to `rebuild` (its input
    before the committed offset) before it is held, then read from the committed offset."""
    from streams.checkpoints import Checkpoints

    class Stage:
        def __init__(self):
            self.state = "fresh"

        def restore(self, blob):
            self.state = "half-restored"
            raise ValueError("not a fabric-rca snapshot: " + "x" * 5000)

    class Event:
        def __init__(self, offset):
            self.message = type("M", (), {"offset": offset})()

    rebuilt = []

    async def rebuild(stage):
        assert "detect:t:0" not in cp.stages  # (no timer saves or applies a stage being rebuilt)
        rebuilt.append(stage.state)
        stage.state = "rebuilt"

    async def scenario():
        stage = await cp.stage("detect:t:0", Stage, rebuild)
        assert stage.state == "rebuilt" and rebuilt == ["fresh"] and cp.refused == 1 and cp.restored == 0
        assert cp.covered["detect:t:0"] == -1
        assert not cp.seen("detect:t:0", Event(7))  # read from here, by the rebuilt stage

    cp = Checkpoints(app=None, settings=None, topic=None, read=lambda: {"detect:t:0": (41, b"garbage")})
    with caplog.at_level("WARNING", logger="fabric_rca.worker"):
        asyncio.run(scenario())
    [warning] = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]  # bounded
    assert "detect:t:0" in warning and len(warning) < 600
