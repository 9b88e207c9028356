"""End to end: simulate -> `fabric-rca replay` -> SQLite -> real HTTP server on 127.0.0.1 -> JSON."""
import json

import httpx
import pytest

from api.server import running_server
from api.store.db import resolve_db_url
from cli.main import main

pytestmark = pytest.mark.slow


def _replay(folder, db, tmp_path):
    return main([
        "replay", str(folder / "telemetry.jsonl.gz"), "--topology", str(folder / "topology.dot"),
        "--jobs", str(folder / "jobs.jsonl"), "--db", str(db), "--rejects", str(tmp_path / "rejects.jsonl"), "--quiet",
    ])


def test_replay_store_and_serve(scenario_dir, tmp_path, capsys):
    folder = scenario_dir("pfc_storm")
    truth = json.loads((folder / "truth.json").read_text())
    fault = truth["faults"][0]
    db = tmp_path / "rca.db"
    assert _replay(folder, db, tmp_path) == 0
    assert "incidents opened: 1" in capsys.readouterr().out

    with running_server(db_url=resolve_db_url(str(db), {}), auth="none") as base:
        listed = httpx.get(f"{base}/incidents").json()
        assert len(listed) == 1
        inc = listed[0]
        assert inc["root_causes"][0]["cause"] == fault["cause"]
        assert inc["root_causes"][0]["entity"] == fault["entity"]
        assert set(inc) >= {"id", "status", "severity", "opened_at", "updated_at", "resolved_at", "detected_at",
                            "title", "root_causes", "affected_jobs", "symptoms"}
        assert httpx.get(f"{base}/incidents/{inc['id']}").json() == inc
        assert httpx.get(f"{base}/incidents", params={"cause": "pfc_storm"}).json() == [inc]
        assert httpx.get(f"{base}/incidents", params={"cause": "storage_slow"}).json() == []
        for job in fault["affected_jobs"]:
            assert [i["id"] for i in httpx.get(f"{base}/jobs/{job}/incidents").json()] == [inc["id"]]
        topo = httpx.get(f"{base}/topology").json()
        assert {d["id"] for d in topo["devices"]} >= {fault["entity"]["id"].split(":")[0]}
        assert httpx.get(f"{base}/incidents/nope").status_code == 404

    # Replaying the same telemetry again into the same store creates no duplicate.
    assert _replay(folder, db, tmp_path) == 0
    with running_server(db_url=resolve_db_url(str(db), {}), auth="none") as base:
        again = httpx.get(f"{base}/incidents").json()
        assert [i["id"] for i in again] == [inc["id"]]


def test_incidents_command_prints_contract_json(scenario_dir, tmp_path, capsys):
    folder = scenario_dir("storage_slow")
    db = tmp_path / "rca.db"
    assert _replay(folder, db, tmp_path) == 0
    capsys.readouterr()
    assert main(["incidents", "--db", str(db), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [i["root_causes"][0]["cause"] for i in doc] == ["storage_slow"]


def test_bad_topology_is_a_clear_error(tmp_path, capsys):
    bad = tmp_path / "bad.dot"
    bad.write_text('graph "x" {\n "leaf01" [function="leaf"]\n "leaf01":"swp1" -- \n}\n')
    tel = tmp_path / "t.jsonl"
    tel.write_text("")
    assert main(["replay", str(tel), "--topology", str(bad), "--db", str(tmp_path / "x.db")]) == 2
    err = capsys.readouterr().err
    assert "bad.dot" in err and "line 3" in err
