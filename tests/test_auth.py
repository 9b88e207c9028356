"""Scoped access through a real uvicorn server: tokens, roles, and what a tenant can reach.

The store holds incidents written to cross tenants on purpose: acme's job 4242 runs on
gpu001-gpu004, globex's 4243 on gpu005-gpu008. A pause storm from globex's host gpu005
hurts both; a noisy neighbour (globex's job) hurts acme's; a link fault and a dead NIC
touch globex alone. Whatever acme asks (list, filters, ids, the stream, the topology),
no globex job id, tenant, user or host is in the answer.
"""
from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest
from sqlmodel import Session

from api.app import create_app
from api.auth import add_token
from api.server import running_server
from api.store import repository as repo
from api.store.db import create_schema, make_engine
from api.stream import StreamSettings
from cli.main import main
from testkit.ports import free_port
from testkit.sse import Events
from testkit.workers import ROOT, WorkerProcess

pytestmark = pytest.mark.slow

ACME_HOSTS = ["gpu001", "gpu002", "gpu003", "gpu004"]
GLOBEX_HOSTS = ["gpu005", "gpu006", "gpu007", "gpu008"]
# what acme must never be shown: globex's tenant, job, user and hosts
GLOBEX_MARKS = ["globex", "4243", "bob", *GLOBEX_HOSTS]

TOPOLOGY = {
    "devices": [{"id": "spine01", "role": "spine"}, {"id": "leaf01", "role": "leaf"}, {"id": "leaf02", "role": "leaf"},
                {"id": "stor01", "role": "storage"}]
               + [{"id": h, "role": "host"} for h in ACME_HOSTS + GLOBEX_HOSTS],
    "links": [{"id": "leaf01:swp51--spine01:swp1", "a": "leaf01:swp51", "b": "spine01:swp1"},
              {"id": "leaf02:swp51--spine01:swp2", "a": "leaf02:swp51", "b": "spine01:swp2"},
              {"id": "leaf02:swp9--stor01:eth0", "a": "leaf02:swp9", "b": "stor01:eth0"}]
             + [{"id": f"{h}:eth0--leaf01:swp{i}", "a": f"{h}:eth0", "b": f"leaf01:swp{i}"}
                for i, h in enumerate(ACME_HOSTS, 1)]
             + [{"id": f"{h}:eth0--leaf02:swp{i}", "a": f"{h}:eth0", "b": f"leaf02:swp{i}"}
                for i, h in enumerate(GLOBEX_HOSTS, 1)],
}
ACME = {"job_id": "4242", "tenant": "acme", "hosts": ACME_HOSTS}
GLOBEX = {"job_id": "4243", "tenant": "globex", "hosts": GLOBEX_HOSTS}


def symptom(key: str, entity: str, kind: str = "interface", at: str = "2025-11-29T07:00:00.000Z") -> dict:
    return {"key": key, "kind": "pfc_pause_tx", "family": "pfc", "entity": {"kind": kind, "id": entity},
            "device": entity.split(":")[0], "start": at, "last": at, "end": None, "severity": 0.9,
            "metrics": {"tx_pause_rate": 1000.0}, "rule": "pfc_pause_tx",
            "samples": {"tx_pause_rate": [[1764399840.0, 400.0], [1764399841.0, 1000.0]]}}


def incident(iid: str, opened: str, cause: str, entity: dict, jobs: list[tuple[dict, str]], symptoms: list[dict],
             title: str, status: str = "open") -> dict:
    return {"id": iid, "status": status, "severity": "major", "opened_at": opened, "updated_at": opened,
            "resolved_at": None if status == "open" else opened, "detected_at": opened, "title": title,
            "maintenance": False, "maintenance_reason": None,
            "root_causes": [{"rank": 1, "cause": cause, "entity": entity, "score": 0.9,
                             "evidence": [{"symptom": s["kind"], "entity": s["entity"]["id"], "at": s["start"],
                                           "explains": 1.0, "metrics": s["metrics"]} for s in symptoms]}],
            "affected_jobs": [{**job, "impact": impact} for job, impact in jobs], "symptoms": symptoms}


