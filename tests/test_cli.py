"""Command-line errors a user can fix are one line on stderr and exit code 2."""
from cli.main import main


def test_worker_refuses_a_models_folder_it_cannot_load(capsys, tmp_path):
    assert main(["worker", "--bootstrap", "127.0.0.1:1", "--topology", "t.dot", "--models", str(tmp_path / "m")]) == 2
    assert "no such models folder" in capsys.readouterr().err


def test_worker_needs_a_bootstrap_and_a_topology(capsys, monkeypatch):
    monkeypatch.delenv("FABRIC_RCA_BOOTSTRAP", raising=False)
    monkeypatch.delenv("FABRIC_RCA_TOPOLOGY", raising=False)
    assert main(["worker"]) == 2
    assert "--bootstrap" in capsys.readouterr().err


def test_simulate_names_the_scenarios_when_none_is_given(tmp_path, capsys):
    assert main(["simulate", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "pfc_storm" in err and "clean" in err


def _worker(argv, monkeypatch, **env):
    from cli.main import parser, worker_settings

    for k in ("FABRIC_RCA_BOOTSTRAP", "FABRIC_RCA_TOPOLOGY", "FABRIC_RCA_TELEMETRY_TOPICS"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return worker_settings(parser().parse_args(["worker", "--bootstrap", "127.0.0.1:9092", "--topology", "t.dot", *argv]))


def test_worker_reads_the_telemetry_topics_it_is_given(monkeypatch):
    assert _worker([], monkeypatch).telemetry_topics == ("fabric.telemetry",)
    got = _worker(["--telemetry-topic", "spectrum", "--telemetry-topic", "storage"], monkeypatch)
    assert got.telemetry_topics == ("spectrum", "storage")
    got = _worker(["--topic-prefix", "lab."], monkeypatch, FABRIC_RCA_TELEMETRY_TOPICS="spectrum, storage")
    assert got.telemetry_topics == ("lab.spectrum", "lab.storage")
    assert got.symptoms_topic == "lab.fabric.symptoms"
    assert got.topics()["lab.storage"] == got.partitions  # created when missing, like the default one


def test_worker_idle_partition_limit(monkeypatch, capsys):
    import pytest

    assert _worker([], monkeypatch).idle_partition_s == 30.0
    assert _worker(["--idle-partition-s", "5"], monkeypatch).idle_partition_s == 5.0
    with pytest.raises(SystemExit):
        _worker(["--idle-partition-s", "0"], monkeypatch)
    assert "must be greater than 0" in capsys.readouterr().err


def test_every_command_runs_with_the_engines_gc_thresholds(capsys):
    import gc

    from cli.runtime import GC_THRESHOLDS

    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        main(["rules", "check"])
        assert gc.get_threshold() == GC_THRESHOLDS
    finally:
        gc.set_threshold(*before)


def _stored_incidents(db, n: int) -> None:
    """`n` open incidents, one a minute, through the store's repository."""
    from datetime import datetime, timedelta, timezone

    from sqlmodel import Session

    from api.store import repository as repo
    from api.store.db import create_schema, make_engine

    def at(minute: int) -> str:
        t = datetime(2025, 11, 29, 7, 0, tzinfo=timezone.utc) + timedelta(minutes=minute)
        return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")

    incidents = [{
        "id": f"inc-{k:012x}", "status": "open", "severity": "major", "opened_at": at(k), "updated_at": at(k),
        "resolved_at": None, "detected_at": at(k), "title": f"pfc_storm on gpu{k:03d}:eth0",
        "root_causes": [{"rank": 1, "cause": "pfc_storm", "entity": {"kind": "interface", "id": f"gpu{k:03d}:eth0"},
                         "score": 0.9, "evidence": []}],
        "affected_jobs": [], "symptoms": [],
    } for k in range(n)]
    engine = make_engine(f"sqlite:///{db}")
    create_schema(engine)
    with Session(engine) as session:
        repo.upsert_incidents(session, incidents=incidents)
        session.commit()


def test_incidents_json_exports_every_incident_unless_limited(tmp_path, capsys):
    import json

    db = tmp_path / "store.db"
    _stored_incidents(db, 160)  # more than the old silent cut at 100
    assert main(["incidents", "--db", str(db), "--format", "json"]) == 0
    out = capsys.readouterr()
    got = json.loads(out.out)
    assert len(got) == 160 and len({i["id"] for i in got}) == 160 and out.err == ""
    assert got[0]["id"] == "inc-00000000009f"  # newest first
    assert main(["incidents", "--db", str(db), "--format", "json", "--limit", "150"]) == 0
    out = capsys.readouterr()
    assert len(json.loads(out.out)) == 150 and "showing 150 of 160" in out.err


def test_incidents_table_says_when_limit_cuts_it_short(tmp_path, capsys):
    db = tmp_path / "store.db"
    _stored_incidents(db, 155)
    assert main(["incidents", "--db", str(db)]) == 0
    out = capsys.readouterr()
    assert out.out.count("pfc_storm on gpu") == 155 and out.err == ""
    assert main(["incidents", "--db", str(db), "--limit", "20"]) == 0
    out = capsys.readouterr()
    assert out.out.count("pfc_storm on gpu") == 20
    assert "showing 20 of 155 matching incidents (--limit 20)" in out.err
    assert main(["incidents", "--db", str(db), "--limit", "155"]) == 0  # exactly all: nothing to say
    assert capsys.readouterr().err == ""
