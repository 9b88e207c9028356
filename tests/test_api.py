"""The HTTP API through a real uvicorn server on 127.0.0.1, with a real database.

Every test runs on a SQLite file and on PostgreSQL (FABRIC_RCA_TEST_PG, see
tests/conftest.py).
"""
from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from urllib.parse import parse_qs, urlparse

import httpx
import pytest
from sqlalchemy import text
from sqlmodel import Session

from api.routes import TEXT_PATTERN
from api.schemas import CauseName
from api.server import running_server
from api.store import repository as repo
from api.store.db import create_schema, make_engine
from api.store.repository import MAX_OFFSET
from engine.types import CAUSES

T0 = datetime(2025, 11, 29, 7, 0, tzinfo=timezone.utc)
TOPOLOGY = {"devices": [{"name": "leaf01", "role": "leaf"}], "links": []}


def at(minutes: float) -> str:
    moment = T0 + timedelta(minutes=minutes)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def make_incident(
    n: int,
    *,
    opened: float,
    resolved: float | None = None,
    cause: str = "pfc_storm",
    entity: str = "gpu017:eth0",
    jobs: tuple[tuple[str, str], ...] = (("4242", "acme"),),
) -> dict:
    """An incident in the contract section 6 shape."""
    return {
        "id": f"inc-{n:012x}",
        "status": "open" if resolved is None else "resolved",
        "severity": ("critical", "major", "minor")[n % 3],
        "opened_at": at(opened),
        "updated_at": at(opened + 1),
        "resolved_at": None if resolved is None else at(resolved),
        "detected_at": at(opened + 0.05),
        "title": f"{cause} on {entity}",
        "maintenance": False,  # (stored and served since maintenance windows: contract section 6 plus)
        "maintenance_reason": None,
        "root_causes": [
            {"rank": 1, "cause": cause, "entity": {"kind": "interface", "id": entity}, "score": 0.93,
             "evidence": [{"symptom": "pfc_pause_tx", "at": at(opened), "metrics": {"tx_pause_rate": 1.5}}]},
            {"rank": 2, "cause": "congestion", "entity": {"kind": "interface", "id": "leaf09:swp1"},
             "score": 0.41, "evidence": []},
        ],
        "affected_jobs": [{"job_id": j, "tenant": t, "impact": f"crosses {entity}", "hosts": []} for j, t in jobs],
        "symptoms": [
            {"key": f"k{n}", "kind": "pfc_pause_tx", "family": "pfc",
             "entity": {"kind": "interface", "id": entity}, "device": entity.split(":")[0],
             "start": at(opened), "last": at(opened + 0.5), "end": None if resolved is None else at(resolved),
             "severity": 0.8, "metrics": {"tx_pause_rate": 12000.0}, "rule": "pfc_tx_pause",
             "samples": {"tx_pause_rate": [[1764400000.0, 9000.0], [1764400000.5, 12000.0]]}},
        ],
    }


INCIDENTS = [
    make_incident(1, opened=0, resolved=10, cause="link_flap", entity="gpu001:eth0", jobs=(("100", "acme"),)),
    make_incident(2, opened=20, jobs=(("200", "beta"), ("100", "acme"))),
    make_incident(3, opened=40, resolved=50, cause="storage_slow", entity="stor01:nvme0", jobs=(("300", "beta"),)),
    make_incident(4, opened=60, cause="nic_degraded", entity="gpu002:eth1", jobs=()),
    make_incident(5, opened=80, cause="microburst", entity="leaf03:swp9"),
]
NEWEST_FIRST = sorted(INCIDENTS, key=lambda i: i["opened_at"], reverse=True)


def fill(db_url: str, *, incidents: list[dict], topology: dict | None = None) -> None:
    engine = make_engine(db_url)
    create_schema(engine)
    with Session(engine) as session:
        repo.upsert_incidents(session, incidents=incidents)
        if topology is not None:
            repo.save_topology(session, document=topology)
    engine.dispose()


@pytest.fixture(scope="module")
def api(module_db_url: str) -> httpx.Client:
    fill(module_db_url, incidents=INCIDENTS)
    with running_server(db_url=module_db_url, topology=TOPOLOGY, auth="none") as base_url:
        with httpx.Client(base_url=base_url, timeout=5) as client:
            yield client


def ids(response: httpx.Response) -> list[str]:
    return [incident["id"] for incident in response.json()]


def inc(n: int) -> str:
    return f"inc-{n:012x}"


# ---------------------------------------------------------------- reading


def test_healthz(api):
    response = api.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "db": "ok", "incidents": len(INCIDENTS)}


