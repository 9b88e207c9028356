"""The compiled kernel of stage 2 (`engine.features_compile`) against its plain reference
(`engine.features_reference`): the same results record by record, whatever a series sends."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.features import FeatureExtractor, plan
from engine.features_reference import reference_compute, reference_features
from engine.types import Metric
from test_features import catalogue

T0 = 1764400000
gauge_values = st.one_of(st.none(), st.integers(0, 3 * 10**6), st.floats(0, 2e7), st.booleans(),
                         st.sampled_from(["up", "down", "stormed", "operational", "7"]))

WRAP = 2**64 - 1  # a 64-bit counter about to wrap: its next value is small (a decrease: a reset)
sparse_values = st.one_of(st.none(), st.none(), st.integers(0, 2**70), st.integers(0, 3), st.just(WRAP),
                          st.integers(WRAP - 10, WRAP), st.floats(0, 1e6), st.booleans(), st.just("12"))


@pytest.mark.parametrize("measurement,always", [("switch_port", True), ("switch_port", False), ("nic_port", True),
                                                ("nic_port", False), ("storage", True), ("switch_queue", False)])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_compiled_kernel_equals_its_reference_record_by_record(measurement, always, data):
    """Invariant kernel_is_reference: over a series' life (counters that come and go,
    values that are not numbers, resets, 64-bit wraps, unchanged small ints, equal ints,
    gaps of any length), the compiled compute and `reference_compute` return the same
    thing for every record (features, rules fired, resets) and leave the same counter
    memory, reset count and non-numeric count. `always=False` is the detector's kernel
    (nothing returned when no rule fired and nothing reset)."""
    rules = catalogue()
    p = plan(measurement, rules.features_needed(measurement))
    by = rules.by_measurement.get(measurement, ())
    fast, plain = FeatureExtractor({measurement: p}), FeatureExtractor({measurement: p})
    compiled = fast.compile(measurement, by, always=always)
    reference = reference_compute(p, measurement, by, always=always)
    tags = {"host": "leaf01", "interface": "swp1", "queue": "3"}
    t, previous = 0.0, {}
    for _ in range(data.draw(st.integers(1, 10))):
        fields = {c: data.draw(sparse_values) for c in p.counters}
        for c in data.draw(st.lists(st.sampled_from(p.counters), max_size=4)):
            fields[c] = previous.get(c)  # unchanged: the very object it held before
        fields |= {g: data.draw(gauge_values) for g in p.gauges}
        fields = {k: v for k, v in fields.items() if v is not None} or {"x": 1}
        previous = fields
        t += data.draw(st.sampled_from([0.0, 0.25, 1.0, 2.5, 30.0]))
        m = Metric(measurement, tags, fields, T0 + t, f"{measurement}|s")
        assert fast.run(m, compiled) == plain.run(m, reference)
        assert fast.snapshot() == plain.snapshot()
    assert (fast.counter_resets, fast.non_numeric) == (plain.counter_resets, plain.non_numeric)


@given(first=st.lists(sparse_values, min_size=3, max_size=3), second=st.lists(sparse_values, min_size=3, max_size=3))
def test_the_reference_reads_a_wrap_as_a_reset_and_a_non_number_as_nothing(first, second):
    """The reference itself, against the contract: a rate only from two numbers that did
    not decrease; booleans and strings never a number; the memory keeps the last number."""
    p = plan("switch_port", frozenset({"if_in_octets_rate", "if_out_octets_rate", "if_in_errors_rate"}))
    names = ("if_in_errors", "if_in_octets", "if_out_octets")
    before = {n: v for n, v in zip(names, first) if type(v) in (int, float)}
    fields = {n: v for n, v in zip(names, second) if v is not None}
    every, memory, resets = reference_features(p, fields, {}, before, 2.0)
    for n in names:
        old, new = before.get(n), fields.get(n)
        numbers = old is not None and type(new) in (int, float)
        assert (f"{n}_rate" in every) == (numbers and new >= old)
        assert memory.get(n) == (new if type(new) in (int, float) else old)
    assert resets == sum(1 for n in names if n in before and type(fields.get(n)) in (int, float) and fields[n] < before[n])
