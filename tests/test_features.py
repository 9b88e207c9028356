"""Stage 2: counters -> per-second rates, gauges, derived features (contract section 2:
a counter decrease is a reset, never a negative rate).

Expected values are worked out by hand in the comments next to them.
"""
from __future__ import annotations

import functools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.features import DERIVED, FeatureExtractor, known_features, plan
from engine.features_reference import reference_features, wanted
from engine.normalize import parse_metric
from engine.types import Metric
from rules.loader import load_rules


@functools.cache
def catalogue():
    """The built-in rules, parsed once: the property tests below ask for them in every
    example, and parsing the YAML took most of their time (a RuleSet is immutable)."""
    return load_rules(None)


T0 = 1764400000


def metric(measurement: str, t: float, fields: dict, /, tags: dict | None = None, **extra: str) -> Metric:
    tags = (tags or {"host": "leaf01", "interface": "swp1"}) | extra
    m = parse_metric({"name": measurement, "tags": tags, "fields": fields, "timestamp": T0 + t})
    assert isinstance(m, Metric), m
    return m


def extractor(measurement: str, *features: str) -> FeatureExtractor:
    return FeatureExtractor({measurement: plan(measurement, frozenset(features))})


# ------------------------------------------------------------------ rates


def test_rate_from_two_samples():
    fx = extractor("switch_port", "if_in_octets_rate")
    assert fx.extract(metric("switch_port", 0, {"if_in_octets": 1000})) is None  # first sample: no rate
    feats = fx.extract(metric("switch_port", 5, {"if_in_octets": 6000}))
    assert feats == {"if_in_octets_rate": 1000.0}  # (6000 - 1000) / 5 s


def test_counter_reset_gives_no_rate_and_is_counted():
    fx = extractor("switch_port", "if_in_octets_rate")
    fx.extract(metric("switch_port", 0, {"if_in_octets": 1000}))
    fx.extract(metric("switch_port", 5, {"if_in_octets": 6000}))
    feats = fx.extract(metric("switch_port", 10, {"if_in_octets": 100}))  # went down: reset
    assert not feats or "if_in_octets_rate" not in feats
    assert fx.counter_resets == 1
    feats = fx.extract(metric("switch_port", 15, {"if_in_octets": 1100}))
    assert feats == {"if_in_octets_rate": 200.0}  # (1100 - 100) / 5 s, counted from the reset value
    assert fx.counter_resets == 1


def test_series_are_kept_apart():
    fx = extractor("switch_port", "if_in_octets_rate")
    fx.extract(metric("switch_port", 0, {"if_in_octets": 0}, interface="swp1"))
    fx.extract(metric("switch_port", 0, {"if_in_octets": 5000}, interface="swp2"))
    assert fx.extract(metric("switch_port", 1, {"if_in_octets": 100}, interface="swp1")) == {"if_in_octets_rate": 100.0}
    assert fx.extract(metric("switch_port", 2, {"if_in_octets": 5400}, interface="swp2")) == {"if_in_octets_rate": 200.0}
    assert fx.counter_resets == 0


def test_sample_not_newer_than_the_previous_gives_nothing():
    fx = extractor("switch_port", "if_in_octets_rate")
    fx.extract(metric("switch_port", 10, {"if_in_octets": 0}))
    assert fx.extract(metric("switch_port", 10, {"if_in_octets": 50})) is None
    assert fx.extract(metric("switch_port", 9, {"if_in_octets": 50})) is None
    assert fx.extract(metric("switch_port", 12, {"if_in_octets": 100})) == {"if_in_octets_rate": 50.0}


def test_a_sample_older_than_its_series_newest_is_counted_superseded():
    fx = extractor("switch_port", "if_in_octets_rate")
    fx.extract(metric("switch_port", 10, {"if_in_octets": 0}))
    fx.extract(metric("switch_port", 10, {"if_in_octets": 50}))  # a late half alone: the reorderer counts it
    assert fx.superseded == 0
    fx.extract(metric("switch_port", 9, {"if_in_octets": 50}))
    assert fx.superseded == 1


