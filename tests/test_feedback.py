"""Operator feedback: verdicts through the API and the CLI on every backend, field
precision per cause (per day and in /metrics), and export -> evaluate round trips."""
from __future__ import annotations

import json

import httpx
import pytest
from sqlmodel import Session

from api.feedback import precision_table
from api.server import running_server
from api.store.db import create_schema, make_engine
from api.store.repository import upsert_incidents
from testkit.metrics import scrape
from tests.test_notify import incident


def _store(db_url, incidents):
    engine = make_engine(db_url)
    create_schema(engine)
    with Session(engine) as session:
        upsert_incidents(session, incidents=incidents)


def _incidents():
    day2 = incident("inc-4", cause="congestion") | {"opened_at": "2025-11-30T01:00:00.000Z"}
    return [incident("inc-1"), incident("inc-2"), incident("inc-3", cause="congestion"), day2]


def test_precision_counts_the_latest_verdict_per_incident_and_leaves_duplicates_out():
    v = [{"cause": "pfc_storm", "incident_opened_at": "2025-11-29T07:00:00.000Z", "verdict": x}
         for x in ("confirmed", "confirmed", "false_alarm", "wrong_cause", "duplicate_of")]
    assert precision_table(v) == [{"cause": "pfc_storm", "day": "2025-11-29", "confirmed": 2, "false_alarm": 1,
                                   "wrong_cause": 1, "duplicate_of": 1, "precision": 0.5}]
    only_dup = [v[-1]]
    assert precision_table(only_dup, by_day=False)[0]["precision"] is None


def test_verdicts_through_the_api_give_precision_per_cause_and_day_and_metrics(db_url):
    _store(db_url, _incidents())
    with running_server(db_url=db_url, auth="none") as url:
        def post(iid, **body):
            return httpx.post(f"{url}/incidents/{iid}/feedback", json=body)

        assert post("inc-1", verdict="false_alarm").status_code == 201
        first = post("inc-1", verdict="confirmed", note="was real after all")  # the latest counts
        assert first.status_code == 201 and first.json()["cause"] == "pfc_storm"
        assert post("inc-2", verdict="wrong_cause", right_cause="congestion", right_entity="leaf02:swp2").status_code == 201
        assert post("inc-3", verdict="duplicate_of", duplicate_of="inc-4").status_code == 201
        assert post("inc-4", verdict="false_alarm").status_code == 201
        precision = httpx.get(f"{url}/feedback/precision").json()
        assert precision == [
            {"cause": "congestion", "day": "2025-11-29", "confirmed": 0, "false_alarm": 0, "wrong_cause": 0,
             "duplicate_of": 1, "precision": None},
            {"cause": "congestion", "day": "2025-11-30", "confirmed": 0, "false_alarm": 1, "wrong_cause": 0,
             "duplicate_of": 0, "precision": 0.0},
            {"cause": "pfc_storm", "day": "2025-11-29", "confirmed": 1, "false_alarm": 0, "wrong_cause": 1,
             "duplicate_of": 0, "precision": 0.5},
        ]
        assert [f["verdict"] for f in httpx.get(f"{url}/incidents/inc-1/feedback").json()] == ["false_alarm", "confirmed"]
        figures = scrape(url)
    assert figures['fabric_rca_field_precision{cause="pfc_storm"}'] == 0.5
    assert figures['fabric_rca_field_precision{cause="congestion"}'] == 0.0
    assert figures['fabric_rca_feedback_verdicts{cause="pfc_storm",verdict="wrong_cause"}'] == 1


@pytest.mark.parametrize("body, field, words", [
    ({"verdict": "maybe"}, "verdict", "Input should be"),
    ({"verdict": "wrong_cause", "right_entity": "leaf02:swp2"}, "right_cause", "needs right_cause"),
    ({"verdict": "wrong_cause", "right_cause": "congestion"}, "right_entity", "needs right_entity"),
    ({"verdict": "wrong_cause", "right_cause": "bogus", "right_entity": "x"}, "right_cause", "Input should be"),
    ({"verdict": "confirmed", "right_cause": "congestion"}, "right_cause", "wrong_cause verdict only"),
    ({"verdict": "duplicate_of"}, "duplicate_of", "needs duplicate_of"),
    ({"verdict": "duplicate_of", "duplicate_of": "inc-1"}, "duplicate_of", "not a duplicate of itself"),
    ({"verdict": "duplicate_of", "duplicate_of": "inc-nope"}, "duplicate_of", "no incident with id 'inc-nope'"),
    ({"verdict": "confirmed", "note": "x" * 5000}, "note", "at most 4000"),
])
def test_a_bad_verdict_is_a_422_naming_the_field(module_db_url, body, field, words):
    _store(module_db_url, _incidents())
    with running_server(db_url=module_db_url, auth="none") as url:
        r = httpx.post(f"{url}/incidents/inc-1/feedback", json=body)
        assert r.status_code == 422, r.text
        detail = r.json()["detail"][0]
        assert detail["loc"][:2] == ["body", field] and words in detail["msg"], detail
        missing = httpx.post(f"{url}/incidents/inc-zzz/feedback", json={"verdict": "confirmed"})
        assert missing.status_code == 404 and missing.json() == {"detail": "no incident with id 'inc-zzz'"}


