"""evaluation.fault_report: a line per fault of a tune probe (found or MISS, its delay),
the false incidents of a run, each interval's medians; and one run's symptoms traced as
the correlator receives them."""
from __future__ import annotations

import io

from evaluation.fault_report import fault_lines, main, trace
from sim.split import SplitEntry, build
from evaluation.split_report import run_score
from tests.test_split_report import FLAP, _inc, _truth


def test_each_fault_is_a_line_and_misses_false_incidents_and_medians_follow():
    # the flap found: published (detected_at) 2 s after it opened at +124 s, 6 s in
    runs = [run_score(_truth("flap-1s", 1, [FLAP]), [_inc(1, "link_flap", "a:1--b:1", 124),
                                                     _inc(2, "congestion", "p", 600)], 100),
            run_score(_truth("flap-10s", 10, [FLAP]), [], 50)]
    lines = fault_lines(runs)
    assert any(line.startswith("flap-1s") and "found" in line and "delay 6s" in line for line in lines)
    assert any(line.startswith("flap-1s") and "FALSE 1: congestion x1" in line for line in lines)
    assert any(line.startswith("flap-10s") and "MISS" in line for line in lines)
    assert "misses: 1" in lines and "- flap-10s at 10 s: link_flap a:1--b:1" in lines
    assert "1 s: median 6.0 s (6.0 samples) of 1 found/1 loud abrupt; median - of 0 gray; false incidents 1" in lines
    assert "10 s: median - of 1 loud abrupt; median - of 0 gray; false incidents 0" in lines


def test_a_built_probe_is_scored_and_one_runs_symptoms_traced(tmp_path, capsys):
    run = tmp_path / "probe" / "pfc_storm-0"
    truth = build(SplitEntry("pfc_storm-0", "pfc_storm", 100_000, 240.0), out=run, split="tune")
    nic = truth["faults"][0]["entity"]["id"]
    assert main([str(tmp_path / "probe"), "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert "pfc_storm-0" in out and " pfc_storm " in out and "found" in out and "misses: 0" in out
    buf = io.StringIO()
    trace(run, [nic.split(":")[0]], out=buf)
    text = buf.getvalue()
    assert f"fault pfc_storm {nic}" in text and "incident " in text and "pfc_storm" in text
    assert any(line.split()[1].startswith(nic.split(":")[0]) for line in text.splitlines()
               if not line.startswith(("fault", "incident")))
    assert main([str(tmp_path / "probe"), "--symptoms", "x"]) == 2  # no --run
    assert main([str(tmp_path / "nothing")]) == 2