def test_measurement_without_a_plan_is_ignored():
    fx = extractor("switch_port", "if_in_octets_rate")
    assert fx.extract(metric("nic_port", 0, {"rx_bytes": 1})) is None
    assert fx.extract(metric("job_placement", 0, {"job_id": "1"})) is None


@given(
    values=st.lists(st.integers(0, 10**12), min_size=1, max_size=30),
    gaps=st.lists(st.integers(1, 4000).map(lambda q: q / 4), min_size=30, max_size=30),
)
def test_rates_are_deltas_over_time_and_never_negative(values, gaps):
    """Invariants: rate_nonnegative: every emitted rate is >= 0;
    rate_is_delta_over_dt: where the counter increased (or held), rate = delta / dt;
    reset_no_rate: where it decreased there is no rate and counter_resets counts it."""
    fx = extractor("switch_port", "if_in_octets_rate")
    t = 0.0
    times = []
    for i, v in enumerate(values):
        if i:
            t += gaps[i]
        times.append(t)
        feats = fx.extract(metric("switch_port", t, {"if_in_octets": v}))
        rate = (feats or {}).get("if_in_octets_rate")
        if i == 0:
            assert rate is None
            continue
        delta, dt = v - values[i - 1], times[i] - times[i - 1]
        if delta < 0:
            assert rate is None
        else:
            assert rate is not None and rate >= 0
            assert rate == pytest.approx(delta / dt, rel=1e-9)
    assert fx.counter_resets == sum(1 for a, b in zip(values, values[1:]) if b < a)


# ---------------------------------------------------------------- gauges


def test_gauges_are_passed_through():
    fx = extractor("switch_port", "oper_status", "speed_mbps")
    feats = fx.extract(metric("switch_port", 0, {"oper_status": "down", "speed_mbps": 100000, "if_in_octets": 1}))
    assert feats == {"oper_status": "down", "speed_mbps": 100000}


def test_event_facts_carried_as_tags_are_features():
    # wjh_drop: drop_type is a tag in contract section 2
    fx = extractor("wjh_drop", "drop_type", "agg_count")
    m = parse_metric({"name": "wjh_drop", "tags": {"host": "leaf01", "ingress_port": "swp1", "drop_type": "Buffer",
                                                  "reason_id": "1", "severity": "Notice"},
                      "fields": {"agg_count": 7, "egress_port": "swp9"}, "timestamp": T0})
    assert fx.extract(m) == {"drop_type": "Buffer", "agg_count": 7}


# ---------------------------------------------------------------- derived


def test_pfc_tx_pkts_rate_sums_every_priority():
    fx = extractor("switch_port", "pfc_tx_pkts_rate")
    fx.extract(metric("switch_port", 0, {"pfc_3_tx_pkts": 0, "pfc_4_tx_pkts": 1000, "pfc_3_rx_pkts": 0}))
    feats = fx.extract(metric("switch_port", 2, {"pfc_3_tx_pkts": 300, "pfc_4_tx_pkts": 1100, "pfc_3_rx_pkts": 9000}))
    # prio 3: 300 / 2 = 150/s; prio 4: 100 / 2 = 50/s; rx pauses do not count
    assert feats["pfc_tx_pkts_rate"] == pytest.approx(200.0)


def test_pfc_sum_skips_a_priority_that_reset():
    fx = extractor("switch_port", "pfc_tx_pkts_rate")
    fx.extract(metric("switch_port", 0, {"pfc_3_tx_pkts": 500, "pfc_4_tx_pkts": 0}))
    feats = fx.extract(metric("switch_port", 1, {"pfc_3_tx_pkts": 10, "pfc_4_tx_pkts": 40}))
    assert feats["pfc_tx_pkts_rate"] == pytest.approx(40.0)  # prio 3 reset: only prio 4's 40/s
    assert fx.counter_resets == 1


def test_util_tx_with_speed_in_megabits():
    fx = extractor("nic_port", "util_tx")
    fx.extract(metric("nic_port", 0, {"tx_bytes": 0, "speed": 100000}, host="gpu001", interface="eth0"))
    feats = fx.extract(metric("nic_port", 4, {"tx_bytes": 25_000_000_000, "speed": 100000}, host="gpu001", interface="eth0"))
    # 25e9 B / 4 s = 6.25e9 B/s = 50e9 b/s on a 100000 Mb/s (100 Gb/s) port -> 0.5
    assert feats["util_tx"] == pytest.approx(0.5)