def test_verdicts_through_the_cli(db_url, capsys):
    from cli.main import main

    _store(db_url, _incidents())
    assert main(["feedback", "add", "inc-2", "--verdict", "wrong_cause", "--right-cause", "congestion",
                 "--right-entity", "leaf02:swp2", "--note", "spine side", "--db", db_url]) == 0
    assert "recorded wrong_cause on inc-2" in capsys.readouterr().out
    assert main(["feedback", "add", "inc-2", "--verdict", "duplicate_of", "--db", db_url]) == 2
    assert "--duplicate-of: a duplicate_of verdict needs duplicate_of" in capsys.readouterr().err
    assert main(["feedback", "add", "inc-x", "--verdict", "confirmed", "--db", db_url]) == 2
    assert "no incident with id 'inc-x'" in capsys.readouterr().err
    assert main(["feedback", "list", "--db", db_url, "--format", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(f["incident_id"], f["right_entity"]) for f in listed["feedback"]] == [("inc-2", "leaf02:swp2")]
    assert listed["precision"][0]["precision"] == 0.0


@pytest.mark.slow
def test_exported_verdicts_are_cases_evaluate_scores(scenario_dir, tmp_path, capsys):
    """A replayed pause storm judged three ways: confirmed scores as a detected fault at
    rank 1, wrong_cause as a fault the engine ranked elsewhere, false_alarm as a false
    incident on clean telemetry."""
    from cli.main import main
    from evaluation.scenarios import replay_scenario
    from evaluation.score import score_scenario

    folder, db = scenario_dir("pfc_storm"), f"sqlite:///{tmp_path / 'rca.db'}"
    assert main(["replay", str(folder / "telemetry.jsonl.gz"), "--topology", str(folder / "topology.dot"),
                 "--jobs", str(folder / "jobs.jsonl"), "--db", db, "--quiet", "--rejects", str(tmp_path / "r")]) == 0
    capsys.readouterr()
    assert main(["incidents", "--db", db, "--format", "json"]) == 0
    (inc,) = json.loads(capsys.readouterr().out)
    verdicts = {"confirmed": [], "false_alarm": [],
                "wrong_cause": ["--right-cause", "congestion", "--right-entity", "leaf02:swp2"]}
    results = {}
    for verdict, extra in verdicts.items():  # each verdict replaces the last: the export holds the latest
        assert main(["feedback", "add", inc["id"], "--verdict", verdict, *extra, "--db", db]) == 0
        out = tmp_path / f"cases-{verdict}"
        assert main(["feedback", "export", "--out", str(out), "--telemetry", str(folder / "telemetry.jsonl.gz"),
                     "--topology", str(folder / "topology.dot"), "--jobs", str(folder / "jobs.jsonl"),
                     "--db", db]) == 0
        (case,) = out.iterdir()
        truth, incidents, _ = replay_scenario(case)
        assert truth["incident_id"] == inc["id"] and truth["verdict"] == verdict
        results[verdict] = score_scenario(truth, incidents)
    capsys.readouterr()
    confirmed = results["confirmed"].faults
    assert [(f.cause, f.entity, f.detected, f.rank) for f in confirmed] == [("pfc_storm", "gpu006:eth0", True, 1)]
    wrong = results["wrong_cause"].faults
    assert [(f.cause, f.entity, f.top_cause) for f in wrong] == [("congestion", "leaf02:swp2", "pfc_storm")]
    assert wrong[0].rank != 1
    assert results["false_alarm"].clean and results["false_alarm"].faults == []
    assert results["false_alarm"].false_incidents == 1
    assert main(["evaluate", str(tmp_path / "cases-confirmed" / inc["id"]), "--methods", "rules"]) == 0
    assert "pfc_storm       1    1.00   1.00" in capsys.readouterr().out