def test_list_serves_the_stored_incidents_exactly_newest_first(api):
    response = api.get("/incidents")
    assert response.status_code == 200
    assert response.json() == NEWEST_FIRST
    assert [list(i) for i in response.json()] == [list(i) for i in NEWEST_FIRST]  # key order
    assert response.headers["X-Total-Count"] == str(len(INCIDENTS))
    assert "Link" not in response.headers


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"status": "open"}, [5, 4, 2]),
        ({"status": "resolved"}, [3, 1]),
        ({"cause": "link_flap"}, [1]),
        ({"cause": "congestion"}, [5, 4, 3, 2, 1]),  # everyone's rank-2 cause
        ({"entity": "stor01"}, [3]),  # a device
        ({"entity": "gpu002:eth1"}, [4]),
        ({"job": "100"}, [2, 1]),
        ({"tenant": "beta"}, [3, 2]),
        ({"tenant": "beta", "status": "resolved"}, [3]),
        ({"since": at(45), "until": at(70)}, [4, 3, 2]),
        ({"until": "2025-11-29T08:00:00+01:00"}, [1]),  # 07:00Z, an offset
        ({"since": str((T0 + timedelta(minutes=55)).timestamp())}, [5, 4, 2]),  # epoch seconds
        ({"until": str(int(T0.timestamp()))}, [1]),
    ],
)
def test_filters(api, query, expected):
    response = api.get("/incidents", params=query)
    assert response.status_code == 200, response.text
    assert ids(response) == [inc(n) for n in expected]
    assert response.headers["X-Total-Count"] == str(len(expected))


def test_an_unencoded_plus_in_a_time_offset_is_understood(api):
    response = api.get("/incidents?until=2025-11-29T08:00:00+01:00")
    assert response.status_code == 200, response.text
    assert ids(response) == [inc(1)]


def test_paging_with_link_next(api):
    first = api.get("/incidents", params={"limit": 2, "status": "open"})
    assert ids(first) == [inc(5), inc(4)]
    assert first.headers["X-Total-Count"] == "3"
    link = first.headers["Link"]
    assert link.endswith('; rel="next"')
    next_url = link[link.index("<") + 1 : link.index(">")]
    assert parse_qs(urlparse(next_url).query) == {"limit": ["2"], "status": ["open"], "offset": ["2"]}
    second = api.get(next_url)
    assert ids(second) == [inc(2)]
    assert "Link" not in second.headers
    assert api.get("/incidents", params={"offset": 10}).json() == []


def test_get_one_and_404(api):
    response = api.get(f"/incidents/{inc(2)}")
    assert response.status_code == 200
    assert response.json() == INCIDENTS[1]
    missing = api.get("/incidents/x")
    assert missing.status_code == 404
    assert missing.json() == {"detail": "no incident with id 'x'"}


def test_job_incidents(api):
    assert ids(api.get("/jobs/100/incidents")) == [inc(2), inc(1)]
    assert api.get("/jobs/nope/incidents").json() == []


def test_topology_given_to_the_server(api):
    response = api.get("/topology")
    assert response.status_code == 200
    assert response.json() == TOPOLOGY


# ---------------------------------------------------------------- bad requests


@pytest.mark.parametrize(
    ("query", "parameter"),
    [
        ({"status": "closed"}, "status"),
        ({"cause": "gremlins"}, "cause"),
        ({"limit": 0}, "limit"),
        ({"limit": 1001}, "limit"),
        ({"limit": "many"}, "limit"),
        ({"offset": -1}, "offset"),
        ({"since": "yesterday"}, "since"),
        ({"until": "2025-13-45T99:00:00Z"}, "until"),
        ({"until": "1e400"}, "until"),
        ({"since": at(30), "until": at(10)}, "since"),
    ],
)
def test_422_names_the_parameter(api, query, parameter):
    response = api.get("/incidents", params=query)
    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert error["loc"] == ["query", parameter]


@pytest.mark.parametrize(
    ("query", "parameter", "why"),
    [
        ({"offset": MAX_OFFSET + 1}, "offset", "less than or equal to 2147483647"),
        ({"offset": 2**63 - 1}, "offset", "less than or equal"),  # was a reset connection on SQLite
        ({"offset": 2**63}, "offset", "less than or equal"),  # was a 500 on SQLite, a 503 on PostgreSQL
        ({"entity": "gpu\x00001"}, "entity", "control characters"),  # was a 503 on PostgreSQL
        ({"job": "\x00"}, "job", "control characters"),
        ({"tenant": "acme\n"}, "tenant", "control characters"),
        ({"entity": "a\x7f"}, "entity", "control characters"),
        ({"entity": "a\x85"}, "entity", "control characters"),  # C1 (NEL)
        ({"since": "\x00"}, "since", "control characters"),
        ({"until": "2025-11-29T07:00:00Z\x1f"}, "until", "control characters"),
        ({"since": "9999-12-31T23:59:59-01:00"}, "since", "out of range"),  # was a 503: UTC overflow
        ({"until": "0001-01-01T00:00:00+01:00"}, "until", "out of range"),
        ({"since": "x" * 65}, "since", "at most 64 characters"),
        ({"since": ""}, "since", "since must not be empty"),
        ({"entity": ""}, "entity", "entity must not be empty"),
        ({"job": ""}, "job", "job must not be empty"),
    ],
)
def test_client_mistakes_are_422_saying_which_parameter_and_why(api, query, parameter, why):
    response = api.get("/incidents", params=query)
    assert response.status_code == 422, response.text
    [error] = response.json()["detail"]
    assert error["loc"] == ["query", parameter]
    assert why in error["msg"]


