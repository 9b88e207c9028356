"""Stage 2 with several stage-1 sources (the Kafka workers: one per telemetry partition).

However the sources' events interleave on the symptoms topic, and whichever source starts
late, correlation reaches the incidents of the one-source replay; a partition that never
sends does not hold correlation back once the caller names it idle.
"""
import random
import zlib

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli.run import build_pipeline
from evaluation.scenarios import scenario_files
from engine.events import TICK, StageEvent
from engine.jobs import JobBook
from engine.pipeline import CorrelateStage, DetectStage
from engine.replay import open_lines
from engine.topology import load_topology
from rules.loader import load_rules
from streams.sources import Sources, telemetry_sources

SOURCES = ("fabric.telemetry:0", "fabric.telemetry:1")


@pytest.fixture(scope="module")
def material(scenario_dir):
    files = scenario_files(scenario_dir("pfc_storm", duration=240, seed=11))
    lines = list(open_lines(files["telemetry"]))
    topology = load_topology(files["topology"])
    parts: dict[str, list[bytes]] = {s: [] for s in SOURCES}
    for line in lines:  # by host, as the publisher keys the telemetry topic
        doc = orjson.loads(line)
        host = (doc["metrics"][0] if "metrics" in doc else doc)["tags"]["host"]
        parts[SOURCES[zlib.crc32(host.encode()) % 2]].append(line)
    assert all(parts.values())
    return files, topology, lines, parts


def _correlate(files, topology, sources=SOURCES) -> CorrelateStage:
    return CorrelateStage(topology=topology, rules=load_rules(None), jobs=JobBook.from_file(files["jobs"]),
                          sources=sources)


def _final(changes: list[dict]) -> dict[str, dict]:
    return {c["id"]: c for c in changes}


@pytest.fixture(scope="module")
def replayed(material):
    files, topology, lines, _ = material
    p = build_pipeline(topology=topology, jobs_file=files["jobs"], rule_files=None)
    for line in lines:
        p.feed(line)
    p.finish()
    out = _final(p.changes())
    assert out, "the scenario must produce an incident"
    return out


def _run(material, order: list[str], sources=SOURCES) -> dict[str, dict]:
    """Feed each source's lines to its own stage 1, taking sources in `order` (one line
    per entry); hand every event to stage 2 as it is emitted, advancing after each line."""
    files, topology, _, parts = material
    roles = {d: topology.role(d) for d in topology.devices()}
    detect = {s: DetectStage(rules=load_rules(None), roles=roles, source=s) for s in SOURCES}
    at = dict.fromkeys(SOURCES, 0)
    correlate = _correlate(files, topology, sources)
    changes: list[dict] = []
    for s in order + [s for s in SOURCES for _ in range(len(parts[s]))]:
        if at[s] >= len(parts[s]):
            continue
        detect[s].feed(parts[s][at[s]])
        at[s] += 1
        for e in detect[s].events():
            correlate.add(e)
        correlate.advance()
        changes += correlate.changes()
    for s in SOURCES:
        detect[s].finish()
        for e in detect[s].events():
            correlate.add(e)
    correlate.advance()
    return _final(changes + correlate.changes())


@pytest.mark.slow
@pytest.mark.parametrize("first", SOURCES)
def test_a_source_that_starts_late_changes_nothing(material, replayed, first):
    """One partition's whole stream before the other's first line: the worst arrival order."""
    _, _, _, parts = material
    assert _run(material, [first] * len(parts[first])) == replayed


@pytest.mark.slow
@settings(max_examples=8, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), bias=st.floats(0.05, 0.95))
def test_any_interleaving_of_sources_gives_the_replays_incidents(material, replayed, seed, bias):
    _, _, _, parts = material
    rng = random.Random(seed)
    order = [SOURCES[0] if rng.random() < bias else SOURCES[1] for _ in range(sum(map(len, parts.values())))]
    assert _run(material, order) == replayed


def _tick(source: str, t: float) -> StageEvent:
    return StageEvent(TICK, t, source)


