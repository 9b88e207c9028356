"""Notifications: the incident -> alert mapping (pure, property tests), the webhook's
signature, and the outbox's retries, refusals and bound against a real HTTP server."""
from __future__ import annotations

import time

import httpx
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from notify import Notifier, NotifySettings
from notify.alerts import ALERTNAME, AlertSettings, incident_labels, transition
from notify.channels import WebhookChannel
from notify.outbox import Outbox
from notify.webhook import SIGNATURE_HEADER, signature, verify
from testkit.alertmanager import Receiver
from testkit.ports import free_port

SETTINGS = AlertSettings(fabric="f1", console_url="http://console.test:8000/", resend_s=60)
NOW = 1_800_000_000.0


def incident(iid="inc-1", *, status="open", cause="pfc_storm", entity="gpu006:eth0", severity="major",
             jobs=(("4242", "acme"),), maintenance=False, resolved_at=None):
    return {"id": iid, "status": status, "severity": severity, "opened_at": "2025-11-29T07:08:41.019Z",
            "updated_at": "2025-11-29T07:09:00.000Z", "resolved_at": resolved_at,
            "detected_at": "2025-11-29T07:08:45.000Z", "title": f"{cause} at {entity}", "maintenance": maintenance,
            "maintenance_reason": "window 1" if maintenance else None,
            "root_causes": [{"rank": 1, "cause": cause, "entity": {"kind": "interface", "id": entity}, "score": 0.9,
                             "evidence": []}],
            "affected_jobs": [{"job_id": j, "tenant": t, "impact": "paths"} for j, t in jobs], "symptoms": []}


def test_labels_name_the_incident_cause_entity_severity_tenants_jobs_and_fabric():
    labels = dict(incident_labels(incident(jobs=(("7", "b"), ("5", "a"), ("6", "a"))), SETTINGS))
    assert labels == {"alertname": ALERTNAME, "incident_id": "inc-1", "cause": "pfc_storm", "entity": "gpu006:eth0",
                      "entity_kind": "interface", "severity": "major", "fabric": "f1", "tenants": "a,b",
                      "job_ids": "5,6,7"}


def test_an_open_incident_fires_with_the_console_link_and_expires_unless_resent():
    alerts, firing = transition(incident(), None, now=NOW, settings=SETTINGS)
    assert len(alerts) == 1 and firing is not None
    a = alerts[0]
    assert a["annotations"]["console"] == "http://console.test:8000/console/#/incident/inc-1" == a["generatorURL"]
    assert a["annotations"]["title"] == "pfc_storm at gpu006:eth0"
    assert a["startsAt"] == "2025-11-29T07:08:41.019Z"
    assert a["endsAt"] == "2027-01-15T08:04:00.000Z"  # NOW + 4 resends of 60 s


def test_resolution_ends_the_alert_at_the_incident_resolution():
    _, firing = transition(incident(), None, now=NOW, settings=SETTINGS)
    alerts, after = transition(incident(status="resolved", resolved_at="2025-11-29T07:12:00.000Z"), firing,
                               now=NOW, settings=SETTINGS)
    assert after is None and [a["endsAt"] for a in alerts] == ["2025-11-29T07:12:00.000Z"]
    assert alerts[0]["labels"] == dict(firing)


def test_a_relabelled_incident_resolves_its_old_label_set():
    _, firing = transition(incident(), None, now=NOW, settings=SETTINGS)
    alerts, after = transition(incident(severity="critical"), firing, now=NOW, settings=SETTINGS)
    assert [a["labels"]["severity"] for a in alerts] == ["major", "critical"]
    assert alerts[0]["endsAt"] == "2027-01-15T08:00:00.000Z"  # the old label set ends now
    assert dict(after)["severity"] == "critical"


def test_an_incident_in_maintenance_is_not_notified_and_an_alert_sent_before_is_resolved():
    alerts, firing = transition(incident(maintenance=True), None, now=NOW, settings=SETTINGS)
    assert alerts == [] and firing is None
    _, firing = transition(incident(), None, now=NOW, settings=SETTINGS)
    alerts, after = transition(incident(maintenance=True), firing, now=NOW, settings=SETTINGS)
    assert after is None and len(alerts) == 1 and alerts[0]["endsAt"] == "2027-01-15T08:00:00.000Z"  # now


