"""Checkpoints: a stage restored from a snapshot continues exactly as if never stopped,
events a restarted stage sends again are recognised as duplicates, and a checkpoint read
from Kafka is untrusted data: anything but this format's typed state is refused."""
import pickle
import zlib
from pathlib import Path

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cli.run import build_pipeline
from engine import checkpoint
from engine.checkpoint import CHECKPOINT_VERSION, MAX_CHECKPOINT_BYTES, CheckpointError
from engine.incidents import IncidentState
from engine.order import Reorderer
from engine.pipeline import CorrelateStage, DetectStage, EngineConfig
from evaluation.scenarios import scenario_files
from models.scorer import ScorerState
from engine.replay import open_lines
from engine.topology import load_topology
from engine.types import Metric
from rules.loader import load_rules

DATA = Path(__file__).parent / "data"
slow = pytest.mark.slow


@pytest.fixture(scope="module")
def material(tmp_path_factory):
    import sim

    out = tmp_path_factory.mktemp("ckpt")
    sim.simulate(out=out, scenario="pfc_storm", seed=11, duration=240)
    files = scenario_files(out)
    lines = list(open_lines(files["telemetry"]))
    return files, lines


def _stages(files):
    p = build_pipeline(topology=load_topology(files["topology"]), jobs_file=files["jobs"], rule_files=None)
    return p.detect, p.correlate


def _run(detect: DetectStage, correlate: CorrelateStage, lines, *, finish: bool) -> dict[str, dict]:
    latest = {}
    for line in lines:
        detect.feed(line)
        for e in detect.events():
            correlate.add(e)
        correlate.advance()
    if finish:
        detect.finish()
        for e in detect.events():
            correlate.add(e)
        correlate.advance()
    for inc in correlate.changes():
        latest[inc["id"]] = inc
    return latest


@pytest.fixture(scope="module")
def uninterrupted(material):
    files, lines = material
    out = _run(*_stages(files), lines, finish=True)
    assert out, "the scenario must produce an incident"
    return out


@slow
@pytest.mark.parametrize("cut", [0.3, 0.55, 0.8])
def test_restored_stages_continue_exactly(material, uninterrupted, cut):
    files, lines = material
    k = int(len(lines) * cut)
    detect, correlate = _stages(files)
    first = _run(detect, correlate, lines[:k], finish=False)
    d_blob, c_blob = detect.snapshot(), correlate.snapshot()

    detect2, correlate2 = _stages(files)  # a new process: fresh objects from the same files
    detect2.restore(d_blob)
    correlate2.restore(c_blob)
    second = _run(detect2, correlate2, lines[k:], finish=True)
    assert {**first, **second} == uninterrupted


@slow
def test_replayed_events_after_a_crash_are_dropped(material, uninterrupted):
    """Stage 1 crashes after its last snapshot and re-reads from there: stage 2 (still
    running) receives that stretch's events twice and must apply them once."""
    files, lines = material
    k1, k2 = int(len(lines) * 0.4), int(len(lines) * 0.6)
    detect, correlate = _stages(files)
    seen = _run(detect, correlate, lines[:k1], finish=False)
    blob = detect.snapshot()
    seen |= _run(detect, correlate, lines[k1:k2], finish=False)  # work lost with the crash

    restarted, _ = _stages(files)
    restarted.restore(blob)
    seen |= _run(restarted, correlate, lines[k1:], finish=True)
    assert correlate.duplicates > 0
    assert seen == uninterrupted



# --- round trips: events and incidents, with and without models ----------------------
def _events_and_incidents(make, lines, cut: int | None):
    """Run both stages over `lines`, replacing both with fresh ones restored from their
    checkpoints before line `cut`: (every event stage 1 sent, as bytes; incident changes)."""
    detect, correlate = make()
    events, changes = [], []
    for n, line in enumerate(lines):
        if n == cut:
            d_blob, c_blob = detect.snapshot(), correlate.snapshot()
            detect, correlate = make()
            detect.restore(d_blob)
            correlate.restore(c_blob)
        detect.feed(line)
        for e in detect.events():
            events.append(e.to_bytes())
            correlate.add(e)
        correlate.advance()
        changes += correlate.changes()
    detect.finish()
    for e in detect.events():
        events.append(e.to_bytes())
        correlate.add(e)
    correlate.advance()
    return events, changes + correlate.changes()


