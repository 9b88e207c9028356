"""Incident changes through store outages (`streams.store.StoreWriter`), without a store."""
from __future__ import annotations

import asyncio

from streams.store import StoreWriter


class Store:
    def __init__(self):
        self.rows: list[dict] = []
        self.down = False

    def write(self, changes: list[dict]) -> None:
        if self.down:
            raise ConnectionError("connection refused")
        self.rows.extend(changes)


def test_changes_refused_by_the_store_are_kept_and_written_in_order_when_it_returns():
    store = Store()

    async def go():
        w = StoreWriter(store.write, first_wait_s=0.01, max_wait_s=0.02)
        await w.write([{"id": 1}])
        store.down = True
        await w.write([{"id": 2}])  # returns: queued, not raised
        await w.write([{"id": 3}])
        assert not w.available and not w.caught_up() and len(w.pending) == 2
        await asyncio.sleep(0.1)
        assert store.rows == [{"id": 1}]
        store.down = False
        await w.settle()
        assert w.available and w.caught_up()

    asyncio.run(go())
    assert store.rows == [{"id": 1}, {"id": 2}, {"id": 3}]


def test_a_full_queue_holds_the_correlation_back_until_the_store_returns():
    store = Store()
    store.down = True

    async def go():
        w = StoreWriter(store.write, max_pending=2, first_wait_s=0.01, max_wait_s=0.01)
        await w.write([{"id": 1}, {"id": 2}])
        waiting = asyncio.ensure_future(w.wait_for_room())
        await asyncio.sleep(0.05)
        assert not waiting.done()
        store.down = False
        await asyncio.wait_for(waiting, 1)

    asyncio.run(go())
    assert [r["id"] for r in store.rows] == [1, 2]


def test_a_worker_starts_while_the_store_is_down_and_connects_at_a_later_write(tmp_path):
    import pytest

    from streams.store import LazySink

    down = LazySink("postgresql+psycopg://postgres@127.0.0.1:1/nothing")  # nothing listens there
    assert down.written == 0
    with pytest.raises(Exception):
        down.write([{"id": "x"}])  # refused: StoreWriter keeps it and retries
    LazySink(f"sqlite:///{tmp_path}/store.db", topology={"devices": []})
    assert (tmp_path / "store.db").exists()  # connected (schema, topology) at start