STORM = incident("inc-storm", "2025-11-29T07:04:00.000Z", "pfc_storm", {"kind": "interface", "id": "gpu005:eth0"},
                 [(ACME, "traffic crosses gpu005:eth0"), (GLOBEX, "runs on gpu005")],
                 [symptom("s1", "gpu005:eth0"), symptom("s2", "leaf02:swp1"), symptom("s3", "gpu001:eth0")],
                 "PFC pause storm from gpu005:eth0 (2 jobs affected)")
NOISY = incident("inc-noisy", "2025-11-29T07:03:00.000Z", "noisy_neighbor", {"kind": "job", "id": "4243"},
                 [(ACME, "shares leaf02:swp51--spine01:swp2 with job 4243"), (GLOBEX, "source of the traffic surge")],
                 [symptom("n1", "leaf02:swp51"), symptom("n2", "gpu006:eth0")],
                 "Job 4243 saturates shared links (noisy neighbor) (2 jobs affected)")
LINK = incident("inc-globex-link", "2025-11-29T07:02:00.000Z", "link_flap",
                {"kind": "link", "id": "gpu007:eth0--leaf02:swp3"}, [(GLOBEX, "runs on gpu007")],
                [symptom("l1", "gpu007:eth0")], "Link gpu007:eth0--leaf02:swp3 is flapping (1 job affected)")
SLOW = incident("inc-slow", "2025-11-29T07:01:00.000Z", "storage_slow", {"kind": "storage", "id": "stor01"},
                [(ACME, "reads/writes storage stor01"), (GLOBEX, "reads/writes storage stor01")],
                [symptom("t1", "stor01", kind="storage")], "Storage stor01 is slow (2 jobs affected)", status="resolved")
ACME_SEES = ["inc-storm", "inc-noisy", "inc-slow"]  # newest first


def leaks(text: str) -> list[str]:
    return [mark for mark in GLOBEX_MARKS if mark in text]


@pytest.fixture(scope="module")
def served(module_db_url):
    engine = make_engine(module_db_url)
    create_schema(engine)
    with Session(engine) as session:
        repo.upsert_incidents(session, incidents=[STORM, NOISY, LINK, SLOW])
        repo.save_topology(session, document=TOPOLOGY)
        tokens = {name: add_token(session, role=role, tenant=tenant, name=name)[1] for name, role, tenant in (
            ("admin", "admin", None), ("operator", "operator", None), ("acme", "tenant", "acme"),
            ("globex", "tenant", "globex"), ("initech", "tenant", "initech"))}
    engine.dispose()
    app = create_app(db_url=module_db_url)  # auth tokens: the default
    app.state.stream = StreamSettings(poll_s=0.05, heartbeat_s=0.3, retry_ms=100)
    with running_server(app=app) as base:
        yield base, tokens


def get(base: str, path: str, token: str | None, **params) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.get(f"{base}{path}", headers=headers, params=params, timeout=30)


def operations(base: str, token: str) -> list[tuple[str, str]]:
    spec = get(base, "/openapi.json", token).json()
    return [(method.upper(), path) for path, item in spec["paths"].items() for method in item]


def concrete(path: str) -> str:
    return path.replace("{incident_id}", "inc-storm").replace("{job_id}", "4242").replace(
        "{window_id}", "1").replace("{token_id}", "00000000")


def test_every_route_but_healthz_refuses_a_missing_or_bad_token_with_a_body(served):
    base, tokens = served
    ops = operations(base, tokens["admin"])
    assert len(ops) >= 19
    for method, path in ops:
        for token in (None, "frca_00000000_" + "x" * 43, tokens["acme"] + "x", "not-a-token"):
            res = httpx.request(method, f"{base}{concrete(path)}", timeout=30,
                                headers={"Authorization": f"Bearer {token}"} if token else {})
            if path == "/healthz" and token is None:
                assert res.status_code == 200 and res.json() == {"status": "ok", "db": "ok"}  # no count
                continue
            assert res.status_code == 401, (method, path, token, res.status_code)
            assert res.json()["detail"] and res.headers["www-authenticate"] == "Bearer"
    assert get(base, "/healthz", tokens["operator"]).json()["incidents"] == 4
    assert get(base, "/healthz", tokens["acme"]).json() == {"status": "ok", "db": "ok"}
    # the console's files hold no data: they load without a token (the page then asks for one)
    assert httpx.get(f"{base}/console/", timeout=30).status_code == 200