def test_nothing_is_applied_until_every_named_source_ticked_or_is_idle(material):
    files, topology, _, _ = material
    stage = _correlate(files, topology, sources=(*SOURCES, "fabric.telemetry:2"))
    for t in (10.0, 11.0):
        for s in SOURCES:
            stage.add(_tick(s, t))
    stage.advance()
    assert stage.applied_to == float("-inf")
    assert stage.waiting_for() == ["fabric.telemetry:2"]
    stage.advance(idle={"fabric.telemetry:2"})
    assert stage.applied_to == 11.0
    assert stage.waiting_for({"fabric.telemetry:2"}) == []


def test_an_idle_source_that_comes_back_late_is_applied_not_dropped(material):
    files, topology, _, parts = material
    roles = {d: topology.role(d) for d in topology.devices()}
    late, on_time = SOURCES
    stage = _correlate(files, topology)
    detect = DetectStage(rules=load_rules(None), roles=roles, source=on_time)
    for line in parts[on_time]:
        detect.feed(line)
        for e in detect.events():
            stage.add(e)
        stage.advance(idle={late})
    before = stage.applied_to
    assert before > 0 and stage.late == 0

    behind = DetectStage(rules=load_rules(None), roles=roles, source=late)
    for line in parts[late]:
        behind.feed(line)
    behind.finish()
    events = behind.events()
    old = [e for e in events if e.kind != TICK and e.tick <= before]
    assert old, "the late source must have something to say for this test to mean anything"
    applied = [before]
    for e in events:
        stage.add(e)
        stage.advance()
        applied.append(stage.applied_to)
    assert stage.late == len(old)  # applied on arrival, none dropped as a duplicate
    assert stage.duplicates == 0
    assert applied == sorted(applied)  # correlation time never goes back


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_sources_idle_only_while_others_are_heard():
    clock = Clock()
    expected = telemetry_sources({"t": 3})
    assert expected == {"t:0", "t:1", "t:2"}
    src = Sources(expected, idle_s=30, clock=clock)
    assert src.idle() == frozenset()  # nothing heard yet: nobody is idle
    for second in range(0, 31):
        clock.now = second
        src.tick("t:0")
        src.tick("t:1")
    assert src.idle() == {"t:2"}  # never sent while the others did, for 30 s
    clock.now = 100.0  # every source silent (broker away): silence of all is not idleness of one
    assert src.idle() == {"t:2"}
    src.tick("t:2")  # the others have been silent 70 s while it is heard
    assert src.idle() == {"t:0", "t:1"}
    for s in expected:  # the broker is back: everyone sends
        src.tick(s)
    assert src.idle() == frozenset()
    clock.now = 140.0
    src.tick("t:0")
    assert src.idle() == {"t:1", "t:2"}


def test_a_source_is_not_idle_before_the_limit():
    clock = Clock()
    clock.now = 500.0  # the stage has been up a while (jobs arrived) before any telemetry
    src = Sources(frozenset({"a", "b"}), idle_s=30, clock=clock)
    src.tick("a")
    assert src.idle() == frozenset()  # silence before the first tick does not count
    clock.now = 529.0
    src.tick("a")
    assert src.idle() == frozenset()
    clock.now = 530.0
    assert src.idle() == {"b"}


def test_a_partition_never_heard_from_is_idle_even_when_the_telemetry_ends():
    clock = Clock()
    src = Sources(frozenset({"a", "b"}), idle_s=30, clock=clock)
    src.tick("a")
    clock.now = 2.0
    src.tick("a")  # a short replay: done in 2 s, then nothing
    clock.now = 31.0
    assert src.idle() == {"b"}


def test_a_batch_of_events_round_trips_as_single_events_do(material):
    from engine.events import decode_batch, encode_batch

    files, topology, _, parts = material
    roles = {d: topology.role(d) for d in topology.devices()}
    stage = DetectStage(rules=load_rules(None), roles=roles, source=SOURCES[0])
    events = []
    for line in parts[SOURCES[0]]:
        stage.feed(line)
        events += stage.events()
    assert any(e.symptom is not None for e in events) and any(e.kind == TICK for e in events)
    singles = [StageEvent.from_bytes(e.to_bytes()) for e in events]
    assert decode_batch(encode_batch(events)) == singles
    assert decode_batch(events[0].to_bytes()) == singles[:1]  # a single event is a batch of one
    assert decode_batch(encode_batch([])) == []