def test_util_tx_needs_a_positive_speed():
    fx = extractor("nic_port", "util_tx")
    fx.extract(metric("nic_port", 0, {"tx_bytes": 0, "speed": 0}))
    feats = fx.extract(metric("nic_port", 1, {"tx_bytes": 1000, "speed": 0}))
    assert "util_tx" not in (feats or {})


def test_storage_latency_is_time_over_operations():
    fx = extractor("storage", "latency_ms", "read_latency_ms", "write_latency_ms")
    tags = {"host": "stor01", "kind": "disk", "name": "nvme0n1"}
    fx.extract(metric("storage", 0, {"reads": 100, "writes": 50, "read_time": 1000, "write_time": 2000}, tags))
    feats = fx.extract(metric("storage", 5, {"reads": 200, "writes": 150, "read_time": 1400, "write_time": 2200}, tags))
    # (400 + 200) ms over (100 + 100) operations = 3 ms; reads 400/100 = 4 ms; writes 200/100 = 2 ms
    assert feats["latency_ms"] == pytest.approx(3.0)
    assert feats["read_latency_ms"] == pytest.approx(4.0)
    assert feats["write_latency_ms"] == pytest.approx(2.0)


def test_inflight_latency_is_littles_law():
    fx = extractor("storage", "inflight_latency_ms")
    tags = {"host": "stor01", "kind": "disk", "name": "nvme0n1"}
    fx.extract(metric("storage", 0, {"reads": 0, "writes": 0, "iops_in_progress": 3}, tags))
    feats = fx.extract(metric("storage", 2, {"reads": 12_000, "writes": 8_000, "iops_in_progress": 5}, tags))
    # 5 I/O in flight at 10,000 I/O per second: each spends 0.5 ms in flight
    assert feats["inflight_latency_ms"] == pytest.approx(0.5)
    idle = fx.extract(metric("storage", 3, {"reads": 12_000, "writes": 8_000, "iops_in_progress": 1}, tags))
    assert "inflight_latency_ms" not in (idle or {})


def test_storage_latency_without_operations_is_absent():
    fx = extractor("storage", "latency_ms")
    tags = {"host": "stor01", "kind": "disk", "name": "nvme0n1"}
    fx.extract(metric("storage", 0, {"reads": 10, "writes": 10, "read_time": 0, "write_time": 0}, tags))
    feats = fx.extract(metric("storage", 1, {"reads": 10, "writes": 10, "read_time": 0, "write_time": 0}, tags))
    assert "latency_ms" not in (feats or {})


# ---------------------------------------------------------------- planning


def test_only_planned_features_are_computed():
    fx = extractor("switch_port", "if_in_octets_rate")
    everything = {"if_in_octets": 0, "if_out_octets": 0, "pfc_3_tx_pkts": 0, "oper_status": "up", "speed_mbps": 100000}
    fx.extract(metric("switch_port", 0, everything))
    later = everything | {"if_in_octets": 10, "if_out_octets": 20, "pfc_3_tx_pkts": 30}
    assert fx.extract(metric("switch_port", 1, later)) == {"if_in_octets_rate": 10.0}


def test_a_derived_feature_plans_its_inputs_and_nothing_else():
    p = plan("nic_port", frozenset({"util_tx"}))
    assert p.counters == ("tx_bytes",)
    assert p.gauges == ("speed",)
    assert [d.name for d in p.derived] == ["util_tx"]
    fx = FeatureExtractor({"nic_port": p})
    fx.extract(metric("nic_port", 0, {"tx_bytes": 0, "rx_bytes": 0, "speed": 1000, "link": "up"}))
    feats = fx.extract(metric("nic_port", 1, {"tx_bytes": 100, "rx_bytes": 100, "speed": 1000, "link": "up"}))
    assert set(feats) == {"util_tx"}  # its inputs are read, not handed out: nobody asked for them