def test_roles_a_tenant_may_not_use_get_403_with_a_body(served):
    base, tokens = served
    operator_only = [("GET", "/topology"), ("GET", "/topology/layout"), ("GET", "/maintenance"),
                     ("POST", "/maintenance"), ("DELETE", "/maintenance/1"), ("GET", "/feedback/precision"),
                     ("GET", "/metrics"), ("POST", "/incidents/inc-storm/feedback"),
                     ("GET", "/incidents/inc-storm/feedback"), ("GET", "/incidents/inc-globex-link/feedback")]
    admin_only = [("GET", "/tokens"), ("POST", "/tokens"), ("DELETE", "/tokens/00000000")]
    for name in ("acme", "globex"):
        for method, path in operator_only + admin_only:
            res = httpx.request(method, f"{base}{path}", headers={"Authorization": f"Bearer {tokens[name]}"},
                                json={"verdict": "confirmed"}, timeout=30)
            assert res.status_code == 403, (name, method, path, res.text)
            assert f"tenant {name}" in res.json()["detail"]
    for method, path in admin_only:
        res = httpx.request(method, f"{base}{path}", headers={"Authorization": f"Bearer {tokens['operator']}"},
                            json={"role": "operator"}, timeout=30)
        assert res.status_code == 403 and "admin token" in res.json()["detail"]
    assert get(base, "/topology", tokens["operator"]).status_code == 200
    assert get(base, "/metrics", tokens["operator"]).status_code == 200
    assert get(base, "/tokens", tokens["admin"]).status_code == 200


def test_a_tenant_lists_only_its_incidents_scoped_to_its_jobs_and_hosts(served):
    base, tokens = served
    res = get(base, "/incidents", tokens["acme"])
    assert res.status_code == 200 and [i["id"] for i in res.json()] == ACME_SEES
    assert res.headers["x-total-count"] == "3"
    assert leaks(res.text) == []
    storm = res.json()[0]
    assert storm["title"] == "PFC pause storm from (hidden):eth0 (1 job affected)"
    assert storm["root_causes"][0]["entity"] == {"kind": "interface", "id": "(hidden):eth0"}
    assert storm["affected_jobs"] == [{**ACME, "impact": "traffic crosses (hidden):eth0"}]
    assert [s["entity"]["id"] for s in storm["symptoms"]] == ["leaf02:swp1", "gpu001:eth0"]  # the fabric, its own
    assert [e["entity"] for e in storm["root_causes"][0]["evidence"]] == ["leaf02:swp1", "gpu001:eth0"]
    noisy = res.json()[1]
    assert noisy["root_causes"][0]["entity"] == {"kind": "job", "id": "(hidden)"}
    assert noisy["title"] == "Job (hidden) saturates shared links (noisy neighbor) (1 job affected)"
    assert noisy["affected_jobs"][0]["impact"] == "shares leaf02:swp51--spine01:swp2 with job (hidden)"
    # the other tenant sees its side of the same incidents, and its own link
    theirs = get(base, "/incidents", tokens["globex"]).json()
    assert [i["id"] for i in theirs] == ["inc-storm", "inc-noisy", "inc-globex-link", "inc-slow"]
    assert theirs[0]["title"] == "PFC pause storm from gpu005:eth0 (1 job affected)"
    assert all("acme" not in json.dumps(i) and "4242" not in json.dumps(i) and "gpu001" not in json.dumps(i)
               for i in theirs)
    assert get(base, "/incidents", tokens["initech"]).json() == []  # no job affected: nothing
    assert len(get(base, "/incidents", tokens["operator"]).json()) == 4  # an operator sees all, unscoped
    assert get(base, "/incidents/inc-storm", tokens["operator"]).json()["title"] == STORM["title"]


