"""Checkpoints: a stage restored from a snapshot continues exactly as if never stopped,
and events a restarted stage sends again are recognised as duplicates."""
import pytest

from cli.run import build_pipeline
from evaluation.scenarios import scenario_files
from engine.pipeline import CorrelateStage, DetectStage
from engine.replay import open_lines
from engine.topology import load_topology

pytestmark = pytest.mark.slow


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


def test_snapshot_of_another_version_is_refused(material):
    import pickle
    import zlib

    files, _ = material
    detect, _ = _stages(files)
    with pytest.raises(ValueError, match="snapshot version"):
        detect.restore(zlib.compress(pickle.dumps({"version": 999, "state": {}})))
