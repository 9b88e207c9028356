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


@pytest.mark.skipif(not glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                    reason="PostgreSQL server binaries not installed (scripts/pg-dev start installs them)")
def test_pg_dev_moves_its_default_port_when_taken_and_refuses_a_taken_explicit_one(tmp_path):
    """A CI machine may have another server on 55432 (the last CI refused to start there):
    the default moves to the next free port and says so; an explicit PG_PORT is refused."""
    import socket
    import tempfile

    held = socket.socket()
    try:
        held.bind(("127.0.0.1", 55432))
        held.listen()
    except OSError:
        pass  # already taken by another process: just as good
    state = tempfile.mkdtemp(prefix="fabric-rca-pg-")
    os.chmod(state, 0o755)
    env = {k: v for k, v in os.environ.items() if k != "PG_PORT"} | {"PG_STATE_DIR": os.path.join(state, "pg")}

    def pg(cmd: str, **extra) -> subprocess.CompletedProcess:
        return subprocess.run([str(REPO / "scripts" / "pg-dev"), cmd], env=env | extra, capture_output=True,
                              text=True, timeout=120)
    try:
        refused = pg("start", PG_PORT="55432")
        assert refused.returncode == 1
        assert "port 55432 on 127.0.0.1 is already in use by another process (set another PG_PORT" in refused.stderr
        started = pg("start")
        assert started.returncode == 0, started.stderr
        url = started.stdout.strip().splitlines()[-1]
        port = int(re.search(r":(\d+)/fabric_rca_test$", url).group(1))
        assert 55432 < port < 55532
        assert f"port 55432 on 127.0.0.1 is in use by another process; using {port}" in started.stderr
        assert pg("status").stdout.startswith(f"running 127.0.0.1:{port} pid ")
    finally:
        pg("stop")
        held.close()
        shutil.rmtree(state, ignore_errors=True)