def test_times_from_the_future_are_clamped_to_now():
    future = incident() | {"opened_at": "2031-01-01T00:00:00.000Z"}
    alerts, _ = transition(future | {"status": "resolved", "resolved_at": "2031-01-01T00:05:00.000Z"}, None,
                           now=NOW, settings=SETTINGS)
    assert alerts[0]["startsAt"] == alerts[0]["endsAt"] == "2027-01-15T08:00:00.000Z"


_states = st.fixed_dictionaries({
    "status": st.sampled_from(["open", "resolved"]), "cause": st.sampled_from(["pfc_storm", "congestion"]),
    "severity": st.sampled_from(["minor", "major", "critical"]), "maintenance": st.booleans(),
    "jobs": st.lists(st.tuples(st.sampled_from("123"), st.sampled_from("ab")), max_size=3).map(tuple),
})


@given(st.lists(_states, min_size=1, max_size=12))
def test_at_most_one_label_set_fires_per_incident_whatever_the_changes(states):
    """Replaying the alerts into a model of Alertmanager (active = posted with endsAt in
    the future, keyed by label set) never leaves two active alerts for one incident, and
    a resolved or maintenance state leaves none."""
    active: dict[tuple, str] = {}
    firing = None
    for s in states:
        inc = incident(status=s["status"], cause=s["cause"], severity=s["severity"], jobs=s["jobs"],
                       maintenance=s["maintenance"], resolved_at="2025-11-29T07:20:00.000Z" if s["status"] == "resolved" else None)
        alerts, firing = transition(inc, firing, now=NOW, settings=SETTINGS)
        for a in alerts:
            key = tuple(sorted(a["labels"].items()))
            active[key] = a["endsAt"]
        live = [k for k, ends in active.items() if ends > "2027-01-15T08:00:00.000Z"]
        assert len(live) <= 1
        if s["status"] == "resolved" or s["maintenance"]:
            assert live == [] and firing is None
        else:
            assert live == [firing]


def test_the_webhook_signature_verifies_and_a_changed_body_does_not():
    body = orjson.dumps(incident())
    header = signature(b"k", body)
    assert header.startswith("sha256=") and verify(b"k", body, header)
    assert not verify(b"k", body + b" ", header) and not verify(b"other", body, header) and not verify(b"k", body, None)


def test_a_failing_receiver_is_retried_until_it_answers_and_every_change_arrives_signed():
    receiver = Receiver()
    receiver.status = 503
    try:
        channel = WebhookChannel(receiver.url + "/hook", b"secret")
        box = Outbox(channel, batch=1, first_wait_s=0.05, max_wait_s=0.2)
        box.put(channel.accept([incident("inc-1"), incident("inc-2")], NOW))
        _until(lambda: box.stats.failures >= 2)
        receiver.status = 200
        assert box.close(timeout=10) == 0
        got = [r for r in receiver.at("/hook")]
        delivered = {r.json()["id"] for r in got[-2:]}
        assert delivered == {"inc-1", "inc-2"} and box.stats.sent == 2
        assert all(verify(b"secret", r.body, r.headers[SIGNATURE_HEADER]) for r in got)
    finally:
        receiver.close()


def test_a_refusal_is_dropped_and_counted_not_retried():
    receiver = Receiver()
    receiver.status = 400
    try:
        channel = WebhookChannel(receiver.url + "/hook", b"secret")
        box = Outbox(channel, batch=1, first_wait_s=0.05)
        box.put(channel.accept([incident()], NOW))
        assert box.close(timeout=5) == 0
        assert box.stats.refused == 1 and box.stats.failures == 0 and len(receiver.at("/hook")) == 1
        assert "400" in box.stats.last_error
    finally:
        receiver.close()


