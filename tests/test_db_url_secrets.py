"""A database URL's password is never printed: serve, replay, its --json summary, errors, settings."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from api.store.db import StoreError, make_engine, redacted_url
from cli.main import main
from compose import EngineSettings
from streams.settings import WorkerSettings

SECRET = "s3cret"
ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"postgresql+psycopg://u:{SECRET}@127.0.0.1/x", "postgresql+psycopg://u:***@127.0.0.1/x"),
        (f"postgresql://u:{SECRET}@h:5432/x?sslmode=require", "postgresql://u:***@h:5432/x?sslmode=require"),
        ("postgresql+psycopg://u@127.0.0.1/x", "postgresql+psycopg://u@127.0.0.1/x"),
        ("sqlite:///out/x.db", "sqlite:///out/x.db"),
        (f"postgresql://u:{SECRET}@h:notaport/x", "postgresql://u:***@h:notaport/x"),  # SQLAlchemy cannot parse it
    ],
)
def test_redacted_url(url, shown):
    assert redacted_url(url) == shown


def test_redacted_url_takes_a_parsed_url_too():
    assert redacted_url(make_url(f"postgresql://u:{SECRET}@h/x")) == "postgresql://u:***@h/x"


def test_store_errors_hide_the_password():
    with pytest.raises(StoreError) as caught:
        make_engine(f"postgresql+psycopg://u:{SECRET}@h:notaport/x")
    assert SECRET not in str(caught.value) and "u:***@h" in str(caught.value)


def test_worker_settings_repr_hides_the_url():
    settings = WorkerSettings(bootstrap="127.0.0.1:9092", db_url=f"postgresql://u:{SECRET}@h/x",
                              engine=EngineSettings(topology=Path("t")))
    assert SECRET not in repr(settings)


def with_password(url: str) -> str:
    """The test server's URL with a password (its trust authentication ignores it)."""
    return make_url(url).set(password=SECRET).render_as_string(hide_password=False)


@pytest.mark.postgres
@pytest.mark.parametrize("as_json", [False, True])
def test_replay_output_hides_the_password(postgres_server, scenario_dir, tmp_path, capsys, as_json):
    folder = scenario_dir("pfc_storm")
    url = with_password(postgres_server.new())
    try:
        args = ["replay", str(folder / "telemetry.jsonl.gz"), "--topology", str(folder / "topology.dot"),
                "--db", url, "--quiet"] + (["--json"] if as_json else [])
        assert main(args) == 0
    finally:
        postgres_server.drop(url)
    out, err = capsys.readouterr()
    assert SECRET not in out + err
    if as_json:
        assert json.loads(out)["db"] == redacted_url(url)
        assert ":***@" in json.loads(out)["db"]
    else:
        assert f"into {redacted_url(url)}" in out


def test_replay_into_an_unreachable_database_hides_the_password(scenario_dir, capsys):
    folder = scenario_dir("pfc_storm")
    args = ["replay", str(folder / "telemetry.jsonl.gz"), "--topology", str(folder / "topology.dot"),
            "--db", f"postgresql+psycopg://u:{SECRET}@127.0.0.1:1/x", "--quiet", "--json"]
    assert main(args) != 0
    out, err = capsys.readouterr()
    assert "error" in err
    assert SECRET not in out + err


def test_serve_prints_the_url_without_the_password():
    url = f"postgresql+psycopg://u:{SECRET}@127.0.0.1/x"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    server = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "serve", "--db", url, "--host", "127.0.0.1", "--port", "0"],
        cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True,
    )
    try:
        first = server.stderr.readline()
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert first.startswith("serving postgresql+psycopg://u:***@127.0.0.1/x on http://127.0.0.1:0")
    assert SECRET not in first + server.stderr.read()
