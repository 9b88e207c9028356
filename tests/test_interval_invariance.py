"""Interval-invariant detection (docs/design.md): the same telemetry truth, sampled every
1, 5, 10 or 30 s, gives the same verdict through the detect stage (reorderer, features,
rules of the built-in catalogue).

The truth is a timeline: switch ports of three devices counting pause frames at a base
rate of 0, with an episode of 1,000 pause frames/s on leaf01:swp1 from `a` for `d`
seconds (port_pfc_tx: > 50/s, for_s 10). Each device's exporter samples its counters
every `interval` seconds from a phase; a counter read is the exact integral of the truth
up to the sample time, so a short episode is diluted over a long interval as a real
counter would be. Silence: a device whose exporter stops.
"""
from __future__ import annotations

import json
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.detect import clear_after, needed
from engine.pipeline import SYMPTOM, DetectStage
from rules.loader import load_rules
from rules.schema import Rule

T0 = 1764400000
RULES = load_rules(None)
ROLES = {"leaf01": "leaf", "leaf02": "leaf", "spine01": "spine"}
PORTS = [("leaf01", "swp1"), ("leaf01", "swp2"), ("leaf02", "swp1"), ("spine01", "swp1")]
RATE = 1000.0  # pause frames/s during the episode: 20x the rule's threshold


def _pauses(t: float, episode: tuple[float, float] | None, host: str, iface: str) -> int:
    if episode is None or (host, iface) != ("leaf01", "swp1"):
        return 0
    a, d = episode
    return int(round(RATE * max(0.0, min(t, a + d) - a)))


