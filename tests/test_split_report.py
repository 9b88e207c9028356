"""docs/accuracy.md's figures from result objects: per cause and sample interval, a
cause's precision counts the incidents whose top cause it is, its false incidents per
clean hour only the clean runs; the per-interval totals are the engine's overall
figures over that interval's runs. Runs are written by hand (truth + incidents), so
each expected figure is counted from the timeline, not from the code."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from contract.times import rfc3339
from evaluation.split_report import Cell, accuracy_doc, cells, gray_by_interval, interval_totals, run_score

T0 = 1_764_400_000.0
FLAP = {"cause": "link_flap", "entity": {"kind": "link", "id": "a:1--b:1"}, "start": T0 + 120,
        "end": T0 + 200, "affected_jobs": []}


def _truth(name: str, interval: int, faults: list[dict], hours: float = 0.25) -> dict:
    return {"scenario": name, "clean": not faults, "duration_s": hours * 3600, "faults": faults,
            "intensity": "strong", "split": "tune",
            "realism": {"interval_s": interval, "shape": "two_tier"}}


def _inc(k: int, cause: str, entity: str, opened: float) -> dict:
    return {"id": f"i{k}", "opened_at": rfc3339(T0 + opened), "detected_at": rfc3339(T0 + opened + 2),
            "root_causes": [{"cause": cause, "entity": {"kind": "x", "id": entity}, "rank": 1}],
            "affected_jobs": []}


def _runs():
    return [
        # 1 s: the flap found (one incident), plus a congestion incident far from it: false
        run_score(_truth("flap-1s", 1, [FLAP]), [_inc(1, "link_flap", "a:1--b:1", 121),
                                                 _inc(2, "congestion", "p", 600)], 100),
        # 10 s: the flap found twice (the second is false) ...
        run_score(_truth("flap-10s", 10, [FLAP]), [_inc(3, "link_flap", "a:1--b:1", 130),
                                                   _inc(4, "link_flap", "a:1--b:1", 150)], 50),
        # ... and a clean 15 min opening one congestion incident
        run_score(_truth("clean-10s", 10, []), [_inc(5, "congestion", "q", 300)], 40),
        run_score(_truth("clean-1s", 1, [], hours=0.5), [], 80),
    ]


def _cell(cs: list[Cell], cause, interval) -> Cell:
    return next(c for c in cs if c.cause == cause and c.interval == interval)


def test_cause_cells_count_precision_by_top_cause_and_false_on_clean_runs_only():
    cs = cells(_runs())
    flap1, flap10, flap = (_cell(cs, "link_flap", iv) for iv in (1, 10, None))
    assert (flap1.faults, flap1.precision, flap1.recall, flap1.top1, flap1.delay_median) == (1, 1.0, 1.0, 1.0, 3.0)
    assert (flap10.precision, flap10.false_per_clean_hour, flap10.delay_median) == (0.5, 0.0, 12.0)
    assert flap.precision == pytest.approx(2 / 3) and flap.faults == 2
    cong1, cong10 = _cell(cs, "congestion", 1), _cell(cs, "congestion", 10)
    assert cong1.faults == 0 and cong1.precision == 0.0 and cong1.false_per_clean_hour == 0.0  # a fault run's
    assert cong10.precision == 0.0 and cong10.false_per_clean_hour == pytest.approx(4.0)  # 1 in 0.25 h
    assert cong1.recall is None  # no congestion fault to recall
    assert _cell(cs, "congestion", None).false_per_clean_hour == pytest.approx(1 / 0.75)


def test_interval_totals_are_the_overall_figures_of_each_interval():
    one, ten, every = interval_totals(_runs())
    assert (one.interval, one.runs, one.clean_hours, one.faults) == (1, 2, 0.5, 1)
    assert one.precision == 0.5 and one.false_per_clean_hour == 0.0
    assert (ten.runs, ten.clean_hours) == (2, 0.25)
    assert ten.precision == pytest.approx(1 / 3) and ten.false_per_clean_hour == pytest.approx(4.0)
    assert every.interval is None and every.precision == pytest.approx(2 / 5) and every.recall == 1.0


def test_the_doc_has_the_interval_as_a_column_and_says_how_the_split_is_kept_honest():
    text = accuracy_doc(_runs(), split="test", seconds=3.0)
    assert text.startswith("# Diagnosis accuracy on the held-out test split")
    assert "How the split is kept honest" in text and "accuracy-classic.md" in text
    rows = [line for line in text.splitlines() if line.startswith("| link_flap | ")]
    assert [r.split(" | ")[1] for r in rows[:3]] == ["1", "10", "all"]
    assert "| 10 | 2 | 0.25 | 1 | 0.33 | 4.00 |" in text
    assert "NOT the held-out" in accuracy_doc(_runs(), split="tune", seconds=3.0)


def test_a_run_without_realism_is_refused_with_the_command_to_build_a_split():
    with pytest.raises(ValueError, match="--split"):
        run_score({"scenario": "pfc_storm", "faults": [], "duration_s": 60}, [], 0)


def test_the_command_refuses_a_classic_run_and_a_missing_folder(tmp_path):
    run = tmp_path / "suite" / "pfc"
    run.mkdir(parents=True)
    (run / "truth.json").write_text(json.dumps({"scenario": "pfc", "faults": [], "duration_s": 60}))
    for arg, why in ((tmp_path / "suite", "--split tune|test"), (tmp_path / "none", "no such folder")):
        out = subprocess.run([sys.executable, "-m", "evaluation.split_report", str(arg)], capture_output=True,
                             text=True, cwd=Path(__file__).resolve().parents[1])
        assert out.returncode == 2 and out.stderr.startswith("error:") and why in out.stderr, out.stderr


def test_history_models_are_retrained_when_the_training_code_changed(scenario_dir, tmp_path, monkeypatch):
    """Models cached beside a run's history are reused only if the code that trained them
    is today's (`training_code`): after a change to models/ a score must not silently read
    the models of before."""
    import shutil

    import evaluation.scenarios as scenarios

    run = tmp_path / "hist" / "clean-0"
    shutil.copytree(scenario_dir("clean", duration=60), run)
    scenarios.history_models(tmp_path / "hist", "clean-0")
    stamp, saved = run / "models" / "TRAINED_BY", run / "models" / "models.joblib"
    assert stamp.read_text().strip() == scenarios.training_code()
    first = saved.stat().st_mtime_ns
    scenarios.history_models(tmp_path / "hist", "clean-0")
    assert saved.stat().st_mtime_ns == first  # the same code: reused
    monkeypatch.setattr(scenarios, "training_code", lambda: "other-code")
    assert scenarios.history_models(tmp_path / "hist", "clean-0") is not None
    assert stamp.read_text().strip() == "other-code" and saved.stat().st_mtime_ns != first


def test_an_intervals_abrupt_delay_leaves_gray_and_gradual_faults_out_and_is_given_in_samples():
    """The 10 s interval holds a loud abrupt fault found 40 s late, a gray one (abrupt
    onset, low) found 300 s late and a gradual one 200 s late: only the first is the
    abrupt delay, 4 samples of 10 s."""
    def fault(cause, entity, **kw):
        return {"cause": cause, "entity": {"kind": "x", "id": entity}, "start": T0 + 100, "end": T0 + 900,
                "affected_jobs": []} | kw
    faults = [fault("pfc_storm", "h:1"), fault("pfc_storm", "h:2", gray=True),
              fault("link_degraded", "l", onset="gradual", gray=True)]
    incs = [_inc(1, "pfc_storm", "h:1", 138), _inc(2, "pfc_storm", "h:2", 398), _inc(3, "link_degraded", "l", 298)]
    ten, _ = interval_totals([run_score(_truth("three-10s", 10, faults), incs, 10)])
    assert ten.delay_median == 200.0 and ten.abrupt_delay == 40.0
    doc = accuracy_doc([run_score(_truth("three-10s", 10, faults), incs, 10)], split="tune", seconds=1.0)
    assert "| 200 | 40.00 | 4.00 |" in doc


def test_gray_delay_is_given_per_sample_interval():
    """Issue 12's gray target is at 1 s sampling: a gray fault found 30 s late at 1 s and
    one found 300 s late at 30 s are two medians, not one of 165 s."""
    def gray(entity):
        return {"cause": "nic_degraded", "entity": {"kind": "x", "id": entity}, "start": T0 + 100,
                "end": T0 + 900, "affected_jobs": [], "onset": "gradual", "gray": True}
    runs = [run_score(_truth("g-1s", 1, [gray("h:1")]), [_inc(1, "nic_degraded", "h:1", 128)], 10),
            run_score(_truth("g-30s", 30, [gray("h:2")]), [_inc(2, "nic_degraded", "h:2", 398)], 10)]
    line = gray_by_interval(runs)
    assert line == ("Gray failures per sample interval: 1 s: 1 faults, recall 1.00, median 30.00 s; "
                    "30 s: 1 faults, recall 1.00, median 300 s.")
    assert line in accuracy_doc(runs, split="tune", seconds=1.0)
