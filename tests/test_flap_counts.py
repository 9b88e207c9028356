"""A flap is transitions that repeat (contract section 8), counted in the link counters'
increases, not in samples (rules with `count`, docs/design.md "Interval-invariant
detection"): the same verdict at every sample interval from 1 s to 60 s.

The truth is a host link's bounces (down at `d`, up at `u`); the leaf's port counts every
carrier transition (`carrier_changes`), the NIC every link-down (`link_down_events_phy`),
each exporter sampling every `interval` s from a phase. Before, the flap rules counted
samples with a change: three bounces within 22 s, seen in one 45 s sample, were never a
flap (tune-range link_flap-6 at 45 s; tune-any link_flap-8 at 60 s).
"""
from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.detect_parts import needed
from engine.pipeline import SYMPTOM, DetectStage
from rules.loader import load_rules

T0 = 1764400000
RULES = load_rules(None)
ROLES = {"leaf01": "leaf", "gpu01": "host"}
FLAP = {"port_carrier_flap", "nic_link_flap"}
INTERVALS = (1, 5, 10, 30, 45, 60)


def timeline(interval: float, downs: list[tuple[float, float]], *, phase: float = 0.0,
             length: float = 900.0) -> list[str]:
    """Lines as the leaf's and the host's exporters send them, every `interval` s."""
    lines = []
    for k in range(int(length // interval) + 1):
        t = phase + k * interval
        changes = sum((d <= t) + (u <= t) for d, u in downs)
        down = any(d <= t < u for d, u in downs)
        ms = int(round((T0 + t) * 1000))
        lines.append(json.dumps({"name": "switch_port", "tags": {"host": "leaf01", "interface": "swp1"},
                                 "fields": {"carrier_changes": 40 + changes, "admin_status": "up",
                                            "oper_status": "down" if down else "up"}, "timestamp": ms}))
        lines.append(json.dumps({"name": "nic_port", "tags": {"host": "gpu01", "interface": "eth0"},
                                 "fields": {"link_down_events_phy": 7 + sum(d <= t for d, _ in downs),
                                            "link": "down" if down else "up"}, "timestamp": ms}))
    return lines


def flaps(lines: list[str]) -> set[str]:
    """The flap rules whose symptoms the detect stage raised."""
    stage = DetectStage(rules=RULES, roles=ROLES)
    out = set()
    for line in lines:
        stage.feed(line)
        out |= {e.symptom.rule for e in stage.events() if e.kind == SYMPTOM and e.symptom.rule in FLAP}
    stage.finish()
    return out | {e.symptom.rule for e in stage.events() if e.kind == SYMPTOM and e.symptom.rule in FLAP}


def bounces(start: float, n: int, down_s: float, gap_s: float) -> list[tuple[float, float]]:
    return [(start + i * (down_s + gap_s), start + i * (down_s + gap_s) + down_s) for i in range(n)]


@settings(max_examples=60, deadline=None)
@given(interval=st.sampled_from(INTERVALS), phase=st.floats(0, 0.999), start=st.floats(120, 400),
       n=st.integers(3, 5), down_s=st.floats(1.1, 3.0), gap_s=st.floats(2.0, 15.0))
def test_three_bounces_within_a_minute_are_a_flap_at_every_interval(interval, phase, start, n, down_s, gap_s):
    """Invariant flap_counted: 3-5 bounces of 1-3 s, 2-15 s apart (the simulator's weak to
    strong flaps), are a flap on both ends of the link, whatever the interval and phase;
    at 45 and 60 s all of them may fall in one sample."""
    got = flaps(timeline(interval, bounces(start, n, down_s, gap_s), phase=phase * interval))
    assert got == FLAP


@settings(max_examples=60, deadline=None)
@given(interval=st.sampled_from(INTERVALS), phase=st.floats(0, 0.999), start=st.floats(120, 400),
       down_s=st.floats(0.2, 20.0), second=st.floats(200, 400))
def test_a_bounce_is_no_flap_nor_are_two_minutes_apart(interval, phase, start, down_s, second):
    """A single down/up (a driver reload, a cable reseated: contract section 8) is two
    carrier transitions and one link-down: no flap at any interval, nor is a second one
    more than 2 x 60 s later."""
    assert flaps(timeline(interval, [(start, start + down_s)], phase=phase * interval)) == set()
    twice = [(start, start + down_s), (start + second, start + second + down_s)]
    assert flaps(timeline(interval, twice, phase=phase * interval)) == set()


def test_a_counted_rule_needs_one_sample_and_its_window_covers_two_at_coarse_intervals():
    """The flap rules' persistence is their counters' increases: one sample may hold
    them all, and the window reaches the sample before (a flap across a boundary)."""
    rule = next(r for r in RULES.rules if r.id == "port_carrier_flap")
    assert rule.count == "carrier_changes_delta" and rule.hits == 3
    assert [needed(rule, i) for i in INTERVALS] == [1] * len(INTERVALS)
