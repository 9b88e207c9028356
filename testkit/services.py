"""A Kafka broker or a PostgreSQL server of one test's (or benchmark's) own:
scripts/kafka-dev or scripts/pg-dev on free ports with a state folder of its own, to start,
stop (a no-op when not running) and start again."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from testkit.ports import free_ports

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


class DevService:
    """One of scripts/*-dev with the environment `env` adds to this process's."""

    def __init__(self, script: str, env: dict[str, str], *, timeout: float = 240):
        self.script = str(SCRIPTS / script)
        self.env = dict(os.environ, **env)
        self.timeout = timeout

    def run(self, verb: str, *flags: str) -> str:
        """The last line the script printed (its address, on start); RuntimeError if it failed."""
        out = subprocess.run([self.script, verb, *flags], env=self.env, capture_output=True, text=True,
                             timeout=self.timeout)
        if out.returncode != 0:
            raise RuntimeError(f"scripts/{os.path.basename(self.script)} {verb} failed "
                               f"({out.returncode}):\n{out.stdout}{out.stderr}")
        return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""

    def start(self) -> str:
        return self.run("start")

    def stop(self) -> None:
        self.run("stop")


class KafkaDev(DevService):
    """scripts/kafka-dev on two free ports (broker, controller), state in `state_dir`."""

    def __init__(self, state_dir: Path, *, timeout: float = 240):
        port, controller = free_ports(2)
        super().__init__("kafka-dev", {"KAFKA_PORT": str(port), "KAFKA_CONTROLLER_PORT": str(controller),
                                       "KAFKA_STATE_DIR": str(state_dir)}, timeout=timeout)


class PgDev(DevService):
    """scripts/pg-dev on a free port. Its state lives under /tmp: run as root, the server
    runs as `postgres`, which cannot enter pytest's 0700 folders. `remove` stops it and
    deletes that state."""

    def __init__(self, *, timeout: float = 180):
        self.dir = tempfile.mkdtemp(prefix="fabric-rca-pg-")
        os.chmod(self.dir, 0o755)
        super().__init__("pg-dev", {"PG_PORT": str(free_ports(1)[0]), "PG_STATE_DIR": os.path.join(self.dir, "pg")},
                         timeout=timeout)

    def remove(self) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
