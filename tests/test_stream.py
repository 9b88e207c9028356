"""`GET /incidents/stream` and the store's change log, on SQLite and PostgreSQL.

The incidents are a real replay's (the demo scenario: a pause storm, a degraded link,
a slow storage target); the writer in the live test is another process
(`fabric-rca replay`), the server a real uvicorn on 127.0.0.1.
"""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from sqlmodel import Session

from api.app import create_app
from api.server import running_server
from api.store import changes
from api.store import repository as repo
from api.store.db import create_schema, make_engine
from api.stream import StreamSettings
from cli.main import main
from testkit.ports import free_port
from testkit.sse import Events
from testkit.store import stored_incidents
from testkit.workers import ROOT, WorkerProcess

pytestmark = pytest.mark.slow

FAST = {"poll_s": 0.05, "heartbeat_s": 0.3, "retry_ms": 100}


def replay_args(folder: Path, db: str) -> list[str]:
    return ["replay", str(folder / "telemetry.jsonl.gz"), "--topology", str(folder / "topology.dot"),
            "--jobs", str(folder / "jobs.jsonl"), "--db", db, "--quiet"]


@pytest.fixture(scope="module")
def demo(scenario_dir) -> Path:
    # 560 s, not the demo's 480: its slow storage ends at 400 s, the storage rise rule's
    # symptom up to a bucket and engine.baseline.SETTLE_S later, and resolve-after adds 60 s
    return scenario_dir("demo", duration=560.0)


@pytest.fixture(scope="module")
def demo_incidents(demo, tmp_path_factory) -> list[dict]:
    db = tmp_path_factory.mktemp("demo-store") / "rca.db"
    assert main(replay_args(demo, str(db))) == 0
    incidents = stored_incidents(db)
    assert sorted(i["root_causes"][0]["cause"] for i in incidents) == ["link_degraded", "pfc_storm", "storage_slow"]
    return incidents


def fast_app(db_url: str):
    app = create_app(db_url=db_url, auth="none")
    app.state.stream = StreamSettings(**FAST)
    return app


def test_the_change_log_numbers_every_write_in_commit_order(db_url, demo_incidents):
    engine = make_engine(db_url)
    create_schema(engine)
    first, second, third = sorted(demo_incidents, key=lambda i: i["opened_at"])
    with Session(engine) as session:
        assert changes.latest(session) == 0 and changes.after(session, seq=0) == []
        repo.upsert_incidents(session, incidents=[first, second])
        repo.upsert_incidents(session, incidents=[third])
        log = changes.after(session, seq=0)
        assert [iid for _, iid in log] == [first["id"], second["id"], third["id"]]
        assert [s for s, _ in log] == sorted({s for s, _ in log})
        repo.upsert_incidents(session, incidents=[first])  # a rewrite: a new, higher number, one row each
        again = changes.after(session, seq=0)
        assert [iid for _, iid in again] == [second["id"], third["id"], first["id"]]
        assert again[-1][0] > log[-1][0] == max(s for s, _ in again[:-1])
        assert changes.after(session, seq=again[-2][0]) == [again[-1]] and changes.latest(session) == again[-1][0]
        assert changes.after(session, seq=0, limit=2) == again[:2]
    engine.dispose()


def test_the_stream_sends_what_another_process_writes(db_url, demo):
    create_schema(make_engine(db_url))
    with running_server(app=fast_app(db_url)) as base:
        events = Events(f"{base}/incidents/stream")
        try:
            ready = events.next()
            assert (ready["event"], json.loads(ready["data"]), ready["id"]) == ("ready", {"seq": 0}, "0")
            assert events.status == 200
            writer = subprocess.run([sys.executable, "-m", "cli.main", *replay_args(demo, db_url)], cwd=ROOT,
                                    capture_output=True, text=True, timeout=180)
            assert writer.returncode == 0, writer.stderr
            got = events.drain(quiet=2.0)
        finally:
            events.close()
        assert {e["event"] for e in got} == {"incident"}
        ids = [int(e["id"]) for e in got]
        assert ids == sorted(set(ids)) and ids[0] > 0
        latest = {json.loads(e["data"])["id"]: json.loads(e["data"]) for e in got}  # the last event of each
        assert sorted(i["root_causes"][0]["cause"] for i in latest.values()) == [
            "link_degraded", "pfc_storm", "storage_slow"]
        for incident in latest.values():
            assert incident == httpx.get(f"{base}/incidents/{incident['id']}").json()
            assert incident["status"] == "resolved"
        assert ": heartbeat" not in events.lines[:4]