def test_no_filter_reaches_what_scoping_hid(served):
    base, tokens = served
    acme = tokens["acme"]
    for params in ({"tenant": "globex"}, {"job": "4243"}, {"entity": "gpu005"}, {"entity": "gpu005:eth0"},
                   {"entity": "gpu006:eth0"}, {"entity": "gpu007:eth0--leaf02:swp3"}, {"entity": "(hidden):eth0"}):
        res = get(base, "/incidents", acme, **params)
        assert (res.status_code, res.json(), res.headers["x-total-count"]) == (200, [], "0"), params
    assert [i["id"] for i in get(base, "/incidents", acme, entity="leaf02:swp1").json()] == ["inc-storm"]
    assert [i["id"] for i in get(base, "/incidents", acme, job="4242", status="open").json()] == ACME_SEES[:2]
    assert [i["id"] for i in get(base, "/incidents", acme, tenant="acme", cause="storage_slow").json()] == ["inc-slow"]
    page = get(base, "/incidents", acme, limit=1, offset=1)
    assert [i["id"] for i in page.json()] == ["inc-noisy"] and page.headers["x-total-count"] == "3"
    assert "offset=2" in page.headers["link"]
    assert get(base, "/jobs/4243/incidents", acme).json() == get(base, "/jobs/nope/incidents", acme).json() == []
    assert [i["id"] for i in get(base, "/jobs/4242/incidents", acme).json()] == ACME_SEES


def test_another_tenants_incident_is_a_404_like_an_id_that_never_was(served):
    base, tokens = served
    for path in ("/incidents/{}", "/incidents/{}/topology"):
        theirs = get(base, path.format("inc-globex-link"), tokens["acme"])
        nothing = get(base, path.format("inc-never"), tokens["acme"])
        assert (theirs.status_code, nothing.status_code) == (404, 404)
        assert theirs.json()["detail"] == nothing.json()["detail"].replace("inc-never", "inc-globex-link")
    assert get(base, "/incidents/inc-globex-link", tokens["globex"]).status_code == 200
    storm = get(base, "/incidents/inc-storm", tokens["acme"])
    assert storm.status_code == 200 and leaks(storm.text) == []


def test_a_tenants_incident_topology_shows_the_fabric_and_its_own_hosts_only(served):
    base, tokens = served
    res = get(base, "/incidents/inc-storm/topology", tokens["acme"])
    assert res.status_code == 200 and leaks(res.text) == []
    shown = {n["id"] for n in res.json()["nodes"]}
    assert "gpu001" in shown and "leaf02" in shown and not shown & set(GLOBEX_HOSTS)
    full = get(base, "/incidents/inc-storm/topology", tokens["operator"]).json()
    assert "gpu005" in {n["id"] for n in full["nodes"]}


def test_a_tenants_stream_carries_its_incidents_scoped_and_nothing_of_others(served, module_db_url):
    base, tokens = served
    events = Events(f"{base}/incidents/stream", headers={"Authorization": f"Bearer {tokens['acme']}"},
                    params={"after": 0})
    try:
        got = events.drain(quiet=1.0)
        assert events.status == 200
        assert [e["event"] for e in got][0] == "ready"
        assert sorted(json.loads(e["data"])["id"] for e in got if e["event"] == "incident") == sorted(ACME_SEES)
        assert all(e["event"] in ("ready", "incident") for e in got)  # no `gone` for what it never saw
        engine = make_engine(module_db_url)
        with Session(engine) as session:  # globex's own incident changes, then one both share
            repo.upsert_incidents(session, incidents=[{**LINK, "updated_at": "2025-11-29T07:09:00.000Z"}])
            repo.upsert_incidents(session, incidents=[{**STORM, "updated_at": "2025-11-29T07:09:00.000Z"}])
        engine.dispose()
        later = events.drain(quiet=1.0)
        assert [(e["event"], json.loads(e["data"])["id"]) for e in later] == [("incident", "inc-storm")]
        assert leaks("\n".join(events.lines)) == []
    finally:
        events.close()
    refused = httpx.get(f"{base}/incidents/stream", timeout=30)
    assert refused.status_code == 401 and refused.json()["detail"]


