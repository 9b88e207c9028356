"""Stage 3: features -> symptoms. Timelines are data: `(t, record)` with t in seconds
after T0 (2025-11-29T07:06:40Z), fed in event-time order, with `advance` called as the
watermark moves. The rules come from a tiny file written here, so every threshold is
known; expectations are worked out by hand from it.

    queue_hot:  switch_queue, curr_occupancy_bytes > 1000, hits 3 within 5 s, clear 10 s
    wjh_buffer: wjh_drop, agg_count > 0, entity {host}:{egress_port}, hits 1, clear 5 s
    leaf_quiet: silence of a leaf for 5 s
"""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.detect import Detector
from engine.normalize import parse_metric
from engine.types import Entity, Metric, Symptom
from rules.loader import load_rules
from rules.schema import Condition, Rule, RuleSet

T0 = 1764400000

TINY = """\
version: 1
rules:
  - id: queue_hot
    symptom: queue_congested
    family: congestion
    measurement: switch_queue
    when: {all: ["curr_occupancy_bytes > 1000"]}
    hits: 3
    within_s: 5
    clear_s: 10
    severity: 0.6
  - id: wjh_buffer
    symptom: buffer_drop
    family: microburst
    measurement: wjh_drop
    when: {all: ["agg_count > 0"]}
    clear_s: 5
  - id: leaf_quiet
    symptom: switch_silent
    family: silence
    silence: {roles: [leaf], after_s: 5}
    severity: 0.9
"""

ROLES = {"leaf01": "leaf", "leaf02": "leaf", "spine01": "spine", "gpu001": "host"}


@pytest.fixture
def detector(tmp_path: Path) -> Detector:
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    return Detector(load_rules([path]), dict(ROLES))


def queue(occupancy: int, host: str = "leaf01", interface: str = "swp1") -> dict:
    return {"name": "switch_queue",
            "tags": {"host": host, "interface": interface, "queue": "3", "queue_type": "UC"},
            "fields": {"curr_occupancy_bytes": occupancy}}


def wjh(agg_count: int, egress_port: str | None = "swp7", host: str = "leaf01") -> dict:
    fields: dict = {"agg_count": agg_count, "reason": "Tail drop"}
    if egress_port is not None:
        fields["egress_port"] = egress_port
    return {"name": "wjh_drop",
            "tags": {"host": host, "ingress_port": "swp1", "drop_type": "Buffer", "reason_id": "503",
                     "severity": "Warning"},
            "fields": fields}


def port(host: str) -> dict:
    return {"name": "switch_port", "tags": {"host": host, "interface": "swp1"}, "fields": {"oper_status": "up"}}


def feed(det: Detector, timeline: list[tuple[float, dict]], *, advance: bool = True) -> list[Symptom]:
    """Process each record at T0 + t (calling advance(T0 + t) after each when asked) and
    return what the detector emitted."""
    for t, doc in timeline:
        m = parse_metric(doc | {"timestamp": T0 + t})
        assert isinstance(m, Metric), m
        det.process(m)
        if advance:
            det.advance(T0 + t)
    return det.drain()


HOT, COOL = 5000, 0


# ------------------------------------------------------------------ start


def test_three_hits_within_the_window_start_one_symptom_at_the_first(detector):
    assert feed(detector, [(t, queue(COOL)) for t in range(10)]) == []
    assert feed(detector, [(10, queue(HOT)), (11, queue(HOT))]) == []  # 2 of 3 hits
    (sym,) = feed(detector, [(12, queue(HOT))])
    assert sym.start == T0 + 10
    assert sym.last == T0 + 12
    assert sym.end is None and sym.active
    assert sym.entity == Entity("interface", "leaf01:swp1")
    assert sym.device == "leaf01"
    assert (sym.kind, sym.family, sym.rule, sym.severity) == ("queue_congested", "congestion", "queue_hot", 0.6)
    assert feed(detector, [(13, queue(HOT)), (14, queue(HOT))]) == []  # same episode: no new symptom
    assert sym.last == T0 + 14


def test_one_true_sample_does_not_start_a_symptom(detector):
    timeline = [(t, queue(HOT if t == 10 else COOL)) for t in range(40)]
    assert feed(detector, timeline) == []
    detector.finish()
    assert detector.drain() == []


def test_hits_spread_wider_than_the_window_do_not_start_a_symptom(detector):
    # 10, 14, 18: at 18 the window [13, 18] holds only 14 and 18
    timeline = [(t, queue(HOT if t in (10, 14, 18) else COOL)) for t in range(30)]
    assert feed(detector, timeline) == []


