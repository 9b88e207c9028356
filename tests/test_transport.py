"""The worker's consumer (`streams.transport`): its `wait_first` runs the message
callback directly, and must still behave as mode's `wait_first` when the callback waits,
fails, or is overtaken by the other event (flow suspended for a rebalance)."""
from __future__ import annotations

import asyncio
import warnings

import pytest

from compose import EngineSettings
from streams.app import build_app
from streams.settings import WorkerSettings
from streams.transport import FETCH_MAX_WAIT_MS, PREFETCH_BACKOFF_S, Consumer, Transport
from testkit.ports import free_port as _free_port


@pytest.fixture(scope="module")
def topology(tmp_path_factory):
    import sim

    out = tmp_path_factory.mktemp("fabric")
    sim.simulate(out=out, scenario="pfc_storm", seed=2, duration=20)
    return out / "topology.dot"


def consumer_of(tmp_path, topology, bootstrap: str = "127.0.0.1:1") -> Consumer:
    settings = WorkerSettings(bootstrap=bootstrap, db_url=f"sqlite:///{tmp_path}/a.db",
                              engine=EngineSettings(topology=topology), web_port=_free_port(), data_dir=tmp_path)
    app = build_app(settings, read_snapshots=dict)
    assert isinstance(app.transport, Transport)
    consumer = app.consumer
    assert isinstance(consumer, Consumer)
    return consumer


def run(tmp_path, topology, test, bootstrap: str = "127.0.0.1:1"):
    async def go():
        return await test(consumer_of(tmp_path, topology, bootstrap))

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # "coroutine ... was never awaited"
        return asyncio.run(go())


def test_a_callback_that_does_not_wait_is_run_directly(tmp_path, topology):
    async def callback():
        return "delivered"

    async def test(consumer):
        suspend = asyncio.Event()
        results = await consumer.wait_first(callback(), suspend.wait())
        assert (results.results, results.stopped) == (["delivered"], False)

    run(tmp_path, topology, test)


def test_a_callback_that_waits_finishes_as_a_task(tmp_path, topology):
    steps = []

    async def callback():
        steps.append("before")
        await asyncio.sleep(0.01)
        steps.append("after")
        return "delivered"

    async def test(consumer):
        suspend = asyncio.Event()
        results = await consumer.wait_first(callback(), suspend.wait())
        assert results.results == ["delivered"] and not results.stopped
        assert steps == ["before", "after"]

    run(tmp_path, topology, test)


def test_a_waiting_callback_is_cancelled_when_flow_is_suspended(tmp_path, topology):
    seen = []

    async def callback(gate):
        try:
            await gate.wait()  # a full queue that never drains
            seen.append("delivered")
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    async def test(consumer):
        gate, suspend = asyncio.Event(), asyncio.Event()
        asyncio.get_running_loop().call_later(0.01, suspend.set)
        results = await consumer.wait_first(callback(gate), suspend.wait())
        await asyncio.sleep(0)  # let the cancellation run
        assert results.results == [True] and not results.stopped  # only the suspension finished
        assert seen == ["cancelled"]

    run(tmp_path, topology, test)


@pytest.mark.parametrize("waits", [False, True])
def test_a_failing_callback_raises(tmp_path, topology, waits):
    async def callback():
        if waits:
            await asyncio.sleep(0.01)
        raise ValueError("bad message")

    async def test(consumer):
        with pytest.raises(ValueError, match="bad message"):
            await consumer.wait_first(callback(), asyncio.Event().wait())

    run(tmp_path, topology, test)


def test_the_consumer_waits_at_most_fetch_max_wait_for_a_fetch(tmp_path, topology):
    async def test(consumer):
        client = consumer._thread._create_worker_consumer(consumer.transport)  # what the thread starts
        try:
            assert client._fetch_max_wait_ms == FETCH_MAX_WAIT_MS
        finally:
            await client.stop()

    run(tmp_path, topology, test)


def test_fetched_records_hold_back_other_fetches_for_the_prefetch_backoff(tmp_path, topology, kafka_bootstrap):
    """The started consumer's fetcher waits PREFETCH_BACKOFF_S (not aiokafka's 0.1 s) for
    fetched records to be taken before it fetches the other partitions without them."""
    async def test(consumer):
        thread = consumer._thread
        await thread.on_start()  # what the consumer thread runs: creates and starts the client
        try:
            assert thread._consumer._fetcher._prefetch_backoff == PREFETCH_BACKOFF_S > 0.1
        finally:
            await thread._consumer.stop()

    run(tmp_path, topology, test, bootstrap=kafka_bootstrap)