def test_known_features_name_rates_gauges_and_derived():
    known = known_features("switch_port")
    assert {"if_in_octets_rate", "pfc_7_rx_pause_duration_us_rate", "oper_status", "pfc_tx_pkts_rate", "util_out"} <= known
    assert "if_in_octets" not in known  # a counter is only read as a rate
    assert "latency_ms" in known_features("storage")


def test_gauge_derived_feature_on_the_first_sample():
    fx = extractor("nic_port", "pci_stall", "rx_discards_phy_rate")
    feats = fx.extract(metric("nic_port", 0, {"rx_discards_phy": 0, "outbound_pci_stalled_rd": 30,
                                              "outbound_pci_stalled_wr": 2}))
    assert feats["pci_stall"] == 30  # max(30, 2): needs no previous sample


counter_values = st.one_of(st.none(), st.integers(0, 2**70), st.integers(0, 3), st.floats(0, 1e6), st.booleans(),
                           st.just("12"))


@given(first=st.lists(counter_values, min_size=8, max_size=8), second=st.lists(counter_values, min_size=8, max_size=8))
def test_compiled_sums_and_argmaxes_agree_with_their_definition(first, second):
    """Invariant derived_inline: the sums and argmaxes compiled inline equal `Derived.fn`
    over the per-priority rates (whatever the counters hold: missing, reset, small ints
    that did not change, huge ints, floats, booleans, strings)."""
    names = [f"pfc_{p}_tx_pkts" for p in range(8)]
    derived = ("pfc_tx_pkts_rate", "pfc_tx_prio")
    rates = tuple(f"{n}_rate" for n in names)
    fx, ref = extractor("switch_port", *derived), extractor("switch_port", *derived, *rates)
    for t, values in ((0, first), (2, second)):
        fields = {n: v for n, v in zip(names, values) if v is not None} or {"oper_status": "up"}
        feats, every = fx.extract(metric("switch_port", t, fields)), ref.extract(metric("switch_port", t, fields))
    every = every or {}
    for d in derived:
        expected = DERIVED["switch_port"][d].fn({r: every[r] for r in rates if r in every})
        assert (feats or {}).get(d) == expected
    assert fx.counter_resets == ref.counter_resets


def _reference(p, fields: dict, tags: dict, before: dict | None, dt: float) -> dict:
    """The plan's wanted features by the plain definition (engine.features_reference)."""
    return wanted(p, reference_features(p, fields, tags, before, dt)[0])


gauge_values = st.one_of(st.none(), st.integers(0, 3 * 10**6), st.floats(0, 2e7), st.booleans(),
                         st.sampled_from(["up", "down", "stormed", "operational", "7"]))


@pytest.mark.parametrize("measurement", ["switch_port", "switch_queue", "nic_port"])
@given(data=st.data())
def test_compiled_plan_with_rules_agrees_with_rule_matches(measurement, data):
    """Invariant compiled_rules: a plan compiled with the catalogue's rules yields the
    features of the plain definition and fires exactly the rules whose `Rule.matches`
    holds on them, whatever the fields hold (missing, reset, unchanged, equal ints, huge
    ints, floats, booleans, strings)."""
    rules = catalogue()
    p = plan(measurement, rules.features_needed(measurement))
    fx = FeatureExtractor({measurement: p})
    compute = fx.compile(measurement, rules.by_measurement[measurement], always=True)
    first = {c: data.draw(counter_values) for c in p.counters} | {g: data.draw(gauge_values) for g in p.gauges}
    same = data.draw(st.lists(st.sampled_from(p.counters), max_size=len(p.counters)))
    second = {c: data.draw(counter_values) for c in p.counters} | {g: data.draw(gauge_values) for g in p.gauges}
    second |= {c: first[c] for c in same}  # some counters keep their value (the same object)
    second |= {c: int(str(first[c])) for c in same[:3] if type(first[c]) is int}  # or an equal int
    before = {k: v for k, v in first.items() if v is not None}
    after = {k: v for k, v in second.items() if v is not None}
    tags = {"host": "leaf01", "interface": "swp1", "queue": "3"}
    for t, fields in ((0, before or {"x": 1}), (2.5, after or {"x": 1})):
        m = Metric(measurement, tags, fields, T0 + t, f"{measurement}|s")
        out = fx.run(m, compute)
    feats, fired = (out[0], out[1]) if out else (None, [])
    expected = _reference(p, after, tags, before, 2.5)
    assert (feats or {}) == expected
    assert fired == [r for r in rules.by_measurement[measurement] if expected and r.matches(expected)]


