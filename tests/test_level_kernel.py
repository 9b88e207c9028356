"""Level rules in the compiled kernel (engine.features_compile, `levels=`): the level
tuple it hands over and the values it adds to a series' windows itself agree with the
plain reference, and a detector whose kernel adds them finds the same symptoms and
keeps the same windows as one that judges every record in engine.baseline."""
from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.baseline import LevelState
from engine.detect import Detector
from engine.features import FeatureExtractor, plan
from engine.features_reference import reference_compute
from engine.types import Metric
from rules.loader import load_rules

T0 = 1764400000
RULES = load_rules(None)
numbers = st.one_of(st.none(), st.integers(0, 3 * 10**6), st.floats(0, 2e7), st.booleans(), st.just("7"),
                    st.just(float("nan")))


def windows(level_rules, ts: float, data) -> list[LevelState]:
    """Windows as a detector may have left them: the record's bucket open, or the one
    before it; a verdict that holds or not."""
    return [LevelState(bucket=math.floor(ts / r.level.bucket_s) - data.draw(st.sampled_from([0, 0, 1])),
                       total=data.draw(st.floats(0, 1e6)), count=data.draw(st.integers(0, 5)),
                       verdict=data.draw(st.booleans())) for r in level_rules]


def norm(x):
    """x with NaN as a string (so that it equals itself) and dicts as sorted items."""
    if isinstance(x, dict):
        return sorted((k, norm(v)) for k, v in x.items())
    if isinstance(x, (list, tuple)):
        return type(x)(norm(v) for v in x)
    return "nan" if isinstance(x, float) and math.isnan(x) else x


def state(ws: list[LevelState] | None) -> list | None:
    return None if ws is None else [w.to_wire() for w in ws]


@pytest.mark.parametrize("measurement,always,model", [
    ("switch_port", False, False), ("switch_port", True, False), ("nic_port", False, False),
    ("nic_port", False, True), ("storage", False, False), ("storage", True, True)])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_the_kernel_with_level_rules_equals_its_reference(measurement, always, model, data):
    """Invariant level_kernel_is_reference: record by record, with the series' windows
    attached or not, the compiled compute and `reference_compute` given the same level
    rules return the same (features, rules fired, resets, [model vector,] level tuple),
    and leave the same counter memory and the same windows."""
    by = RULES.by_measurement[measurement]
    levels = tuple(r for r in by if r.level is not None)
    rules = tuple(r for r in by if r.level is None)
    assert levels  # the catalogue has level rules on each of these measurements
    p = plan(measurement, RULES.features_needed(measurement))
    names = tuple(sorted(p.wanted))[:5] if model else ()
    fast, plain = FeatureExtractor({measurement: p}), FeatureExtractor({measurement: p})
    compiled = fast.compile(measurement, rules, always=always, model=names, levels=levels)
    reference = reference_compute(p, measurement, rules, always=always, model=names, levels=levels)
    tags = {"host": "h1", "interface": "eth0", "kind": "disk", "name": "sda"}
    t, counters = 0.0, {c: 0 for c in p.counters}
    for _ in range(data.draw(st.integers(1, 12))):
        fields = {}
        for c in p.counters:  # mostly rising (rates); now and then reset, absent or not a number
            step = data.draw(st.sampled_from([0, 1, 1000, 10**6, "reset", None, "x"]))
            if isinstance(step, int):
                counters[c] += step
            elif step == "reset":
                counters[c] = 0
            fields[c] = counters[c] if step not in (None, "x") else step
        fields = {k: v for k, v in fields.items() if v is not None}
        fields |= {g: v for g in p.gauges if (v := data.draw(numbers)) is not None}
        t += data.draw(st.sampled_from([0.25, 1.0, 2.5, 10.0, 30.0]))
        m = Metric(measurement, tags, fields or {"x": 1}, T0 + t, f"{measurement}|s")
        if m.series in fast.series and data.draw(st.booleans()):  # the detector attaches its windows
            ws = windows(levels, m.ts, data)
            fast.series[m.series].levels = ws
            plain.series[m.series].levels = [LevelState.from_wire(w.to_wire()) for w in ws]
        assert norm(fast.run(m, compiled)) == norm(plain.run(m, reference))
        assert fast.snapshot() == plain.snapshot()
        if m.series in fast.series:
            assert norm(state(fast.series[m.series].levels)) == norm(state(plain.series[m.series].levels))