def test_the_queue_is_bounded_and_coalesces_changes_of_one_incident():
    dead = f"http://127.0.0.1:{free_port()}/hook"  # nothing listens: every send fails
    channel = WebhookChannel(dead, b"secret", client=httpx.Client(timeout=0.5))
    box = Outbox(channel, max_items=3, batch=1, first_wait_s=10)
    box.put(channel.accept([incident(f"inc-{i}") for i in range(6)], NOW))
    box.put(channel.accept([incident("inc-5", severity="critical")], NOW))  # replaces inc-5's waiting change
    _until(lambda: box.stats.failures >= 1)
    assert box.pending == 3 and box.stats.dropped == 3
    assert box.close(timeout=0.2) == 3


def test_the_notifier_never_raises_into_the_caller_and_counts_what_failed():
    dead = f"http://127.0.0.1:{free_port()}"
    notifier = Notifier(NotifySettings(alertmanager=dead, webhook=dead + "/hook", webhook_secret=b"s"))
    notifier.submit([incident(), {"id": "broken"}])  # a malformed change too
    _until(lambda: all(f["failures"] >= 1 for f in notifier.figures().values()))
    left = notifier.close(timeout=0.5)
    # Alertmanager: the good change waits, the one it cannot make an alert of was counted;
    # the webhook forwards both as they came (it reads nothing of them)
    assert left == {"alertmanager": 1, "webhook": 2}


def _until(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def test_notification_flags_fall_back_to_variables_and_name_what_is_wrong(tmp_path, capsys, monkeypatch):
    import argparse

    from cli.main import main
    from cli.notify_flags import add_notify_arguments, notify_settings_from

    p = argparse.ArgumentParser()
    add_notify_arguments(p)
    env = {"FABRIC_RCA_ALERTMANAGER": "http://am:9093", "FABRIC_RCA_RESEND_S": "15", "FABRIC_RCA_FABRIC_NAME": "pod9"}
    got = notify_settings_from(p.parse_args([]), console_default="http://h:1", topology=None, env=env)
    assert (got.alertmanager, got.alerts.resend_s, got.alerts.fabric, got.alerts.console_url) == \
        ("http://am:9093", 15.0, "pod9", "http://h:1")
    assert notify_settings_from(p.parse_args([]), console_default="x", topology=None, env={}) is None
    monkeypatch.delenv("FABRIC_RCA_WEBHOOK_SECRET", raising=False)
    db = f"sqlite:///{tmp_path / 'x.db'}"
    for flags, words in [(["--webhook", "http://127.0.0.1:1/h"], "--webhook needs a secret"),
                         (["--alertmanager", "am:9093"], "--alertmanager 'am:9093' is not an http:// or https:// URL"),
                         (["--webhook", "http://h/", "--webhook-secret-file", str(tmp_path / "none")],
                          "--webhook-secret-file")]:
        assert main(["serve", "--db", db, *flags]) == 2  # refused before it serves
        assert words in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["serve", "--db", db, "--resend-s", "0", "--alertmanager", "http://am"])
    assert "must be greater than 0" in capsys.readouterr().err


def test_an_open_incidents_alert_is_resent_every_interval_until_it_resolves():
    from notify.channels import AlertmanagerChannel

    am = AlertmanagerChannel("http://127.0.0.1:1", SETTINGS)  # (nothing is sent: only what is due)
    assert len(am.accept([incident("inc-1"), incident("inc-2", status="resolved",
                                                   resolved_at="2025-11-29T07:12:00.000Z")], NOW)) == 2
    assert am.tick(NOW + 59) == []
    due = am.tick(NOW + 60)
    assert [a["labels"]["incident_id"] for _, a in due] == ["inc-1"]  # only the open one
    assert due[0][1]["endsAt"] == "2027-01-15T08:05:00.000Z"  # pushed on: 4 intervals after this send
    assert am.tick(NOW + 100) == [] and len(am.tick(NOW + 120)) == 1
    am.accept([incident("inc-1", status="resolved", resolved_at="2025-11-29T07:12:00.000Z")], NOW + 130)
    assert am.tick(NOW + 180) == [] and am.tick(NOW + 1000) == [] and am.open_alerts == 0
