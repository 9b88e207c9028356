"""Incidents through a real Prometheus Alertmanager (`scripts/tools build alertmanager` builds it).

A paced replay of a pause-storm scenario pushes its incident with `--alertmanager` and
`--webhook`; Alertmanager (route grouped by cause and fabric, a webhook receiver in this
test) must list exactly one alert for it with the incident's labels while it is open,
group it by cause and fabric, and resolve it when the incident resolves. The signed
webhook's calls verify with the secret.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from notify.webhook import SIGNATURE_HEADER, verify
from testkit.alertmanager import Alertmanager, Receiver, alertmanager_binary
from testkit.metrics import scrape
from tests.conftest import in_ci

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
SECRET = b"a shared secret"


@pytest.fixture
def binary() -> Path:
    found = alertmanager_binary()
    if found is None:
        msg = "Alertmanager is not built: run scripts/tools build alertmanager"
        if in_ci():
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    return found


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


@pytest.fixture
def alertmanager(binary, receiver, tmp_path):
    config = f"""
route:
  receiver: test
  group_by: [cause, fabric]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: test
    webhook_configs:
      - url: {receiver.url}/alertmanager
        send_resolved: true
"""
    am = Alertmanager(binary, tmp_path / "am", config)
    yield am
    am.stop()


def _paced_replay(folder: Path, tmp_path: Path, db: str, *, alertmanager: str, webhook: str) -> subprocess.Popen:
    secret = tmp_path / "secret"
    secret.write_bytes(SECRET + b"\n")
    return subprocess.Popen(
        [sys.executable, "-m", "cli.main", "replay", str(folder / "telemetry.jsonl.gz"),
         "--topology", str(folder / "topology.dot"), "--jobs", str(folder / "jobs.jsonl"), "--db", db,
         "--rejects", str(tmp_path / "rejects.jsonl"), "--speed", "20", "--quiet", "--fabric-name", "pod1",
         "--alertmanager", alertmanager, "--console-url", "http://console.example:8000",
         "--webhook", webhook, "--webhook-secret-file", str(secret)],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _while_firing(alertmanager: Alertmanager, replay: subprocess.Popen) -> tuple[list[dict], list[dict], str]:
    """What Alertmanager lists (alerts, groups) the first time it lists anything during the replay."""
    firing: list[dict] = []
    groups: list[dict] = []
    while replay.poll() is None:  # the fault fires for a few seconds of the paced replay
        active = alertmanager.alerts()
        if active and not firing:
            firing, groups = active, alertmanager.groups()
        time.sleep(0.2)
    output = replay.stdout.read().decode()
    assert replay.returncode == 0, output
    return firing, groups, output


def test_one_alert_per_incident_grouped_and_resolved(alertmanager, receiver, scenario_dir, tmp_path):
    db = f"sqlite:///{tmp_path / 'rca.db'}"
    replay = _paced_replay(scenario_dir("pfc_storm"), tmp_path, db, alertmanager=alertmanager.url,
                           webhook=receiver.url + "/hook")
    firing, groups, output = _while_firing(alertmanager, replay)

    from sqlmodel import Session

    from api.store.db import make_engine
    from api.store.repository import list_incidents
    with Session(make_engine(db)) as session:
        incidents = list_incidents(session, limit=None)
    assert len(incidents) == 1 and incidents[0]["status"] == "resolved", output
    inc = incidents[0]

    assert len(firing) == 1, firing  # one alert for the incident, never one per symptom
    alert = firing[0]
    assert alert["labels"] == {
        "alertname": "FabricRCAIncident", "incident_id": inc["id"], "cause": "pfc_storm",
        "entity": inc["root_causes"][0]["entity"]["id"], "entity_kind": "interface",
        "severity": alert["labels"]["severity"], "fabric": "pod1",
        "tenants": ",".join(sorted({j["tenant"] for j in inc["affected_jobs"]})),
        "job_ids": ",".join(sorted({j["job_id"] for j in inc["affected_jobs"]})),
    }
    assert alert["labels"]["entity"] == "gpu006:eth0" and alert["status"]["state"] == "active"
    assert alert["annotations"]["console"] == f"http://console.example:8000/console/#/incident/{inc['id']}"
    assert alert["annotations"]["title"].startswith("PFC pause storm from gpu006:eth0")

    assert len(groups) == 1 and groups[0]["labels"] == {"cause": "pfc_storm", "fabric": "pod1"}
    assert [a["labels"]["incident_id"] for a in groups[0]["alerts"]] == [inc["id"]]

    # resolved: gone from the active list, endsAt at the incident's resolution (in the past)
    _until(lambda: alertmanager.alerts() == [])
    _until(lambda: any(r.json()["status"] == "resolved" for r in receiver.at("/alertmanager")))
    notes = [r.json() for r in receiver.at("/alertmanager")]
    assert [n["status"] for n in notes] == ["firing", "resolved"], notes
    assert notes[-1]["groupLabels"] == {"cause": "pfc_storm", "fabric": "pod1"}
    resolved = notes[-1]["alerts"]
    assert len(resolved) == 1 and resolved[0]["labels"]["incident_id"] == inc["id"]
    assert resolved[0]["endsAt"].startswith(inc["resolved_at"][:19])

    hooks = receiver.at("/hook")  # the signed webhook: the incident's changes as the API serves them
    assert hooks and all(verify(SECRET, r.body, r.headers[SIGNATURE_HEADER]) for r in hooks)
    assert not verify(b"another secret", hooks[0].body, hooks[0].headers[SIGNATURE_HEADER])
    assert {r.json()["id"] for r in hooks} == {inc["id"]}
    assert hooks[-1].json() == inc  # the last change is the stored incident, field for field
    assert "alertmanager:" in output and "0 unsent" in output


def _until(condition, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.2)


def test_the_api_server_notifies_what_the_store_holds_and_restores_it_after_a_restart(alertmanager, tmp_path):
    """`serve --alertmanager`: its store watcher sends the stored open incidents (a fresh
    server sends them again), and the resolution another process stores."""
    from sqlmodel import Session

    from api.server import running_server
    from api.store.db import create_schema, make_engine
    from api.store.repository import upsert_incidents
    from notify import NotifySettings
    from notify.alerts import AlertSettings
    from tests.test_notify import incident

    db = f"sqlite:///{tmp_path / 'rca.db'}"
    engine = make_engine(db)
    create_schema(engine)
    with Session(engine) as session:
        upsert_incidents(session, incidents=[incident("inc-a"), incident("inc-b", cause="congestion")])
    notify = NotifySettings(alertmanager=alertmanager.url, alerts=AlertSettings(fabric="pod2"))
    with running_server(db_url=db, notify=notify, auth="none"):
        _until(lambda: len(alertmanager.alerts()) == 2)
    _until(lambda: {a["labels"]["cause"] for a in alertmanager.groups_alerts()} == {"pfc_storm", "congestion"})
    sent = 'fabric_rca_notifications_sent_total{receiver="alertmanager"}'
    with running_server(db_url=db, notify=notify, auth="none") as url:  # a restart: still open, sent again
        _until(lambda: scrape(url).get(sent) == 2)
        with Session(engine) as session:
            upsert_incidents(session, incidents=[incident("inc-a", status="resolved",
                                                          resolved_at="2025-11-29T07:12:00.000Z")])
        _until(lambda: [a["labels"]["incident_id"] for a in alertmanager.alerts()] == ["inc-b"])
        figures = scrape(url)
    # the restarted server sent both open incidents again, then inc-a's resolution
    assert figures[sent] == 3
    assert figures['fabric_rca_notification_failures_total{receiver="alertmanager"}'] == 0


@pytest.mark.kafka
def test_a_worker_notifies_the_incidents_it_stores(alertmanager, receiver, scenario_dir, kafka_bootstrap, tmp_path):
    """`fabric-rca worker --alertmanager --webhook`: the changes it stores reach both, counted
    in its /metrics; at the end Alertmanager holds nothing active (the incident resolved)."""
    from testkit.workers import Fleet

    (tmp_path / "secret").write_bytes(SECRET)
    fleet = Fleet(tmp_path, scenario_dir("pfc_storm"), kafka_bootstrap)
    try:
        base = fleet.start("w1", "--alertmanager", alertmanager.url, "--webhook", receiver.url + "/hook",
                           "--webhook-secret-file", str(tmp_path / "secret"), "--fabric-name", "pod3")
        assert fleet.publish().failed == 0
        _until(lambda: any(r.json()["status"] == "resolved" for r in receiver.at("/hook")), timeout=120)
        (stored,) = fleet.stored()
        hooks = receiver.at("/hook")
        assert all(verify(SECRET, r.body, r.headers[SIGNATURE_HEADER]) for r in hooks)
        assert {r.json()["id"] for r in hooks} == {stored["id"]} and hooks[-1].json() == stored
        sent = 'fabric_rca_notifications_sent_total{receiver="alertmanager"}'
        _until(lambda: scrape(base).get(sent, 0) >= 2)  # firing, then resolved
        figures = scrape(base)
        assert figures['fabric_rca_notification_failures_total{receiver="alertmanager"}'] == 0
        assert figures['fabric_rca_notifications_pending{receiver="webhook"}'] == 0
        _until(lambda: alertmanager.alerts() == [])
    finally:
        fleet.stop()