def test_window_includes_a_hit_exactly_within_s_earlier(detector):
    # 10, 12, 15: 15 - 10 = 5 = within_s
    (sym,) = feed(detector, [(10, queue(HOT)), (12, queue(HOT)), (15, queue(HOT))])
    assert sym.start == T0 + 10


def test_window_excludes_a_hit_more_than_within_s_earlier(detector):
    assert feed(detector, [(10, queue(HOT)), (12, queue(HOT)), (15.5, queue(HOT))]) == []
    (sym,) = feed(detector, [(16, queue(HOT))])  # 12, 15.5, 16
    assert sym.start == T0 + 12


def test_each_entity_has_its_own_symptom(detector):
    timeline = []
    for t in (10, 11, 12):
        timeline += [(t, queue(HOT, interface="swp1")), (t, queue(HOT, interface="swp2")), (t, queue(HOT, host="leaf02"))]
    emitted = feed(detector, timeline)
    assert sorted(s.entity.id for s in emitted) == ["leaf01:swp1", "leaf01:swp2", "leaf02:swp1"]
    assert {s.start for s in emitted} == {T0 + 10}
    assert len({s.key for s in emitted}) == 3


# ------------------------------------------------------------------ end


def test_symptom_ends_at_its_last_hit_once_clear_s_has_passed(detector):
    (sym,) = feed(detector, [(10, queue(HOT)), (11, queue(HOT)), (12, queue(HOT))])
    # last hit 12, clear_s 10: still active up to and including 22
    assert feed(detector, [(t, queue(COOL)) for t in range(13, 23)]) == []
    assert sym.end is None
    (ended,) = feed(detector, [(23, queue(COOL))])
    assert ended is sym
    assert sym.end == T0 + 12
    assert sym.start == T0 + 10
    assert not sym.active
    assert feed(detector, [(t, queue(COOL)) for t in range(24, 40)]) == []


def test_a_hit_during_clear_s_extends_the_symptom(detector):
    (sym,) = feed(detector, [(10, queue(HOT)), (11, queue(HOT)), (12, queue(HOT))])
    assert feed(detector, [(t, queue(HOT if t == 20 else COOL)) for t in range(13, 31)]) == []  # 20 + 10 = 30
    assert sym.last == T0 + 20
    feed(detector, [(31, queue(COOL))])
    assert sym.end == T0 + 20


def test_a_new_episode_gives_a_new_symptom_with_a_new_key(detector):
    (first,) = feed(detector, [(10, queue(HOT)), (11, queue(HOT)), (12, queue(HOT))])
    (ended,) = feed(detector, [(t, queue(COOL)) for t in range(13, 40)])
    assert ended is first and first.end == T0 + 12
    (second,) = feed(detector, [(40, queue(HOT)), (41, queue(HOT)), (42, queue(HOT))])
    assert second is not first
    assert second.start == T0 + 40 and second.end is None
    assert second.key != first.key
    assert second.entity == first.entity
    assert first.end == T0 + 12  # the first episode is left as it ended


def test_hits_of_an_old_window_do_not_carry_into_a_new_one(detector):
    # two hits, then quiet long enough, then one hit: never three within 5 s
    timeline = [(t, queue(HOT if t in (10, 11, 30) else COOL)) for t in range(40)]
    assert feed(detector, timeline) == []


def test_finish_ends_active_symptoms_at_their_last_hit(detector):
    (sym,) = feed(detector, [(10, queue(HOT)), (11, queue(HOT)), (12, queue(HOT)), (13, queue(HOT))])
    detector.finish()
    assert detector.drain() == [sym]
    assert sym.end == T0 + 13


# ------------------------------------------------------------------ entity


def test_entity_from_a_field(detector):
    (sym,) = feed(detector, [(10, wjh(4, egress_port="swp7"))])
    assert sym.entity == Entity("interface", "leaf01:swp7")
    assert sym.device == "leaf01"
    assert (sym.kind, sym.rule, sym.start) == ("buffer_drop", "wjh_buffer", T0 + 10)


def test_entity_that_cannot_be_formed_is_counted_not_raised(detector):
    assert feed(detector, [(10, wjh(4, egress_port=None))]) == []
    assert detector.unresolved_entities == 1


# ------------------------------------------------------------------ peaks


def test_peak_metrics_are_kept(detector):
    values = {10: 2000, 11: 2000, 12: 2000, 13: 9000, 14: 3000}
    (sym,) = feed(detector, [(t, queue(v)) for t, v in values.items()])
    assert sym.metrics == {"curr_occupancy_bytes": 9000.0}


