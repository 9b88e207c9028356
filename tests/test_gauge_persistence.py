"""Gauge rules (`instant`: queue_congested reads curr_occupancy_bytes, a gauge of contract
section 1) prove for_s with one sample fewer than rules over counted rates: a gauge is
the state at its sample's instant, so an episode shorter than for_s holds in at most
ceil(for_s / I) samples, where a rate can straddle one more. The timeline: a leaf's
queue reads 3 MB (the rule: > 1.5 MB for 10 s) from `a` for `d` seconds, sampled every
`interval` s (or at `times`: a jittered exporter)."""
from __future__ import annotations

import json

from engine.detect import needed
from engine.pipeline import SYMPTOM, DetectStage
from rules.loader import load_rules

T0 = 1764400000
RULES = load_rules(None)
ROLES = {"leaf01": "leaf"}
FULL = 3_000_000


def timeline(interval: float, episode: tuple[float, float], *, times: list[float] | None = None,
             length: float = 400.0) -> list[str]:
    a, d = episode
    lines = []
    for k, t in enumerate(times or [k * interval for k in range(int(length // interval) + 1)]):
        occupancy = FULL if a <= t < a + d else 1000
        fields = {"curr_occupancy_bytes": occupancy, "shared_watermark_bytes": occupancy, "packets": 1000 * k,
                  "dropped_packets": 0, "wred_ecn_marked_packets": 0}
        lines.append(json.dumps({"name": "switch_queue",
                                 "tags": {"host": "leaf01", "interface": "swp1", "queue": "3", "queue_type": "UC"},
                                 "fields": fields, "timestamp": int(round((T0 + t) * 1000))}))
    return lines


def raised(lines: list[str]) -> list[tuple[str, float, float]]:
    """(rule, start, time raised: the symptom's last sign when first seen), relative to T0."""
    stage = DetectStage(rules=RULES, roles=ROLES)
    out, seen = [], set()

    def take():
        for e in stage.events():
            s = e.symptom if e.kind == SYMPTOM else None
            if s is not None and s.rule == "queue_congested" and s.key not in seen:
                seen.add(s.key)
                out.append((s.rule, s.start - T0, s.last - T0))
    for line in lines:
        stage.feed(line)
        take()
    stage.finish()
    take()
    return out


def test_the_queue_rule_reads_a_gauge_and_needs_one_sample_fewer():
    rule = next(r for r in RULES.rules if r.id == "queue_congested")
    assert rule.instant
    # two readings for_s apart at 10 s and coarser: its hits (3) are seconds, what they are at 1 s
    assert [needed(rule, i) for i in (1, 5, 10, 30)] == [11, 3, 2, 2]


def test_a_congested_queue_is_raised_once_its_samples_span_for_s():
    """1 s: the 11th sample, 10 s after the first sign (was the 12th); 5 s: the 3rd
    (was the 4th: one interval sooner); 10 s: the 2nd (was the 3rd, the rule's hits
    counted as samples); 30 s: a 60 s congestion read twice, 30 s apart, is raised at the
    second reading (before, it needed a third and was never found)."""
    assert raised(timeline(1.0, (100.5, 120.0))) == [("queue_congested", 101.0, 111.0)]
    assert raised(timeline(5.0, (96.0, 120.0))) == [("queue_congested", 100.0, 110.0)]
    assert raised(timeline(10.0, (95.0, 120.0))) == [("queue_congested", 100.0, 110.0)]
    assert raised(timeline(30.0, (100.0, 60.0))) == [("queue_congested", 120.0, 150.0)]


def test_a_queue_full_for_less_than_for_s_is_no_symptom_at_any_interval():
    for interval in (1.0, 5.0, 10.0, 30.0):
        for d in (2.0, 6.0, 9.5):
            for a in (99.9, 100.0, 100.5):
                assert raised(timeline(interval, (a, d))) == [], (interval, d, a)


def test_samples_brought_closer_than_the_interval_by_jitter_wait_for_the_span():
    """Eleven 1 s samples inside a 9.6 s episode (one came 0.8 s early) prove 9 s, not
    10: no symptom; the same samples in a long episode raise it once a sample makes the
    span 10 s."""
    times = [float(t) for t in range(90)] + [100.0, 100.2] + [float(t) for t in range(101, 200)]
    assert raised(timeline(1.0, (99.9, 9.6), times=times)) == []
    assert raised(timeline(1.0, (99.9, 60.0), times=times)) == [("queue_congested", 100.0, 110.0)]
