"""schemathesis against the real served API: no input makes it answer 5xx or off-schema.

The server is `api.server.running_server` (uvicorn on 127.0.0.1, a free port) on a
store holding the incidents of a replayed pfc_storm scenario, SQLite and PostgreSQL
(FABRIC_RCA_TEST_PG, see tests/conftest.py): a NUL was harmless on one, a 503 on the other. Every operation
of its OpenAPI schema gets schema-conforming (positive) and schema-violating (negative)
requests, a bounded number of each; every answer must be a non-5xx that the schema
documents (status, content type, body, headers), and what violates the schema must be
refused with a 4xx. The server asks for tokens (`--auth tokens`, the default) and every
request carries an admin token, so every route is reached past its refusals (which
tests/test_auth.py checks).
"""
from __future__ import annotations

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from api.auth import add_token
from api.server import running_server
from api.store.db import create_schema, make_engine
from cli.main import main

pytestmark = pytest.mark.slow

MAX_EXAMPLES = 100  # per operation and mode: about 25 s per backend on 2 busy cores
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
    negative_data_rejection,
]


@pytest.fixture(scope="module")
def admin_headers(module_db_url) -> dict[str, str]:
    from sqlmodel import Session

    engine = make_engine(module_db_url)
    create_schema(engine)
    with Session(engine) as session:
        _, token = add_token(session, role="admin", name="fuzz")
    engine.dispose()
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def served(scenario_dir, module_db_url, admin_headers) -> str:
    folder = scenario_dir("pfc_storm")
    code = main(["replay", str(folder / "telemetry.jsonl.gz"), "--topology", str(folder / "topology.dot"),
                 "--jobs", str(folder / "jobs.jsonl"), "--db", module_db_url, "--quiet"])
    assert code == 0
    with running_server(db_url=module_db_url) as base_url:
        assert httpx.get(f"{base_url}/incidents", headers=admin_headers).json(), "the replay stored no incident"
        yield base_url


@pytest.fixture(scope="module")
def api_schema(served: str, admin_headers):
    from schemathesis.config._auth import AuthConfig

    schema = schemathesis.openapi.from_url(f"{served}/openapi.json")
    schema.config.generation.update(deterministic=True)
    # the bearer scheme's credentials: schemathesis sends them and leaves them out of its mutations
    schema.config.auth = AuthConfig(openapi={"HTTPBearer": {"bearer": admin_headers["Authorization"][7:]}})
    return schema


# Every operation, one by one (schemathesis's own `from_fixture` parametrizer does not run
# on this pytest); test_every_operation_is_fuzzed keeps the list complete.
OPERATIONS = [
    ("GET", "/healthz"),
    ("GET", "/incidents"),
    ("GET", "/incidents/{incident_id}"),
    ("GET", "/jobs/{job_id}/incidents"),
    ("GET", "/topology"),
    ("GET", "/topology/layout"),
    ("GET", "/incidents/{incident_id}/topology"),
    ("POST", "/maintenance"),
    ("GET", "/maintenance"),
    ("DELETE", "/maintenance/{window_id}"),
    ("POST", "/incidents/{incident_id}/feedback"),
    ("GET", "/incidents/{incident_id}/feedback"),
    ("GET", "/feedback/precision"),
    ("GET", "/metrics"),
    ("POST", "/tokens"),
    ("GET", "/tokens"),
    ("DELETE", "/tokens/{token_id}"),
    ("GET", "/whoami"),
]
# An endless event stream: a valid request never ends, so it is not fuzzed here;
# tests/test_stream.py checks its events and its 422s.
STREAMS = {("GET", "/incidents/stream")}


def test_every_operation_is_fuzzed(api_schema):
    found = {(op.ok().method.upper(), op.ok().path) for op in api_schema.get_all_operations()}
    assert found == set(OPERATIONS) | STREAMS


def test_the_fuzz_gets_past_the_token_check(api_schema):
    """Every case carries the admin token: a fuzz answered 401 throughout would test nothing."""
    operation = api_schema["/whoami"]["GET"]

    @given(case=operation.as_strategy(generation_mode=GenerationMode.POSITIVE))
    @settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def check(case) -> None:
        res = case.call()
        assert res.status_code == 200 and res.json()["role"] == "admin", res.text

    check()


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=str)
@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_no_request_gets_a_5xx_or_an_answer_off_the_schema(api_schema, method, path, mode):
    operation = api_schema[path][method]
    if mode is GenerationMode.NEGATIVE and not list(operation.iter_parameters()) and not operation.body:
        pytest.skip(f"{method} {path} takes no parameter nor body: no request can violate its schema")
    strategy = operation.as_strategy(generation_mode=mode)

    @given(case=strategy)
    @settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck),
              database=None, phases=[Phase.explicit, Phase.generate])
    def fuzz(case) -> None:
        case.call_and_validate(checks=CHECKS)

    fuzz()