def test_peak_includes_the_hits_before_the_symptom_was_raised(detector):
    values = {10: 2000, 11: 9000, 12: 3000, 13: 4000}  # the symptom spans 10..13; its peak is 9000
    (sym,) = feed(detector, [(t, queue(v)) for t, v in values.items()])
    assert sym.metrics == {"curr_occupancy_bytes": 9000.0}


# ------------------------------------------------------------------ silence


def test_a_leaf_that_stops_reporting_goes_silent_and_comes_back(detector):
    def second(t: int, *, leaf02: bool) -> list[tuple[float, dict]]:
        # spine01 stops at 10 too, but the rule only watches leaves
        out = [(t, port("leaf01"))]
        if leaf02:
            out.append((t, port("leaf02")))
        if t <= 10:
            out.append((t, port("spine01")))
        return out

    for t in range(15):
        assert feed(detector, second(t, leaf02=t <= 10)) == [], f"t={t}"
    (sym,) = feed(detector, second(15, leaf02=False))  # 15 - 10 = after_s
    assert sym.kind == "switch_silent" and sym.family == "silence" and sym.rule == "leaf_quiet"
    assert sym.entity == Entity("switch", "leaf02")
    assert sym.device == "leaf02"
    assert sym.start == T0 + 10
    assert sym.end is None
    assert sym.severity == 0.9
    assert sym.metrics["silent_s"] == pytest.approx(5)
    for t in (16, 17):
        assert feed(detector, second(t, leaf02=False)) == []  # still the same silence
    assert sym.metrics["silent_s"] == pytest.approx(7)
    (back,) = feed(detector, second(18, leaf02=True))
    assert back is sym
    assert sym.end == T0 + 18
    for t in range(19, 30):
        assert feed(detector, second(t, leaf02=True)) == []


def test_silence_only_counts_event_time_that_others_reported(detector):
    feed(detector, [(0, port("leaf01")), (0, port("leaf02")), (1, port("leaf01"))])
    detector.advance(T0 + 100)  # no record newer than 1: nobody has been seen to be quiet
    assert detector.drain() == []


# ------------------------------------------------------------------ property


@given(
    hits=st.integers(1, 4),
    within=st.integers(1, 8),
    times=st.lists(st.integers(0, 60), min_size=1, max_size=25, unique=True).map(sorted),
)
def test_symptom_starts_at_the_first_hit_of_the_first_full_window(hits, within, times):
    """Invariant first_window: with hits at `times` (no quiet gap long enough to clear),
    the symptom starts at times[j - hits + 1] for the first j with
    times[j] - times[j - hits + 1] <= max(within_s, (hits + 1) x 1 s), and there is none
    without such a j. (A detector without intervals counts each series as sampled every
    second; the window always holds `hits` samples and one missed or under-threshold one.)"""
    rule = Rule(id="r", symptom="s", family="f", measurement="switch_queue",
                all=(Condition("curr_occupancy_bytes", ">", 1000.0),), hits=hits, within_s=float(within),
                clear_s=1000.0, entity="{host}:{interface}")
    det = Detector(RuleSet.of([rule], []))
    emitted = feed(det, [(t, queue(HOT)) for t in times])
    firsts = [j for j in range(hits - 1, len(times)) if times[j] - times[j - hits + 1] <= max(within, hits + 1)]
    if not firsts:
        assert emitted == []
    else:
        (sym,) = emitted
        assert sym.start == T0 + times[firsts[0] - hits + 1]
        assert sym.last == T0 + times[-1]


def test_a_switch_whose_interval_is_not_known_yet_is_not_silent_within_one_long_interval(tmp_path):
    # leaf02 is polled every 30 s: after its first record its interval is unknown, and
    # reading it as 1 s declared it silent 5 s later (a device_down beside a real flap).
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    known = {"switch_port|leaf01|swp1": 1.0}
    det = Detector(load_rules([path]), dict(ROLES), interval_of=known.get)
    emitted = feed(det, [(t, port("leaf01")) for t in range(0, 30)] + [(0, port("leaf02"))])
    emitted += feed(det, [(t, port("leaf01")) for t in range(30, 59)])
    assert [s for s in emitted if s.kind == "switch_silent"] == []
    # Still unknown, it is silent once quiet for after_intervals (3) of the longest
    # interval contract section 1 allows
    from engine.detect import UNKNOWN_DEVICE_INTERVAL_S
    late = feed(det, [(t, port("leaf01")) for t in range(59, 3 * int(UNKNOWN_DEVICE_INTERVAL_S) - 1)])
    assert late == []
    late = feed(det, [(t, port("leaf01")) for t in range(3 * int(UNKNOWN_DEVICE_INTERVAL_S) - 1, 200)])
    assert [(s.kind, s.device) for s in late] == [("switch_silent", "leaf02")]