@pytest.mark.parametrize("measurement", ["switch_port", "switch_queue", "nic_port", "storage"])
@given(data=st.data())
def test_compiled_plan_for_the_models_hands_them_a_tuple_and_the_rules_the_dict(measurement, data):
    """With `model` (an anomaly model's features, in its order), compute hands the models
    those features as a tuple (None where absent; None for a record with no feature at
    all) and the rules the same dict and the same fired rules as the plain definition,
    the dict only when a rule fired."""
    from models.catalogue import BY_MEASUREMENT, features_needed
    rules = catalogue()
    names = BY_MEASUREMENT[measurement].feature_names
    p = plan(measurement, frozenset(rules.features_needed(measurement)) | features_needed(measurement))
    fx = FeatureExtractor({measurement: p})
    compute = fx.compile(measurement, rules.by_measurement.get(measurement, ()), model=names)
    first = {c: data.draw(counter_values) for c in p.counters} | {g: data.draw(gauge_values) for g in p.gauges}
    second = {c: data.draw(counter_values) for c in p.counters} | {g: data.draw(gauge_values) for g in p.gauges}
    before = {k: v for k, v in first.items() if v is not None}
    after = {k: v for k, v in second.items() if v is not None}
    tags = {"host": "leaf01", "interface": "swp1", "queue": "3"}
    for t, fields in ((0, before or {"x": 1}), (2.5, after or {"x": 1})):
        out = fx.run(Metric(measurement, tags, fields, T0 + t, f"{measurement}|s"), compute)
    expected = _reference(p, after, tags, before, 2.5)
    feats, fired, _, vec = out
    want_fired = [r for r in rules.by_measurement.get(measurement, ()) if expected and r.matches(expected)]
    assert fired == want_fired
    assert feats == (expected if want_fired else None)
    assert vec == (tuple(expected.get(n) for n in names) if expected else None)


@pytest.mark.parametrize("measurement", ["nic_port", "switch_port", "storage"])
@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_a_series_whose_counters_come_and_go_gets_the_rates_of_their_definition(measurement, data):
    """Invariant sparse_shapes: a series that lacks some counters (as a NIC reports only
    the priorities it uses) is read by code compiled for the counters it has; when they
    come and go, from record to record, every record still gets the features of the plain
    definition over the counter memory (the latest number of each counter), and resets
    are counted as they are for a full series."""
    rules = catalogue()
    p = plan(measurement, rules.features_needed(measurement))
    fx = FeatureExtractor({measurement: p})
    compute = fx.compile(measurement, rules.by_measurement.get(measurement, ()), always=True)
    _come_and_go(p, fx, compute, measurement, data)


def _come_and_go(p, fx: FeatureExtractor, compute, measurement: str, data) -> None:
    # a few sets of missing counters (the empty set: a full record), visited in any order
    shapes = data.draw(st.lists(st.frozensets(st.sampled_from(p.counters)), min_size=1, max_size=3))
    tags = {"host": "leaf01", "interface": "swp1"}
    memory: dict = {}
    resets = 0
    for step in range(data.draw(st.integers(2, 8))):
        missing = data.draw(st.sampled_from(shapes + [frozenset()]))
        fields = {c: data.draw(counter_values) for c in p.counters if c not in missing}
        fields |= {g: data.draw(gauge_values) for g in p.gauges}
        fields = {k: v for k, v in fields.items() if v is not None} or {"x": 1}
        out = fx.run(Metric(measurement, tags, fields, T0 + 2.5 * step, f"{measurement}|s"), compute)
        assert ((out[0] if out else None) or {}) == _reference(p, fields, tags, memory, 2.5)
        for c in p.counters:
            v = fields.get(c)
            if type(v) in (int, float):
                if type(memory.get(c)) in (int, float) and v < memory[c]:
                    resets += 1
                memory[c] = v
    assert fx.counter_resets == resets