@pytest.mark.parametrize(
    ("path", "parameter"),
    [("/incidents/inc-%00", "incident_id"), ("/incidents/%01", "incident_id"), ("/jobs/42%00/incidents", "job_id")],
)
def test_control_characters_in_a_path_id_are_422(api, path, parameter):
    response = api.get(path)
    assert response.status_code == 422, response.text
    [error] = response.json()["detail"]
    assert error["loc"] == ["path", parameter]
    assert f"{parameter} must not contain control characters" in error["msg"]


def test_the_largest_offset_and_times_at_the_ends_of_the_range_are_served(api):
    assert api.get("/incidents", params={"offset": MAX_OFFSET}).json() == []
    assert ids(api.get("/incidents", params={"since": "9999-12-31T23:59:59Z"})) == [inc(5), inc(4), inc(2)]
    assert ids(api.get("/incidents", params={"until": "0001-01-01T00:00:00Z"})) == []
    assert ids(api.get("/incidents", params={"entity": "gpu002:eth1 ünïcode"})) == []


def test_422_for_a_time_says_the_accepted_formats(api):
    [error] = api.get("/incidents", params={"since": "yesterday"}).json()["detail"]
    assert "since" in error["msg"] and "RFC 3339" in error["msg"] and "epoch seconds" in error["msg"]


def test_every_contract_cause_is_accepted(api):
    assert set(CauseName.__args__) == set(CAUSES)
    for cause in CAUSES:
        assert api.get("/incidents", params={"cause": cause}).status_code == 200


# ---------------------------------------------------------------- documentation


def test_openapi_lists_the_routes(api):
    spec = api.get("/openapi.json").json()
    assert spec["info"]["title"] == "fabric-rca"
    assert spec["info"]["description"]
    assert {"/healthz", "/incidents", "/incidents/{incident_id}", "/jobs/{job_id}/incidents", "/topology"} <= set(
        spec["paths"]
    )
    ok = spec["paths"]["/incidents"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert ok["items"]["$ref"].endswith("/IncidentPublic")
    for name in ("IncidentPublic", "RootCausePublic", "EntityPublic", "AffectedJobPublic", "SymptomPublic"):
        assert name in spec["components"]["schemas"]
    assert api.get("/docs").status_code == 200


def test_openapi_states_the_bounds_of_every_parameter(api):
    spec = api.get("/openapi.json").json()
    listing = spec["paths"]["/incidents"]["get"]
    params = {p["name"]: p["schema"] for p in listing["parameters"]}
    assert params["offset"]["maximum"] == MAX_OFFSET and params["offset"]["minimum"] == 0
    assert params["limit"] == {"type": "integer", "maximum": 1000, "minimum": 1, "default": 50, "title": "Limit"}
    for name in ("entity", "job", "tenant", "since", "until"):
        [text] = [s for s in params[name]["anyOf"] if s["type"] == "string"]
        assert text["minLength"] == 1 and text["pattern"] == TEXT_PATTERN, name
    for path in ("/incidents/{incident_id}", "/jobs/{job_id}/incidents"):
        [param] = spec["paths"][path]["get"]["parameters"]
        assert param["schema"]["minLength"] == 1 and param["schema"]["pattern"] == TEXT_PATTERN
    for path in ("/incidents", "/incidents/{incident_id}", "/jobs/{job_id}/incidents", "/topology"):
        assert "503" in spec["paths"][path]["get"]["responses"], path
    assert set(listing["responses"]["200"]["headers"]) == {"X-Total-Count", "Link"}


# ---------------------------------------------------------------- other servers


def test_topology_from_the_store_or_404(new_db_url):
    empty = new_db_url()
    with running_server(db_url=empty, auth="none") as base_url:
        response = httpx.get(f"{base_url}/topology")
        assert response.status_code == 404
        assert "no topology" in response.json()["detail"]
        assert httpx.get(f"{base_url}/healthz").json() == {"status": "ok", "db": "ok", "incidents": 0}
    stored = new_db_url()
    fill(stored, incidents=[], topology=TOPOLOGY)
    with running_server(db_url=stored, auth="none") as base_url:
        assert httpx.get(f"{base_url}/topology").json() == TOPOLOGY


def test_healthz_503_when_the_database_breaks(db_url: str, request):
    with running_server(db_url=db_url, auth="none") as base_url:
        engine = make_engine(db_url)  # the server has made the schema by now
        with engine.begin() as connection:
            for table in ("symptom", "root_cause", "affected_job", "incident"):
                connection.execute(text(f"DROP TABLE {table}"))
        engine.dispose()
        response = httpx.get(f"{base_url}/healthz")
        assert response.status_code == 503
        body = response.json()
        assert body["status"] == "error" and body["db"] == "error"
        assert re.search(r"no such table: incident|relation \"incident\" does not exist", body["detail"])
        listed = httpx.get(f"{base_url}/incidents")
        assert listed.status_code == 503
        assert "database unavailable" in listed.json()["detail"]