# ---------------------------------------------------------------- manual_events


def _events_through(app, iterate, generations: list[int], topic: str) -> tuple[list[int], dict[int, tuple]]:
    """Messages of `generations` (one each, offsets 0..) through a fresh stream of `topic`
    read with `iterate(stream)`: the offsets it yields, and each message's (tracked,
    acked, unacked) state once the last yield has been taken."""
    from faust.types.tuples import TP as FaustTP
    from faust.types.tuples import ConsumerMessage

    async def go():
        stream = app.stream(app.topic(topic, key_type=bytes, value_type=bytes, key_serializer="raw",
                                      value_serializer="raw"))
        app.topics._acking_topics.add(topic)
        tp = FaustTP(topic, 0)
        messages = [ConsumerMessage(topic, 0, i, 0.0, 0, [], b"k", b"v%d" % i, None, tp=tp, generation_id=g)
                    for i, g in enumerate(generations)]
        for m in messages:
            stream.channel.queue.put_nowait(await stream.channel.decode(m))
        expected = sum(g == app.consumer_generation_id for g in generations)
        yielded = []

        async def take():
            async for event in iterate(stream):
                yielded.append(event.message.offset)
                if len(yielded) == expected:
                    break

        if expected:
            await asyncio.wait_for(take(), timeout=10)
        unacked = app.consumer.unacked
        return yielded, {m.offset: (m.tracked, m.acked, m in unacked) for m in messages}

    return go()


@pytest.mark.parametrize("generations", [[0, 0, 0], [0, 1, 0, 0], [1, 1, 0]])
def test_manual_events_yields_and_tracks_as_fausts_own_iterator(tmp_path, topology, generations):
    """Same events, in the same order, tracked as unacked, none acked except those of
    another generation (skipped, as faust skips them during a rebalance)."""
    from streams.transport import manual_events

    async def test(consumer):
        app = consumer.app
        app.consumer_generation_id = 0
        app.flow_control.resume()  # as the consumer does once partitions are assigned
        theirs = await _events_through(app, lambda s: s.noack().events(), generations, "faust-own")
        ours = await _events_through(app, manual_events, generations, "manual")
        assert ours == theirs
        assert ours[0] == [i for i, g in enumerate(generations) if g == 0]

    run(tmp_path, topology, test)


def test_manual_events_lets_other_tasks_run_every_yield_every_events(tmp_path, topology):
    from streams.transport import YIELD_EVERY, manual_events

    async def test(consumer):
        app = consumer.app
        app.flow_control.resume()
        turns, seen_at = [0], []

        async def other():
            while True:
                turns[0] += 1
                await asyncio.sleep(0)

        task = asyncio.ensure_future(other())
        await asyncio.sleep(0)
        try:
            original = manual_events

            def spy(stream):
                async def gen():
                    async for event in original(stream):
                        seen_at.append(turns[0])
                        yield event
                return gen()

            n = 3 * YIELD_EVERY
            yielded, _ = await _events_through(app, spy, [app.consumer_generation_id] * n, "fair")
        finally:
            task.cancel()
        assert len(yielded) == n
        # the other task ran about once per YIELD_EVERY events, not once per event nor never
        assert 2 <= seen_at[-1] - seen_at[0] <= 4

    run(tmp_path, topology, test)


def test_manual_events_ends_when_the_actor_is_cancelled_as_fausts_iterator_does(tmp_path, topology):
    """A worker's stop cancels each agent's actor: faust throws StopAsyncIteration into the
    stream's queue (Actor.cancel). Its own iterator ends there; manual_events must too, not
    let it out of the generator (a RuntimeError: the agent crashed, and the worker's SIGTERM
    shutdown hung until it was killed)."""
    from streams.transport import manual_events

    async def test(consumer):
        app = consumer.app
        app.flow_control.resume()
        ended = {}
        for name, iterate in (("faust-own", lambda s: s.noack().events()), ("manual", manual_events)):
            stream = app.stream(app.topic(name, key_type=bytes, value_type=bytes, key_serializer="raw",
                                          value_serializer="raw"))

            async def take():
                async for _ in iterate(stream):
                    pass
                return "ended"

            task = asyncio.ensure_future(take())
            await asyncio.sleep(0.05)  # waiting on the empty queue
            stream.channel._throw(StopAsyncIteration())  # what faust's Actor.cancel does
            ended[name] = await asyncio.wait_for(task, timeout=10)
        assert ended == {"faust-own": "ended", "manual": "ended"}

    run(tmp_path, topology, test)
