"""A symptom's samples (engine/samples.py): bounded whatever the duration and interval,
the peak, the first and the last always kept; carried through the detector, the wire
form of the symptoms topic and checkpoints, and copied (not shared) into events."""
from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from engine import samples
from engine.detect import Detector
from engine.events import SYMPTOM, StageEvent, symptom_from_wire, symptom_to_wire
from engine.types import Entity, Metric, Symptom
from rules.loader import load_rules

T0 = 1764400000.0

HOT = """\
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
"""


def feed(series: list, points) -> None:
    for t, v in points:
        samples.add(series, t, v)


@given(interval=st.floats(1.0, 60.0), n=st.integers(1, 3000), seed=st.integers(0, 2**16),
       cap=st.integers(6, 200))
def test_a_series_is_bounded_and_keeps_its_first_last_and_peak(interval, n, seed, cap):
    values = [((i * 7919 + seed) % 1013) / 7.0 for i in range(n)]
    points = [(T0 + i * interval, v) for i, v in enumerate(values)]
    series: list = []
    for i, (t, v) in enumerate(points):
        samples.add(series, t, v, cap)
        assert len(series) <= cap
        assert len(series) >= min(i + 1, cap // 4)  # compaction leaves enough to draw
    assert series[0] == points[0] and series[-1] == points[-1]
    assert max(v for _, v in series) == max(values)
    assert all(a[0] < b[0] for a, b in zip(series, series[1:]))  # event-time order, no two at one time
    assert set(series) <= set(points)  # samples, never made-up points
    if n <= cap:
        assert series == points


def test_a_long_symptom_is_drawn_over_its_whole_life():
    """A day at 1 s: the points spread over the day, not bunched at either end."""
    series: list = []
    feed(series, ((T0 + i, float(i % 50)) for i in range(86_400)))
    times = [t for t, _ in series]
    assert samples.CAP // 4 <= len(series) <= samples.CAP
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert max(gaps) < 86_400 / 20  # no stretch of the day left out


def test_a_sample_at_the_newest_time_keeps_the_larger_and_an_older_one_is_ignored():
    series = [(T0, 1.0), (T0 + 1, 2.0)]
    samples.add(series, T0 + 1, 5.0)
    samples.add(series, T0 + 1, 3.0)
    samples.add(series, T0 + 0.5, 9.0)
    assert series == [(T0, 1.0), (T0 + 1, 5.0)]


def test_a_series_sent_and_read_back_continues_as_the_one_never_sent():
    whole: list = []
    feed(whole, ((T0 + i, float(i % 13)) for i in range(1000)))
    cut: list = []
    feed(cut, ((T0 + i, float(i % 13)) for i in range(437)))
    sym = Symptom(key="k", kind="q", family="f", entity=Entity("interface", "leaf01:swp1"), device="leaf01",
                  start=T0, last=T0 + 436, samples={"x": cut})
    again = symptom_from_wire(symptom_to_wire(sym)).samples["x"]  # a checkpoint's form
    back = StageEvent.from_bytes(StageEvent(SYMPTOM, T0, symptom=sym).to_bytes()).symptom.samples["x"]
    assert again == back == cut
    feed(back, ((T0 + i, float(i % 13)) for i in range(437, 1000)))
    assert back == whole


def test_a_symptom_without_samples_is_written_as_before_them():
    sym = Symptom(key="k", kind="q", family="f", entity=Entity("switch", "leaf01"), device="leaf01",
                  start=T0, last=T0)
    wire = symptom_to_wire(sym)
    assert "samples" not in wire  # what a format-2 checkpoint of the release before holds
    assert symptom_from_wire(wire).samples == {}
    assert sym.to_dict()["samples"] == {}


def record(t: float, occupancy: float) -> Metric:
    tags = {"host": "leaf01", "interface": "swp1", "queue": "3"}
    return Metric("switch_queue", tags, {"curr_occupancy_bytes": occupancy}, T0 + t,
                  "switch_queue,host=leaf01,interface=swp1,queue=3")


def test_the_detectors_symptom_samples_the_feature_its_rule_read(tmp_path: Path):
    path = tmp_path / "hot.yaml"
    path.write_text(HOT)
    d = Detector(load_rules([path]), {"leaf01": "leaf"})
    occupancy = [500, 2000, 3000, 2500, 9000, 4000, 1500]  # hot from t=1 on: three hits raise it
    for t, v in enumerate(occupancy):
        d.process(record(t, v))
    (sym,) = d.drain()
    assert sym.start == T0 + 1
    assert sym.samples == {"curr_occupancy_bytes": [(T0 + t, float(v)) for t, v in enumerate(occupancy) if t >= 1]}
    assert sym.metrics["curr_occupancy_bytes"] == 9000.0
    assert sym.to_dict()["samples"]["curr_occupancy_bytes"][0] == [T0 + 1, 2000.0]


def test_an_event_holds_the_samples_of_its_tick_not_later_ones(tmp_path: Path):
    path = tmp_path / "hot.yaml"
    path.write_text(HOT)
    d = Detector(load_rules([path]), {"leaf01": "leaf"})
    for t in range(4):
        d.process(record(t, 5000))
    (live,) = d.drain()
    snap = live.snapshot()
    d.process(record(4, 7000))
    assert len(live.samples["curr_occupancy_bytes"]) == 5
    assert len(snap.samples["curr_occupancy_bytes"]) == 4 and snap.metrics["curr_occupancy_bytes"] == 5000.0


def _symptom(key: str, points: list) -> Symptom:
    return Symptom(key=key, kind="queue_congested", family="congestion", entity=Entity("interface", "leaf01:swp1"),
                   device="leaf01", start=T0, last=T0 + len(points), rule="queue_hot",
                   samples={"curr_occupancy_bytes": list(points)})


@given(steps=st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(1, 8), st.booleans()), max_size=25))
def test_an_incident_shows_its_symptoms_samples_as_they_are_now(steps):
    """Incident.to_dict keeps each symptom's shown samples until the symptom is replaced
    (a new snapshot) or goes: what it shows is always what a first showing shows."""
    from engine.incidents import Incident
    inc = Incident(id="inc-1", opened_at=T0, updated_at=T0)
    for n, (key, length, drop) in enumerate(steps):
        if drop:
            inc.symptoms.pop(key, None)
        else:
            inc.symptoms[key] = _symptom(key, [(T0 + t, float(n * 10 + t)) for t in range(length)])
        fresh = Incident(id="inc-1", opened_at=T0, updated_at=T0, symptoms=dict(inc.symptoms))
        assert inc.to_dict() == fresh.to_dict()
    assert set(inc._shown) <= set(inc.symptoms) | {"a", "b", "c"}