def timeline(interval: float, *, episode: tuple[float, float] | None = None, phase: float = 0.0,
             length: float = 600.0, quiet: tuple[float, float] | None = None) -> list[str]:
    """Lines as the exporters send them: every device samples all its ports every
    `interval` s from `phase`; leaf01 sends nothing in `quiet` (start, end)."""
    lines = []
    for k in range(int(length // interval) + 1):
        t = phase + k * interval
        for host, iface in PORTS:
            if quiet is not None and host == "leaf01" and quiet[0] <= t < quiet[1]:
                continue
            fields = {"pfc_3_tx_pkts": _pauses(t, episode, host, iface), "oper_status": "up", "admin_status": "up"}
            lines.append(json.dumps({"name": "switch_port", "tags": {"host": host, "interface": iface},
                                     "fields": fields, "timestamp": int(round((T0 + t) * 1000))}))
    return lines


def verdict(lines: list[str]) -> list[tuple[str, str]]:
    """(rule, entity) of every symptom the detect stage started, in order."""
    stage = DetectStage(rules=RULES, roles=ROLES)
    out = []

    def take():
        for e in stage.events():
            if e.kind == SYMPTOM and e.symptom.key not in seen:
                seen.add(e.symptom.key)
                out.append((e.symptom.rule, e.symptom.entity.id))
    seen: set[str] = set()
    for line in lines:
        stage.feed(line)
        take()
    stage.finish()
    take()
    return out


PAUSE = [("port_pfc_tx", "leaf01:swp1")]
INTERVALS = (1, 5, 10, 30)


def test_a_persistent_pause_is_one_symptom_at_every_interval():
    for interval in INTERVALS:
        assert verdict(timeline(interval, episode=(100.0, 150.0))) == PAUSE, interval


def test_a_burst_of_a_few_seconds_is_no_symptom_at_any_interval():
    """A collective phase (2-6 s of pause) straddling sample boundaries as badly as it can."""
    for interval in INTERVALS:
        for d in (1.0, 3.0, 6.0):
            for a in (100.0 - d / 2, 100.0 - 0.1, 100.3):  # across a boundary, just before one, just after
                assert verdict(timeline(interval, episode=(a, d))) == [], (interval, d, a)


@settings(max_examples=40, deadline=None)
@given(interval=st.sampled_from(INTERVALS), phase=st.floats(0, 0.999),
       start=st.floats(60, 200), short=st.booleans(), d_short=st.floats(0.2, 8.0), d_long=st.floats(130, 300))
def test_the_verdict_does_not_depend_on_the_sample_interval(interval, phase, start, short, d_short, d_long):
    """Invariant interval_free: an episode shorter than the rule's for_s (10 s) is no
    symptom and one longer than 4 intervals of the coarsest polling (120 s) is exactly
    one, at any interval and sampling phase."""
    d = d_short if short else d_long
    got = verdict(timeline(interval, episode=(start, d), phase=phase * interval))
    assert got == ([] if short else PAUSE)


def test_one_or_two_missed_samples_are_no_silence_a_dead_switch_is():
    for interval in INTERVALS:
        for missed in (1, 2):  # leaf01 skips `missed` samples in a row
            quiet = (300.0 - 0.5, 300.0 + (missed - 1) * interval + 0.5)
            assert verdict(timeline(interval, quiet=quiet)) == [], (interval, missed)
        assert verdict(timeline(interval, quiet=(300.0 - 0.5, 300.0 + 8 * interval))) == \
            [("switch_silent", "leaf01")], interval


def test_silence_alone_opens_no_incident():
    """A collector gap (telemetry stops, the peers still see their links up) is not a
    dead switch: the silence joins the incident its peers' link_down symptoms open."""
    assert RULES.opens_incident("switch_silent") is False


def test_needed_samples_and_clear_time_follow_the_interval():
    rule = Rule(id="r", symptom="s", family="f", measurement="switch_port", hits=2, for_s=10.0,
                clear_s=10.0, clear_samples=3.0)
    assert [needed(rule, i) for i in (1, 5, 10, 30, 60)] == [12, 4, 3, 3, 3]
    assert [clear_after(rule, i) for i in (1, 5, 10, 30)] == [10.0, 15.0, 30.0, 90.0]
    old = Rule(id="o", symptom="s", family="f", measurement="switch_port", hits=3, within_s=5.0)
    assert needed(old, 1) == needed(old, 30) == 3  # a rule without for_s counts samples only
    assert all(needed(rule, i) - 2 >= math.ceil(10.0 / i) for i in (1, 2, 5, 10, 30))


def nic_timeline(interval: float, episode: tuple[float, float], *, phase: float = 0.0,
                 length: float = 400.0, share: float = 0.6) -> list[str]:
    """A NIC sending pause `share` of every second during the episode (loud evidence:
    rule nic_pfc_tx_loud, > 25 % for_s 3, beside nic_pfc_tx, > 10 % for_s 10); its
    duration counter read as the exact integral, diluted over a long interval."""
    a, d = episode
    lines = []
    for k in range(int(length // interval) + 1):
        t = phase + k * interval
        paused = int(round(1e6 * share * max(0.0, min(t, a + d) - a)))
        lines.append(json.dumps({"name": "nic_port", "tags": {"host": "gpu01", "interface": "eth0"},
                                 "fields": {"tx_prio3_pause_duration": paused},
                                 "timestamp": int(round((T0 + t) * 1000))}))
    return lines


def test_loud_pause_is_one_loud_symptom_at_every_interval_and_a_loud_burst_none():
    """The loud tier's verdict (credible at once in correlation) is as interval-free as
    the rule beside it: its for_s counts in samples of the series' own interval."""
    loud = {("nic_pfc_tx_loud", "gpu01:eth0"), ("nic_pfc_tx", "gpu01:eth0")}
    # 50 s of pause in the sustained-pause level rule's 60 s median is at its edge: a
    # sample interval decides it (2 samples at 30 s), so this test, of the loud tier, leaves it out
    sustained = ("nic_pfc_tx_sustained", "gpu01:eth0")
    for interval in INTERVALS:
        assert set(verdict(nic_timeline(interval, (100.0, 150.0)))) - {sustained} == loud, interval
        for d in (1.0, 2.0, 3.0):
            for a in (100.0 - d / 2, 100.0 - 0.1, 100.3):
                assert verdict(nic_timeline(interval, (a, d))) == [], (interval, d, a)


def bursts_timeline(interval: float, *, every: float, d: float, length: float = 900.0) -> list[str]:
    """leaf01:swp1 pausing at RATE for `d` s every `every` s (collective phases)."""
    lines = []
    for k in range(int(length // interval) + 1):
        t = k * interval
        done = sum(max(0.0, min(t, a + d) - a) for a in range(60, int(t) + 1, int(every)))
        fields = {"pfc_3_tx_pkts": int(round(RATE * done)), "oper_status": "up", "admin_status": "up"}
        lines.append(json.dumps({"name": "switch_port", "tags": {"host": "leaf01", "interface": "swp1"},
                                 "fields": fields, "timestamp": int(round((T0 + k * interval) * 1000))}))
    return lines


def test_bursts_that_recur_every_other_sample_do_not_add_up_to_a_persistent_condition():
    """A for_s rule's hits must come from samples in a row: a sample its condition misses
    breaks the run once misses pass a quarter of it. Before, 6 s phases every minute at
    30 s polling hit every other sample, three hits within the 120 s window, and started
    a symptom that never ended."""
    for interval in (10, 30):
        assert verdict(bursts_timeline(interval, every=60, d=6)) == [], interval
    for interval in INTERVALS:  # a phase of 50 s every minute is pause most of the time
        assert verdict(bursts_timeline(interval, every=60, d=50)) == PAUSE, interval


def test_a_level_is_not_judged_before_the_series_covers_its_recent_window():
    """A NIC whose first seconds of telemetry hold a burst of pause (a checkpoint at the
    start of a replay): the sustained-pause level rule's 60 s median of two or three
    buckets was the burst's."""
    for interval in (1, 5, 10):
        lines = nic_timeline(interval, (2.0, 8.0), share=0.02, length=300.0)
        assert verdict(lines) == [], interval
