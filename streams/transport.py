"""faust's aiokafka transport, with two costs of a busy worker taken out.

Both were found by profiling one worker reading the benchmark's telemetry
(`bench/kafka_throughput.py`); neither changes what is delivered, or when it is acked.

- Fetch wait. faust hard-codes aiokafka's `fetch_max_wait_ms` at 1.5 s. A worker reads
  busy partitions (telemetry) and quiet ones (jobs, the symptoms it writes itself)
  through one connection, and aiokafka sends the next fetch to a broker only when the
  last one has returned. When fetched telemetry waits over 100 ms to be taken, aiokafka
  fetches the quiet partitions alone, and the broker held that fetch until it gave up
  waiting: the telemetry stalled for about a second every two seconds, half of the
  worker's time. The wait is now FETCH_MAX_WAIT_MS.
- Fetch of the quiet partitions alone. aiokafka holds fetched records until they are
  taken, and once they have waited its `prefetch_backoff` (0.1 s) it fetches the other
  partitions without them. A busy worker takes about that long over a fetch of telemetry
  (1 MB a partition, about 5,000 records), so many fetches of telemetry were followed by
  one of the quiet partitions (jobs, symptoms) that the broker holds for up to
  FETCH_MAX_WAIT_MS, and the next fetch of telemetry, sent only once that one had
  returned, waited for it (traced on the benchmark: 230-350 of a run's 480-780 fetches
  were of the quiet partitions alone; whether a batch takes more or less than 0.1 s
  makes this come and go with small changes of the engine's speed). The backoff is now
  PREFETCH_BACKOFF_S: while telemetry waits to be taken nothing else is fetched, and the
  next fetch, of every partition, goes out as soon as it is taken. Symptoms and jobs come
  with it (so at most that much later while the worker lags); a partition whose fetch
  failed is retried after that long too.
- Hand-off of each message. faust's consumer passes every message to the streams as
  `wait_first(callback(message), suspend_flow.wait())`, and mode's `wait_first` runs each
  of those, and the service's stopped and crashed events, as tasks: four tasks and their
  cancellation per message, about a tenth of the worker's time. The callback (decode,
  put on the stream's queue) almost never has to wait, so `wait_first` first runs it
  directly; only when it does have to wait (a full queue, flow stopped for a rebalance)
  does the rest of it go through mode's `wait_first` as before.
- Iteration of an agent's stream. faust's stream iterator gives each event a turn of the
  event loop of its own (`await asyncio.sleep(0)` before every event), and two sensor calls
  (faust's monitor statistics, which the worker does not serve). Each turn is an epoll call
  that lets the GIL go to the consumer's and the store's threads, and the detect agent
  takes about 20,000 events a run (py-spy: the stream iterator and its turns were a sixth
  of the faust-raw consumer's time and 5-8 % of a worker's). `manual_events` takes the
  events from the same queue, with the same checks per event as faust's iterator (flow
  control active and the message of the consumer's current generation, else skipped
  unacked as faust skips it; tracked as unacked; the stream's processors run, as faust's
  test_context installs one), and lets the loop run every
  YIELD_EVERY events or when the queue is empty. Acks stay manual (the stage's snapshot).
  It ends, as faust's iterator does, when faust cancels the agent's actor on stop
  (StopAsyncIteration thrown into the queue).

This module is the one place the workers reach into faust's, mode's and aiokafka's
private internals: faust's `Consumer._new_consumer_thread` and
`AIOKafkaConsumerThread._create_worker_consumer` and `on_start`, mode's `Service._stopped` /
`Service._crashed` events and its `wait_first`/`WaitResults`, faust's stream iteration
(a stream's `channel.queue` and its `_errors`, `Message.tracked`/`generation_id`,
`Consumer._unacked_messages`, `app.topics._acking_topics`, `app.flow_control`), aiokafka's
`AIOKafkaConsumer._fetch_max_wait_ms` and `_fetcher`, `Fetcher._prefetch_backoff`.
CHECKED holds the versions they were checked against; importing this module (a worker's start) under any other raises
`engine.versions.UnsupportedVersion` with the module to re-check.
"""
from __future__ import annotations

import asyncio
from typing import Any, Coroutine

from engine.versions import require

CHECKED = (  # distribution, >= low, < below (checked on faust-streaming 0.15.3, mode-streaming 0.7.1, aiokafka 0.14.0)
    ("faust-streaming", "0.15.3", "0.16"),
    ("mode-streaming", "0.7.1", "0.8"),
    ("aiokafka", "0.14.0", "0.15"),
)


