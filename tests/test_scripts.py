"""The dev scripts work from any clone: scripts/pg-dev in a folder the `postgres` user
cannot enter (pytest's tmp dirs are mode 700 as root) and with a space in its path."""
from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from testkit.ports import free_port as _free_port

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def _pg_dev(clone: Path, cmd: str, port: int) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PG_STATE_DIR"}
    env["PG_PORT"] = str(port)
    return subprocess.run([str(clone / "scripts" / "pg-dev"), cmd], env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.skipif(not glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                    reason="PostgreSQL server binaries not installed (scripts/pg-dev start installs them)")
def test_pg_dev_runs_from_a_closed_folder_with_a_space(tmp_path):
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    clone = closed / "my clone"
    (clone / "scripts").mkdir(parents=True)
    shutil.copy2(REPO / "scripts" / "pg-dev", clone / "scripts" / "pg-dev")
    port = _free_port()
    state = None
    try:
        started = _pg_dev(clone, "start", port)
        assert started.returncode == 0, started.stderr
        state = re.search(r"state dir: (.+)", started.stderr).group(1)
        assert started.stdout.strip().splitlines()[-1] == \
            f"postgresql+psycopg://postgres@127.0.0.1:{port}/fabric_rca_test"
        if os.geteuid() == 0:  # postgres cannot enter `closed`: the cluster lives elsewhere
            assert not state.startswith(str(tmp_path)), state
            assert os.stat(state).st_mode & 0o777 == 0o700
        status = _pg_dev(clone, "status", port)
        assert status.returncode == 0 and status.stdout.startswith(f"running 127.0.0.1:{port} pid "), status
        again = _pg_dev(clone, "start", port)  # idempotent: the same server, the same URL
        assert again.returncode == 0 and again.stdout.strip().endswith(f":{port}/fabric_rca_test"), again.stderr
    finally:
        stopped = _pg_dev(clone, "stop", port)
        assert stopped.returncode == 0 and stopped.stdout.startswith("stopped"), stopped
        after = _pg_dev(clone, "status", port)
        assert after.returncode == 3 and after.stdout.strip() == "stopped"
        if state and not state.startswith(str(tmp_path)):
            shutil.rmtree(state, ignore_errors=True)
