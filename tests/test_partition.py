"""Keys go to the partition Kafka's own clients pick: pinned values, and kafka-python's
DefaultPartitioner on any key."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.partitioner.default import DefaultPartitioner

from streams.publish import key_partition

# (key, partitions) -> partition, computed by kafka-python 3.0's DefaultPartitioner; the
# 1000-partition ones are also the Java client's murmur2 test vectors
PINNED = [
    (b"", 1000, 681), (b"a", 1000, 524), (b"ab", 1000, 434), (b"abc", 1000, 107),
    (b"123456789", 1000, 566), (b"\x00 ", 1000, 742),
    (b"leaf-01", 4, 3), (b"host-0001", 4, 3), (b"job-42", 4, 1), (b"a", 4, 0),
    (b"leaf-01", 12, 11), (b"spine-3", 12, 3), (b"", 12, 9),
]


@pytest.mark.parametrize("key,n,want", PINNED)
def test_pinned_key_partitions(key, n, want):
    assert key_partition(key, range(n)) == want


class _Cluster:
    """The three ClusterMetadata reads DefaultPartitioner makes, for one topic."""

    def __init__(self, partitions):
        self._p = set(partitions)

    def topics(self):
        return {"t"}

    def partitions_for_topic(self, topic):
        return self._p

    def available_partitions_for_topic(self, topic):
        return self._p


@given(st.binary(max_size=64), st.sets(st.integers(0, 200), min_size=1, max_size=40))
def test_same_as_default_partitioner(key, partitions):
    want = DefaultPartitioner().partition("t", key, key, None, None, _Cluster(partitions))
    assert key_partition(key, partitions) == want
    assert key_partition(key, list(reversed(sorted(partitions)))) == want  # order of the set does not matter
