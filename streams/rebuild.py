"""A stage whose checkpoint was refused, rebuilt from its partition's own input.

The fresh stage re-reads its partition from the earliest offset the broker still holds
(or the last `max_records` messages) up to the committed offset, where faust's consumer
starts it, through a plain kafka-python consumer of its own (no group, no commits).
Faust's consumer is never sought: seeking it from the event loop while its fetcher runs
crashed aiokafka's fetcher about one run in three.

The records go through the agent's own per-message function, so the rebuilt stage is
the one a worker that never lost its checkpoint holds. Their output (stage events, dead
letters, incident changes) is dropped: the previous owner published it before it
committed the offset (docs/design.md, "Checkpoints").
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Callable, Protocol

from streams.security import PLAINTEXT, KafkaSecurity

log = logging.getLogger("fabric_rca.worker")


class InputReader(Protocol):
    """The messages of one partition below `stop`, in offset order (blocking calls)."""

    def open(self) -> tuple[int, int]:
        """(earliest retained offset, offset the re-read starts at)."""

    def read(self) -> list[tuple[int, bytes | None]]:
        """The next (offset, value) batch below `stop`; [] once there."""

    def close(self) -> None: ...


class PartitionReader:
    """`InputReader` on the broker: a consumer without a group, assigned one partition."""

    def __init__(self, *, bootstrap: str, topic: str, partition: int, stop: int, max_records: int,
                 security: KafkaSecurity | None = None, timeout_s: float = 30.0):
        self.bootstrap, self.topic, self.partition, self.stop = bootstrap, topic, partition, stop
        self.max_records, self.security, self.timeout_s = max_records, security or PLAINTEXT, timeout_s
        self._consumer = None
        self._tp = None

    def open(self) -> tuple[int, int]:
        from kafka import KafkaConsumer, TopicPartition

        self._consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False, group_id=None,
                                       client_id="fabric-rca-rebuild", request_timeout_ms=int(self.timeout_s * 1000),
                                       **self.security.kafka_python())
        self._tp = tp = TopicPartition(self.topic, self.partition)
        first = self._consumer.beginning_offsets([tp])[tp]
        start = max(first, self.stop - self.max_records)
        self._consumer.assign([tp])
        self._consumer.seek(tp, start)
        return first, start

    def read(self) -> list[tuple[int, bytes | None]]:
        consumer, tp = self._consumer, self._tp
        deadline = time.monotonic() + self.timeout_s
        while consumer.position(tp) < self.stop:
            batch = consumer.poll(timeout_ms=500).get(tp, [])
            if batch:
                return [(r.offset, r.value) for r in batch if r.offset < self.stop]
            if time.monotonic() > deadline:
                raise TimeoutError(f"no message of {self.topic}:{self.partition} below offset {self.stop} "
                                   f"came from {self.bootstrap} in {self.timeout_s:.0f} s")
        return []

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


@dataclass
class Rebuilder:
    """Re-reads the input of stages whose checkpoint was refused; counts what it read."""

    open_reader: Callable[[str, int, int, int], InputReader]  # (topic, partition, stop, max_records)
    max_records: int = 1_000_000  # messages re-read per stage at most (the latest ones)
    max_bytes: int = 1 << 30  # bytes re-read per stage at most (then the re-read stops there)
    progress_every_s: float = 10.0
    records: int = 0  # messages re-read, every stage (fabric_rca_state_rebuilt_records_total)
    bounded: int = 0  # re-reads cut by a bound

    async def run(self, key: str, stage, *, topic: str, partition: int, stop: int,
                  feed: Callable[[object, bytes], None]) -> int:
        """Feed `stage` the messages of `topic:partition` below `stop` through `feed`;
        the number fed. A failing read (broker away) ends the re-read where it got to:
        the stage goes on from there, logged."""
        if stop <= 0 or self.max_records <= 0:
            return 0
        loop = asyncio.get_running_loop()
        reader = self.open_reader(topic, partition, stop, self.max_records)
        fed = size = 0
        offset = -1
        try:
            first, start = await loop.run_in_executor(None, reader.open)
            if start > first:
                self.bounded += 1
                log.warning("rebuilding %s: re-reading the last %d of its %d messages (offsets %d..%d; "
                            "the bound is --rebuild-max-records)", key, stop - start, stop - first, start, stop - 1)
            else:
                log.warning("rebuilding %s from its partition's earliest offset %d up to %d, its committed input",
                            key, first, stop)
            said = time.monotonic()
            while batch := await loop.run_in_executor(None, reader.read):
                for offset, value in batch:
                    size += len(value or b"")
                    if size > self.max_bytes:
                        self.bounded += 1
                        log.warning("rebuilding %s: stopped at offset %d after %d bytes (--rebuild-max-bytes); "
                                    "offsets %d..%d are not re-read", key, offset, size, offset, stop - 1)
                        return fed
                    if value is not None:
                        feed(stage, value)
                    fed += 1
                    self.records += 1
                if time.monotonic() - said >= self.progress_every_s:
                    said = time.monotonic()
                    log.warning("rebuilding %s: %d of %d messages re-read (offset %d)", key, fed, stop - start, offset)
                await asyncio.sleep(0)  # (the rest of the worker goes on between batches)
        except Exception as exc:  # noqa: BLE001 - broker away or gone: the stage goes on from what it read
            log.warning("rebuilding %s stopped at offset %d (%s: %s); going on from there", key, offset,
                        type(exc).__name__, str(exc)[:200])
        finally:
            await loop.run_in_executor(None, reader.close)
        log.warning("rebuilt %s from %d messages (%d bytes) below offset %d", key, fed, size, stop)
        return fed


def broker_rebuilder(*, bootstrap: str, security: KafkaSecurity | None, max_records: int,
                     max_bytes: int) -> Rebuilder:
    """A `Rebuilder` that reads the partitions on the worker's broker."""
    return Rebuilder(lambda topic, partition, stop, most: PartitionReader(
        bootstrap=bootstrap, topic=topic, partition=partition, stop=stop, max_records=most, security=security),
        max_records=max_records, max_bytes=max_bytes)