def check_versions() -> None:
    for distribution, low, below in CHECKED:
        require(distribution, low, below, where="streams/transport.py")


check_versions()

from faust.transport.drivers import aiokafka as driver  # noqa: E402  (after the guard)
from faust.exceptions import Skip  # noqa: E402
from mode.services import WaitResults  # noqa: E402
from mode.utils.futures import maybe_async  # noqa: E402

FETCH_MAX_WAIT_MS = 100
PREFETCH_BACKOFF_S = 1.0
YIELD_EVERY = 100  # events an agent takes before the loop runs other tasks (faust's consumer: 100 messages)


async def manual_events(stream):
    """The events of an agent's `stream`, acks manual (as `stream.noack().events()`), in
    order, each checked as faust's iterator checks it; see the module's docstring."""
    await stream.maybe_start()
    app = stream.app
    queue = stream.channel.queue
    errors, empty, get, get_nowait = queue._errors, queue.empty, queue.get, queue.get_nowait
    acking = app.topics._acking_topics
    track = app.consumer._unacked_messages.add
    message_in = app.sensors.on_message_in
    flow_active = app.flow_control.is_active
    processors = stream._processors  # (none in a worker; faust's test_context adds one)
    taken = 0
    try:
        while not stream.should_stop:
            if taken >= YIELD_EVERY:  # other tasks' turn (the queue may be cleared meanwhile: look again)
                taken = 0
                await asyncio.sleep(0)
                continue
            if errors:
                raise errors.popleft()
            if empty():
                taken = 0
                event = await get()
            else:
                taken += 1
                event = get_nowait()
            message = event.message
            if not flow_active() or message.generation_id != app.consumer_generation_id:
                continue  # skipped, not acked, as faust's (compiled) iterator skips it: a rebalance is under way
            if message.topic in acking and not message.tracked:
                message.tracked = True
                track(message)
                message_in(message.tp, message.offset, message)
            if processors:
                try:
                    value = event.value
                    for processor in processors:
                        value = await maybe_async(processor(value))
                except Skip:
                    continue
            yield event
    except StopAsyncIteration:
        # The actor is cancelled: faust's Actor.cancel throws this into the queue on a
        # worker's stop. Raised out of an async generator it would be a RuntimeError that
        # crashes the agent (and held the worker's SIGTERM shutdown until it was killed);
        # faust's iterator ends the iteration instead, and so does this.
        return
    finally:
        stream._channel_stop_iteration(stream.channel)


class _Resume:
    """Awaitable that carries on a coroutine which has already run to its first wait
    (`pending`, the future it yielded): so it can be handed to `asyncio.ensure_future`."""

    def __init__(self, coro: Coroutine, pending: Any):
        self.coro, self.pending = coro, pending

    def __await__(self):
        coro, out = self.coro, self.pending
        while True:
            try:
                sent = yield out
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # noqa: BLE001 - thrown in (cancellation): the coroutine's to handle
                try:
                    out = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    out = coro.send(sent)
                except StopIteration as stop:
                    return stop.value


class Consumer(driver.Consumer):
    def _new_consumer_thread(self) -> "ConsumerThread":
        return ConsumerThread(self, loop=self.loop, beacon=self.beacon)

    async def wait_first(self, *coros, timeout=None) -> WaitResults:
        first = coros[0] if coros else None
        if (timeout is not None or not asyncio.iscoroutine(first)
                or self._stopped.is_set() or self._crashed.is_set()):
            return await super().wait_first(*coros, timeout=timeout)
        try:
            pending = first.send(None)
        except StopIteration as done:  # finished without waiting: what mode's wait_first returns
            for other in coros[1:]:
                if asyncio.iscoroutine(other):
                    other.close()  # never started
            return WaitResults([first], [done.value], False)
        except BaseException:
            for other in coros[1:]:
                if asyncio.iscoroutine(other):
                    other.close()
            raise
        return await super().wait_first(_Resume(first, pending), *coros[1:])


class ConsumerThread(driver.AIOKafkaConsumerThread):
    def _create_worker_consumer(self, transport):
        consumer = super()._create_worker_consumer(transport)
        consumer._fetch_max_wait_ms = FETCH_MAX_WAIT_MS  # read by its fetcher at start()
        return consumer

    async def on_start(self) -> None:
        await super().on_start()
        # The fetcher exists from start(); it reads the backoff as each fetch returns.
        self._consumer._fetcher._prefetch_backoff = PREFETCH_BACKOFF_S


class Transport(driver.Transport):
    Consumer = Consumer