@slow
@pytest.mark.parametrize("cut", [0.25, 0.5, 0.9])
def test_a_round_trip_mid_stream_sends_the_same_events_and_incidents(material, cut):
    files, lines = material
    whole = _events_and_incidents(lambda: _stages(files), lines, None)
    assert whole[0] and whole[1]
    assert _events_and_incidents(lambda: _stages(files), lines, int(len(lines) * cut)) == whole


@pytest.fixture(scope="module")
def learning(scenario_dir):
    """Models trained quickly (2 minutes of a clean fabric), learning online at run time,
    and a storage fault for them to find."""
    from models.train import train

    clean = scenario_files(scenario_dir("clean", seed=11, duration=120))
    models, _ = train([clean["telemetry"]], topologies=[load_topology(clean["topology"])], seed=3)
    files = scenario_files(scenario_dir("storage_slow", seed=12, duration=150))
    return files, models, list(open_lines(files["telemetry"]))


@slow
def test_a_round_trip_with_models_learning_online_continues_exactly(learning):
    files, models, lines = learning
    config = EngineConfig(learn_rate=0.05)

    def make():
        p = build_pipeline(topology=load_topology(files["topology"]), jobs_file=files["jobs"], rule_files=None,
                           config=config, models=models)
        return p.detect, p.correlate

    whole = _events_and_incidents(make, lines, None)
    assert any(b"model:" in e for e in whole[0]), "the models must raise a symptom"
    detect, _ = make()
    for line in lines[: len(lines) // 2]:
        detect.feed(line)
    state = msgspec.msgpack.decode(detect.state().scorer, type=ScorerState)  # the scorer's own encoding
    assert state.online and state.smoother.ewm and state.cutter.slots  # the models' state is in it
    assert _events_and_incidents(make, lines, len(lines) // 2) == whole


@slow
def test_a_checkpoint_without_models_is_refused_by_a_stage_with_models(learning, material):
    files, models, _ = learning
    plain = DetectStage(rules=load_rules(None), roles={})
    plain.feed(material[1][0])
    modelled = DetectStage(rules=load_rules(None), roles={}, scorer=models.scorer())
    fresh = checkpoint.encode(modelled.state())
    with pytest.raises(CheckpointError, match="without models"):
        modelled.restore(plain.snapshot())
    assert checkpoint.encode(modelled.state()) == fresh


# --- the reorderer: property ---------------------------------------------------------
records = st.lists(st.tuples(st.integers(0, 3), st.floats(0, 60, allow_nan=False), st.integers(0, 9)), max_size=80)


def _reorder(recs, cut: int | None) -> list[tuple]:
    r = Reorderer(lateness_s=3.0)
    out = []
    for n, (s, ts, v) in enumerate(recs):
        if n == cut:
            state = msgspec.msgpack.decode(msgspec.msgpack.encode(r.snapshot()), type=type(r.snapshot()))
            r = Reorderer(lateness_s=3.0)
            r.restore(state)
        rejects = []
        released = r.push([Metric("m", {"host": f"h{s}"}, {"v": v, "f": v / 2}, ts, f"m|h{s}")], rejects)
        out += [(m.series, m.ts, m.fields) for m in released] + [(x.reason, x.detail) for x in rejects]
    return out + [(m.series, m.ts, m.fields) for m in r.flush()] + [("duplicates", r.duplicates)]


@given(records, st.integers(0, 80))
def test_a_reorderer_restored_anywhere_releases_what_the_uninterrupted_one_does(recs, cut):
    assert _reorder(recs, cut) == _reorder(recs, None)


# --- untrusted input -----------------------------------------------------------------
class _Plant:
    """Unpickled, it would create a file: `open(path, "w")`."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def _fresh_detect() -> DetectStage:
    return DetectStage(rules=load_rules(None), roles={})


def _payloads(path) -> dict[str, bytes]:
    plant = _Plant(path)
    body = pickle.dumps({"version": 1, "state": {"stage": plant}}, protocol=pickle.HIGHEST_PROTOCOL)
    header = {"format": checkpoint.FORMAT, "version": CHECKPOINT_VERSION, "kind": "detect"}
    return {
        "old format": zlib.compress(body, 1),
        "old format, protocol 2": zlib.compress(pickle.dumps(plant, protocol=2)),
        "new header, pickle inside": zlib.compress(msgspec.msgpack.encode([header, body])),
        "new header, pickle as the state's fields": zlib.compress(msgspec.msgpack.encode(
            [header, {"stats": body, "reorder": body}])),
    }


@pytest.mark.parametrize("name", ["old format", "old format, protocol 2", "new header, pickle inside",
                                  "new header, pickle as the state's fields"])
def test_a_crafted_pickle_is_refused_and_never_run(tmp_path, name):
    planted = tmp_path / "planted"
    data = _payloads(planted)[name]
    assert not planted.exists()
    stage = _fresh_detect()
    fresh = checkpoint.encode(stage.state())
    with pytest.raises(CheckpointError) as err:
        stage.restore(data)
    assert not planted.exists(), "the payload ran"
    assert checkpoint.encode(stage.state()) == fresh  # the stage is as it was
    if name.startswith("old"):
        assert "format 1 (pickle" in str(err.value) and f"(format {CHECKPOINT_VERSION})" in str(err.value)
    with pytest.raises(CheckpointError):
        CorrelateStage(topology=load_topology(DATA / "air.dot"), rules=load_rules(None)).restore(data)
    assert not planted.exists()


def test_the_previous_releases_checkpoint_is_refused_naming_both_versions():
    data = (DATA / "checkpoint-v1-detect.bin").read_bytes()
    with pytest.raises(CheckpointError, match=r"checkpoint format 1 \(pickle, fabric-rca <= 0\.1\) is not read "
                                              rf"by this worker \(format {CHECKPOINT_VERSION}\)"):
        _fresh_detect().restore(data)


def test_the_current_formats_fixture_restores():
    """Fails at the next format change: write the new fixture (tests/data/make_checkpoints.py)."""
    data = (DATA / f"checkpoint-v{CHECKPOINT_VERSION}-detect.bin").read_bytes()
    stage = _fresh_detect()
    stage.restore(data)
    assert stage.stats.lines == 1760 and stage.stats.records >= 1760
    assert stage.detector.extractor.series and stage.reorder.watermark > 0
    # Lossless: the restored state writes the same checkpoint again.
    assert checkpoint.inflate(stage.snapshot()) == checkpoint.inflate(data)


def test_a_checkpoint_of_a_newer_format_is_refused_naming_both():
    header = {"format": checkpoint.FORMAT, "version": CHECKPOINT_VERSION + 1, "kind": "detect"}
    with pytest.raises(CheckpointError, match=rf"format {CHECKPOINT_VERSION + 1} .* \(format {CHECKPOINT_VERSION}\)"):
        _fresh_detect().restore(zlib.compress(msgspec.msgpack.encode([header, {}])))


def test_a_checkpoint_of_the_other_stage_is_refused():
    blob = _fresh_detect().snapshot()
    with pytest.raises(CheckpointError, match="of a 'detect' stage, not of a 'correlate' stage"):
        CorrelateStage(topology=load_topology(DATA / "air.dot"), rules=load_rules(None)).restore(blob)


def test_oversize_checkpoints_are_refused_before_they_are_inflated(monkeypatch):
    assert MAX_CHECKPOINT_BYTES == 256 * 1024 * 1024
    monkeypatch.setattr(checkpoint, "MAX_CHECKPOINT_BYTES", 1 << 20)
    bomb = zlib.compress(b"\0" * (8 << 20), 9)  # 8 MiB of zeros in about 8 KiB
    with pytest.raises(CheckpointError, match="inflates to over the limit of 1048576 bytes"):
        _fresh_detect().restore(bomb)
    with pytest.raises(CheckpointError, match=r"checkpoint of 1048577 bytes is over the limit"):
        _fresh_detect().restore(b"x" * ((1 << 20) + 1))


def test_inflation_stops_at_the_bound():
    out = []
    real = zlib.decompressobj

    class Spy:
        def __init__(self):
            self.d = real()

        def decompress(self, data, max_length=0):
            assert max_length > 0, "inflating without a bound"
            chunk = self.d.decompress(data, max_length)
            out.append(len(chunk))
            return chunk

        def __getattr__(self, name):
            return getattr(self.d, name)

    bomb = zlib.compress(b"\0" * (64 << 20), 9)
    zlib.decompressobj, saved = Spy, zlib.decompressobj
    try:
        with pytest.raises(CheckpointError, match="over the limit"):
            checkpoint.decode(bomb, "detect", limit=4 << 20)
    finally:
        zlib.decompressobj = saved
    assert sum(out) <= (4 << 20) + (1 << 20)  # never more than the bound and one chunk


@pytest.mark.parametrize("keep", [0.1, 0.5, 0.99])
def test_truncated_checkpoints_are_refused(keep):
    data = (DATA / f"checkpoint-v{CHECKPOINT_VERSION}-detect.bin").read_bytes()
    with pytest.raises(CheckpointError, match="truncated"):
        _fresh_detect().restore(data[: int(len(data) * keep)])
    body = checkpoint.inflate(data)
    with pytest.raises(CheckpointError, match="does not validate|no header"):
        _fresh_detect().restore(zlib.compress(body[: int(len(body) * keep)]))


@pytest.mark.parametrize("data", [b"", b"\x78\x9c", b"not zlib at all", zlib.compress(b"\x93\x01\x02\x03"),
                                  zlib.compress(b"{}") + b"trailing"])
def test_garbage_is_refused_with_a_reason(data):
    with pytest.raises(CheckpointError, match=r"\S"):
        _fresh_detect().restore(data)


@given(st.binary(max_size=300))
def test_any_bytes_are_a_checkpoint_or_a_checkpoint_error(data):
    for blob in (data, zlib.compress(data)):
        try:
            checkpoint.decode(blob, "detect")
        except CheckpointError:
            pass


def test_a_detect_checkpoint_naming_an_unknown_rule_leaves_the_stage_fresh():
    data = (DATA / f"checkpoint-v{CHECKPOINT_VERSION}-detect.bin").read_bytes()
    state = checkpoint.decode(data, "detect")
    bad = msgspec.structs.replace(state, detector=msgspec.structs.replace(
        state.detector, hits=[("no_such_rule", "leaf01", [(1.0, {})])]))
    stage = _fresh_detect()
    fresh = checkpoint.encode(stage.state())
    with pytest.raises(CheckpointError, match="rule 'no_such_rule', which is not loaded"):
        stage.restore(checkpoint.encode(bad))
    assert checkpoint.encode(stage.state()) == fresh


@slow
def test_a_cut_while_symptoms_wait_for_their_tick_loses_none(material):
    """A symptom starts (or ends) on a record and is handed over at the next tick; a
    checkpoint between the two keeps it, as the same object the detector still updates."""
    files, lines = material
    detect, _ = _stages(files)
    cuts = []
    for n, line in enumerate(lines):
        detect.feed(line)
        detect.events()
        if detect.detector._out and len(cuts) < 3:
            cuts.append(n + 1)
    assert cuts, "no line leaves a symptom waiting for its tick"
    whole = _events_and_incidents(lambda: _stages(files), lines, None)
    for cut in cuts:
        assert _events_and_incidents(lambda: _stages(files), lines, cut) == whole


@slow
def test_a_waiting_symptom_is_restored_as_the_active_one_not_a_copy(material):
    files, lines = material
    detect, _ = _stages(files)
    for line in lines:
        detect.feed(line)
        detect.events()
        d = detect.detector
        if any(s is a for s in d._out for a in d.active.values()):
            break
    else:
        pytest.fail("no active symptom ever waits for its tick")
    restored, _ = _stages(files)
    restored.restore(detect.snapshot())
    d = restored.detector
    assert [s.key for s in d._out] == [s.key for s in detect.detector._out]
    assert any(s is a for s in d._out for a in d.active.values())


def test_a_correlate_checkpoint_that_does_not_hold_together_leaves_the_stage_fresh():
    stage = CorrelateStage(topology=load_topology(DATA / "air.dot"), rules=load_rules(None))
    fresh = checkpoint.encode(stage.state())
    state = stage.state()
    hollow = IncidentState(id="inc-x", opened_at=1.0, updated_at=1.0, symptoms=[], status="open", detected_at=None,
                           resolved_at=None, root_causes=[], affected_jobs=[], hosts_affected=0, severity="minor",
                           received_at=0.0, can_open=False, dirty=True)
    bad = msgspec.structs.replace(state, ticks={"p0": 5.0},
                                  correlator=msgspec.structs.replace(state.correlator, open=[hollow]))
    with pytest.raises(CheckpointError, match="incident inc-x without symptoms"):
        stage.restore(checkpoint.encode(bad))
    assert checkpoint.encode(stage.state()) == fresh