def test_a_client_resumes_after_the_last_event_id_and_filters_like_the_list(db_url, demo_incidents):
    engine = make_engine(db_url)
    create_schema(engine)
    ordered = sorted(demo_incidents, key=lambda i: i["opened_at"])
    with Session(engine) as session:
        for incident in ordered:
            repo.upsert_incidents(session, incidents=[incident])
        log = changes.after(session, seq=0)
    engine.dispose()
    with running_server(app=fast_app(db_url)) as base:
        resumed = Events(f"{base}/incidents/stream", headers={"Last-Event-ID": str(log[0][0])})
        filtered = Events(f"{base}/incidents/stream", params={"after": "0", "cause": "storage_slow"})
        try:
            ready, *rest = resumed.take(3)
            assert ready["event"] == "ready" and ready["id"] == str(log[0][0])
            assert [(int(e["id"]), json.loads(e["data"])["id"]) for e in rest] == log[1:]
            ready, *rest = filtered.take(4)
            assert ready["id"] == "0"
            slow = [i["id"] for i in ordered if i["root_causes"][0]["cause"] == "storage_slow"]
            assert [(e["event"], json.loads(e["data"])["id"]) for e in rest] == [
                ("incident" if iid in slow else "gone", iid) for _, iid in log]
            listed = httpx.get(f"{base}/incidents", params={"cause": "storage_slow"}).json()
            assert [json.loads(e["data"]) for e in rest if e["event"] == "incident"] == listed
        finally:
            resumed.close()
            filtered.close()


def test_an_idle_stream_sends_heartbeats(db_url):
    with running_server(app=fast_app(db_url)) as base:
        events = Events(f"{base}/incidents/stream")
        try:
            events.next()
            deadline = time.monotonic() + 10
            while ": heartbeat" not in events.lines and time.monotonic() < deadline:
                time.sleep(0.05)
            assert ": heartbeat" in events.lines
            assert events.lines[0] == f"retry: {FAST['retry_ms']}"
        finally:
            events.close()


@pytest.mark.parametrize(("headers", "params", "where"), [
    ({"Last-Event-ID": "abc"}, {}, ["header", "Last-Event-ID"]),
    ({"Last-Event-ID": "-3"}, {}, ["header", "Last-Event-ID"]),
    ({}, {"after": "-1"}, ["query", "after"]),
    ({}, {"status": "closed"}, ["query", "status"]),
    ({}, {"since": "2025-11-30T00:00:00Z", "until": "2025-11-29T00:00:00Z"}, ["query", "since"]),
])
def test_a_bad_position_or_filter_is_a_422_that_names_it(db_url, headers, params, where):
    with running_server(app=fast_app(db_url)) as base:
        res = httpx.get(f"{base}/incidents/stream", headers=headers, params=params, timeout=10)
    assert res.status_code == 422 and res.headers["content-type"] == "application/json"
    assert [d["loc"] for d in res.json()["detail"]] == [where]


def test_the_server_stops_at_once_with_a_stream_open(tmp_path):
    port = free_port()
    db = tmp_path / "rca.db"
    server = WorkerProcess("serve", ["serve", "--db", str(db), "--port", str(port), "--auth", "none"], port=port,
                           log_path=tmp_path / "serve.log")
    try:
        server.wait_healthy(timeout=60)
        events = Events(f"{server.base}/incidents/stream")
        assert events.next()["event"] == "ready"
        started = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        server.proc.wait(timeout=10)
        assert time.monotonic() - started < 5, server.tail()
        events.close()
    finally:
        server.stop()