def telemetry(seconds: int = 900) -> list[Metric]:
    """A NIC that starts to pause and to stall at 300 s, a port whose corrected FEC climbs,
    a storage target whose latency drifts: 1 s samples with noise."""
    rng = random.Random(3)
    c = {"pause": 0, "dur": 0, "fec": 0, "octets": 0, "reads": 0, "rtime": 0}
    out = []
    for k in range(seconds):
        ramp = min(1.0, max(0.0, (k - 300) / 200))
        c["pause"] += int(rng.uniform(0, 3) + 10 * ramp)
        c["dur"] += int(rng.uniform(0, 100) + 10_000 * ramp)
        c["fec"] += rng.randint(0, 20) + int(300 * ramp)
        c["octets"] += 10**9
        c["reads"] += 400
        c["rtime"] += int(400 * rng.uniform(0.3, 0.8) * (1 + 2 * ramp))
        ts = T0 + k
        stall = rng.uniform(0, 2) + 3 * ramp
        out.append(Metric("nic_port", {"host": "gpu1", "interface": "eth0"},
                          {"tx_prio3_pause": c["pause"], "tx_prio3_pause_duration": c["dur"], "tx_bytes": c["octets"],
                           "outbound_pci_stalled_rd": stall, "outbound_pci_stalled_wr": stall / 2, "link": "up"},
                          ts, "nic_port|gpu1|eth0"))
        out.append(Metric("switch_port", {"host": "leaf1", "interface": "swp1"},
                          {"if_in_fec_correctable_frames": c["fec"], "if_in_octets": c["octets"], "oper_status": "up"},
                          ts + 0.5, "switch_port|leaf1|swp1"))
        if k % 10 == 0:
            out.append(Metric("storage", {"host": "stor1", "kind": "disk", "name": "sda"},
                              {"reads": c["reads"], "read_time": c["rtime"]}, ts + 0.7, "storage|stor1|sda"))
    return out


def run(detector: Detector, metrics: list[Metric], every_record_judged: bool) -> list[tuple]:
    seen = []
    for m in metrics:
        if every_record_judged:  # no windows attached: every record is handed to engine.baseline
            for memory in detector.extractor.series.values():
                memory.levels = None
        detector.process(m)
        detector.advance(m.ts)
        seen += [(s.key, s.rule, s.start, s.end, sorted(s.metrics.items())) for s in detector.drain()]
    detector.finish()
    return seen + [(s.key, s.rule, s.start, s.end, sorted(s.metrics.items())) for s in detector.drain()]


def test_the_kernel_adding_to_the_windows_changes_no_verdict():
    """The same symptoms (keys, times, medians) and the same windows whether the kernel
    adds the values of a bucket still open or engine.baseline judges every record; and
    the kernel does take most records itself."""
    metrics = telemetry()
    handed = []

    fast = Detector(RULES)
    judge = fast._levels
    fast._levels = lambda metric, levels, lv: handed.append(metric) or judge(metric, levels, lv)
    quick = run(fast, metrics, every_record_judged=False)
    slow_detector = Detector(RULES)
    slow = run(slow_detector, metrics, every_record_judged=True)
    assert quick == slow
    assert {r for _, r, *_ in quick} >= {"nic_pfc_tx_sustained", "nic_pcie_stall_rising", "port_fec_rising"}
    assert [x.to_wire() for x in fast.levels.values()] == [x.to_wire() for x in slow_detector.levels.values()]
    def healthy(ms):  # the NIC and the port at 1 s before the fault: a bucket closes every 10th record
        return [m for m in ms if m.name in ("nic_port", "switch_port") and m.ts < T0 + 300]
    assert 0 < len(healthy(handed)) <= len(healthy(metrics)) / 10 + 2
