import os
import uuid

import pytest
from hypothesis import settings
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from api.store.db import StoreError, make_engine


# Property tests check answers, not speed: hypothesis's default 200 ms deadline per example
# failed them on this shared 2-core machine whenever another process held a core.
settings.register_profile("fabric-rca", deadline=None)
settings.load_profile("fabric-rca")


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


def require_service(env: str, how: str) -> str:
    """The address in `env`; without it a test fails in CI and is skipped elsewhere."""
    value = os.environ.get(env, "").strip()
    if not value:
        msg = f"{env} is not set: {how}"
        if in_ci():
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    return value


@pytest.fixture(scope="session")
def kafka_bootstrap() -> str:
    """A real broker's address (scripts/test starts one; or `scripts/kafka-dev start`)."""
    return require_service("KAFKA_BOOTSTRAP", "start a broker with `scripts/kafka-dev start` "
                                              "and export KAFKA_BOOTSTRAP=<its last line>")


@pytest.fixture(scope="session")
def telegraf():
    """The Telegraf binary scripts/tools builds (its path, or $FABRIC_RCA_TELEGRAF); missing,
    a test fails in CI (.ci/run builds it) and is skipped elsewhere."""
    from testkit.tools import telegraf_path, telegraf_ready

    if not telegraf_ready():
        msg = f"no Telegraf at {telegraf_path()}: build it with `scripts/tools build telegraf` (a few minutes, once)"
        if in_ci():
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    return telegraf_path()


@pytest.fixture(scope="session")
def scenario_dir(tmp_path_factory):
    """Generate a scenario once per session: scenario_dir(name) -> folder."""
    import sim

    made: dict[str, object] = {}

    def make(name: str, **kwargs):
        key = name + repr(sorted(kwargs.items()))
        if key not in made:
            out = tmp_path_factory.mktemp(name)
            sim.simulate(out=out, scenario=name, seed=kwargs.pop("seed", 7), **kwargs)
            made[key] = out
        return made[key]

    return make


@pytest.fixture(scope="session")
def replay_once():
    """replay_once(folder) -> evaluation.scenarios.replay_scenario(folder) (truth, incidents,
    stats), replayed once per session and folder, each caller getting a copy of its own.
    For the tests that take the plain replay as their reference (the Kafka tests compare
    the workers' incidents to it); a test of the replay itself calls replay_scenario. The
    replay is deterministic (tests/test_scenarios.py::test_replay_is_deterministic), so
    a stored one is the one a fresh call would give; it is ~5 s of a core per call."""
    import copy

    from evaluation.scenarios import replay_scenario

    made: dict[str, tuple] = {}

    def replay(folder):
        key = str(folder)
        if key not in made:
            made[key] = replay_scenario(folder)
        return copy.deepcopy(made[key])

    return replay


# ---------------------------------------------------------------- databases
#
# Store and API tests run on every backend: a SQLite file always, and PostgreSQL when
# FABRIC_RCA_TEST_PG holds a URL (`scripts/pg-dev start` prints one). Without it the
# PostgreSQL variants fail in CI (CI set) and are skipped elsewhere. Each PostgreSQL
# database is a fresh schema of its own (search_path), dropped afterwards.

PG_ENV = "FABRIC_RCA_TEST_PG"
# A session time zone far from UTC (+05:45, no DST): stored times must not depend on it.
PG_SESSION_TIMEZONE = "Asia/Kathmandu"
DB_BACKENDS = ("sqlite", pytest.param("postgresql", marks=pytest.mark.postgres))


def pytest_configure(config):
    config.addinivalue_line(
        "markers", f"postgres: needs a PostgreSQL server ({PG_ENV}; scripts/pg-dev start)"
    )


class _PostgresServer:
    """The server named by FABRIC_RCA_TEST_PG; hands out one fresh schema per database."""

    def __init__(self, url: str):
        self.url = make_url(url)
        shown = self.url.render_as_string(hide_password=True)
        if self.url.get_backend_name() != "postgresql":
            pytest.fail(f"{PG_ENV}={shown}: not a postgresql:// URL", pytrace=False)
        reason = None
        try:
            self.admin = make_engine(url)
            with self.admin.connect() as connection:
                connection.execute(text("SELECT 1"))
        except (StoreError, SQLAlchemyError) as exc:
            reason = getattr(exc, "orig", None) or exc
        if reason is not None:
            pytest.fail(f"{PG_ENV}={shown}: cannot use that PostgreSQL server: {reason}", pytrace=False)

    def new(self) -> str:
        schema = f"fabric_rca_test_{uuid.uuid4().hex[:12]}"
        with self.admin.begin() as connection:
            connection.execute(text(f'CREATE SCHEMA "{schema}"'))
        given = self.url.query.get("options", "")
        options = f"{given} -c search_path={schema} -c timezone={PG_SESSION_TIMEZONE}".strip()
        url = self.url.update_query_dict({"options": options, "application_name": schema})
        return url.render_as_string(hide_password=False)

    def drop(self, url: str) -> None:
        """Drop the database's schema, ending any connection a test left open on it."""
        schema = make_url(url).query["application_name"]
        with self.admin.begin() as connection:
            connection.execute(
                text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = :s"),
                {"s": schema},
            )
            connection.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))


@pytest.fixture(scope="session")
def postgres_server():
    url = os.environ.get(PG_ENV, "").strip()
    if not url:
        msg = (f"{PG_ENV} is not set: start a server with `scripts/pg-dev start` and "
               f"export {PG_ENV}=<its last line>")
        if os.environ.get("CI", "").lower() not in ("", "0", "false", "no"):
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    server = _PostgresServer(url)
    yield server
    server.admin.dispose()


class _Databases:
    """Fresh, empty databases on one backend, each removed at `close`."""

    def __init__(self, backend: str, request, tmp_dir):
        self.server = request.getfixturevalue("postgres_server") if backend == "postgresql" else None
        self.tmp_dir = tmp_dir
        self.urls: list[str] = []

    def new(self) -> str:
        if self.server is None:
            url = f"sqlite:///{self.tmp_dir}/db-{len(self.urls)}/incidents.db"
        else:
            url = self.server.new()
        self.urls.append(url)
        return url

    def close(self) -> None:
        if self.server is not None:
            for url in self.urls:
                self.server.drop(url)


@pytest.fixture(params=DB_BACKENDS)
def new_db_url(request, tmp_path):
    """`new_db_url()` -> the URL of a fresh, empty database; one run per backend."""
    databases = _Databases(request.param, request, tmp_path)
    yield databases.new
    databases.close()


@pytest.fixture
def db_url(new_db_url) -> str:
    """The URL of a fresh, empty database; one run per backend."""
    return new_db_url()


@pytest.fixture(scope="module", params=DB_BACKENDS)
def module_db_url(request, tmp_path_factory) -> str:
    """Like `db_url`, shared by the tests of one module."""
    databases = _Databases(request.param, request, tmp_path_factory.mktemp(request.param))
    yield databases.new()
    databases.close()
