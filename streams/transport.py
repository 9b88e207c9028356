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

This module is the one place the workers reach into faust's, mode's and aiokafka's
private internals: faust's `Consumer._new_consumer_thread` and
`AIOKafkaConsumerThread._create_worker_consumer` and `on_start`, mode's `Service._stopped` /
`Service._crashed` events and its `wait_first`/`WaitResults`, aiokafka's
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
from mode.services import WaitResults  # noqa: E402

FETCH_MAX_WAIT_MS = 100
PREFETCH_BACKOFF_S = 1.0


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
