"""Checkpoints of the stages in a compacted topic: the latest snapshot per stage key.

A snapshot carries the offset of the last input message it covers. A restarted (or
newly assigned) stage restores it, skips input at or below that offset, and acks input
only once a snapshot that covers it has been delivered: so nothing acked is ever lost,
and what is read twice is recognised downstream as a duplicate.
"""
from __future__ import annotations

import struct

from streams.security import PLAINTEXT, KafkaSecurity

_HEADER = struct.Struct(">q")


def encode(offset: int, blob: bytes) -> bytes:
    return _HEADER.pack(offset) + blob


def decode(value: bytes) -> tuple[int, bytes]:
    (offset,) = _HEADER.unpack_from(value)
    return offset, value[_HEADER.size:]


def read_latest(*, bootstrap: str, topic: str, timeout_s: float = 30.0,
                security: KafkaSecurity | None = None) -> dict[str, tuple[int, bytes]]:
    """key -> (offset, snapshot) of the newest record per key, reading the topic to its end."""
    import time

    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                             client_id="fabric-rca-restore", request_timeout_ms=int(timeout_s * 1000),
                             **(security or PLAINTEXT).kafka_python())
    try:
        parts = consumer.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        if not tps:
            return {}
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        end = consumer.end_offsets(tps)
        latest: dict[str, tuple[int, bytes]] = {}
        deadline = time.monotonic() + timeout_s
        while any(consumer.position(tp) < end[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading checkpoints from {topic} at {bootstrap} took over {timeout_s} s")
            for records in consumer.poll(timeout_ms=500).values():
                for r in records:
                    if r.key is not None and r.value:
                        latest[r.key.decode()] = decode(r.value)
        return latest
    finally:
        consumer.close()