def test_an_admin_makes_and_revokes_tokens_over_http(served):
    base, tokens = served
    admin = {"Authorization": f"Bearer {tokens['admin']}"}
    made = httpx.post(f"{base}/tokens", headers=admin, json={"role": "tenant", "tenant": "acme", "name": "ci"},
                      timeout=30)
    assert made.status_code == 201
    body = made.json()
    assert body["token"].startswith(f"frca_{body['id']}_") and body["role"] == "tenant" and body["revoked_at"] is None
    assert get(base, "/whoami", body["token"]).json() == {"auth": "tokens", "role": "tenant", "tenant": "acme",
                                                          "token_id": body["id"]}
    listed = httpx.get(f"{base}/tokens", headers=admin, timeout=30).json()
    assert body["id"] in {t["id"] for t in listed} and all("token" not in t for t in listed)
    bad = httpx.post(f"{base}/tokens", headers=admin, json={"role": "tenant"}, timeout=30)
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["body", "tenant"]
    assert httpx.delete(f"{base}/tokens/{body['id']}", headers=admin, timeout=30).json()["revoked_at"]
    assert get(base, "/incidents", body["token"]).status_code == 401  # at once
    assert httpx.delete(f"{base}/tokens/nope", headers=admin, timeout=30).status_code == 404


def test_the_cli_makes_tokens_and_the_store_keeps_only_their_hash(tmp_path, capsys):
    db = tmp_path / "rca.db"
    assert main(["tokens", "add", "--role", "tenant", "--db", str(db)]) == 2
    assert "needs the tenant" in capsys.readouterr().err
    assert main(["tokens", "add", "--role", "operator", "--tenant", "acme", "--db", str(db)]) == 2
    capsys.readouterr()
    assert main(["tokens", "add", "--role", "admin", "--name", "first", "--db", str(db), "--format", "json"]) == 0
    made = json.loads(capsys.readouterr().out)
    assert made["token"].encode() not in db.read_bytes() + (tmp_path / "rca.db-wal").read_bytes()
    assert main(["tokens", "list", "--db", str(db)]) == 0
    listed = capsys.readouterr().out
    assert made["id"] in listed and "admin" in listed and made["token"] not in listed
    assert main(["tokens", "revoke", made["id"], "--db", str(db)]) == 0
    assert main(["tokens", "revoke", "nope", "--db", str(db)]) == 2


def test_serve_asks_for_tokens_unless_run_with_auth_none(tmp_path):
    db = tmp_path / "rca.db"
    for flags, status, said in (([], 401, "auth: tokens, and the store holds none yet"),
                                (["--auth", "none"], 200, "auth: none")):
        port = free_port()
        server = WorkerProcess("serve", ["serve", "--db", str(db), "--port", str(port), *flags], port=port,
                               log_path=tmp_path / f"serve-{port}.log")
        try:
            server.wait_healthy(timeout=60)
            assert httpx.get(f"{server.base}/incidents", timeout=30).status_code == status
        finally:
            server.stop()
        assert said in (tmp_path / f"serve-{port}.log").read_text()


def test_the_demo_serves_with_auth_none_and_says_so(tmp_path):
    port = free_port()
    demo = subprocess.Popen([sys.executable, "-m", "cli.main", "demo", "--out", str(tmp_path), "--port", str(port)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = []
        while not any("Ctrl-C" in line for line in lines):
            line = demo.stdout.readline()
            assert line, "".join(lines)
            lines.append(line)
        assert "--auth none" in "".join(lines) and f"http://127.0.0.1:{port}/console/" in "".join(lines)
        for _ in range(200):
            try:
                res = httpx.get(f"http://127.0.0.1:{port}/incidents", timeout=5)
                break
            except httpx.TransportError:
                import time
                time.sleep(0.05)
        assert res.status_code == 200 and len(res.json()) == 3
    finally:
        demo.terminate()
        demo.wait(timeout=30)
