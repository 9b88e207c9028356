"""`fabric-rca worker` processes: one (`WorkerProcess`: started, /healthz, /metrics, log,
stopped) and the workers of one deployment (`Fleet`: one topic prefix, one store)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx

from testkit.metrics import scrape
from testkit.ports import free_port
from testkit.store import incident_summary, stored_incidents

ROOT = Path(__file__).resolve().parent.parent


class WorkerNotReady(RuntimeError):
    """A worker exited, or did not answer /healthz in time (the message ends with its log)."""


def worker_args(*, bootstrap: str, db: Path | str, folder: Path, prefix: str, port: int, data_dir: Path) -> list[str]:
    """`worker`'s arguments for a scenario folder (topology.dot, jobs.jsonl) on a prefix."""
    return ["worker", "--bootstrap", bootstrap, "--db", str(db), "--topology", str(folder / "topology.dot"),
            "--jobs", str(folder / "jobs.jsonl"), "--topic-prefix", prefix, "--metrics-port", str(port),
            "--data-dir", str(data_dir)]


class WorkerProcess:
    """`python -m cli.main <args>` in a session of its own, its output in `log_path`;
    `profile` runs it under cProfile, writing that file when it stops."""

    def __init__(self, name: str, args: list[str], *, port: int, log_path: Path, env: dict[str, str] | None = None,
                 profile: Path | None = None):
        self.name, self.port, self.log_path = name, port, log_path
        self.base = f"http://127.0.0.1:{port}"
        self.http = httpx.Client(timeout=5)
        python = [sys.executable] + (["-m", "cProfile", "-o", str(profile)] if profile else [])
        self._log = open(log_path, "w")
        self._terminated = False
        self.proc = subprocess.Popen(python + ["-m", "cli.main", *args], cwd=ROOT, env=env, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text()[-chars:]
        except OSError:
            return ""

    def healthy(self) -> bool:
        """/healthz answers 200; WorkerNotReady if the process has exited."""
        if not self.alive():
            raise WorkerNotReady(f"worker {self.name} exited with {self.proc.returncode}:\n{self.tail()}")
        try:
            return self.http.get(self.base + "/healthz", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    def wait_healthy(self, timeout: float = 60, poll: float = 0.3) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.healthy():
                return
            time.sleep(poll)
        raise WorkerNotReady(f"worker {self.name} did not answer /healthz within {timeout:.0f} s:\n{self.tail()}")

    def health(self) -> dict:
        return self.http.get(self.base + "/healthz").json()

    def metrics(self) -> dict[str, float]:
        return scrape(self.base, self.http)

    def kill(self) -> None:
        """SIGKILL to its whole session: no snapshot, no commit on the way out."""
        if self.alive():
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def terminate(self) -> None:
        """SIGTERM, once (faust shuts down cleanly; cProfile writes its file)."""
        if self.alive() and not self._terminated:
            self.proc.send_signal(signal.SIGTERM)
            self._terminated = True

    def stop(self, timeout: float = 30) -> None:
        """SIGTERM, then SIGKILL after `timeout` s."""
        try:
            if self.alive():
                self.terminate()
                try:
                    self.proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    self.kill()
        finally:
            self.http.close()
            self._log.close()


class Fleet:
    """Workers of one deployment (one topic prefix, one store) as real processes, on the
    scenario in `folder`; logs and faust data under `tmp`. Without `prefix`, a fresh
    random one whose pipeline topics it creates."""

    def __init__(self, tmp: Path, folder: Path, bootstrap: str, *, prefix: str | None = None,
                 db: Path | str | None = None):
        from streams.topics import ensure_topics, pipeline_topics

        self.bootstrap, self.tmp, self.folder = bootstrap, Path(tmp), Path(folder)
        if prefix is None:
            prefix = f"t{uuid.uuid4().hex[:8]}."
            ensure_topics(bootstrap=bootstrap, topics=pipeline_topics(prefix))
        self.prefix = prefix
        self.db: Path | str = self.tmp / "worker.db" if db is None else db
        self.workers: list[WorkerProcess] = []

    def spawn(self, name: str, *extra: str, env: dict[str, str] | None = None,
              profile: Path | None = None) -> WorkerProcess:
        """A worker started, not waited for."""
        port = free_port()
        args = worker_args(bootstrap=self.bootstrap, db=self.db, folder=self.folder, prefix=self.prefix,
                           port=port, data_dir=self.tmp / name) + list(extra)
        worker = WorkerProcess(name, args, port=port, log_path=self.tmp / f"{name}.log", env=env, profile=profile)
        self.workers.append(worker)
        return worker

    def start(self, name: str, *extra: str, timeout: float = 60) -> str:
        """A worker started and answering /healthz: its base URL."""
        worker = self.spawn(name, *extra)
        try:
            worker.wait_healthy(timeout)
        except WorkerNotReady as exc:
            raise WorkerNotReady(f"{exc}\n{self.logs()}") from None
        return worker.base

    def _named(self, name: str) -> list[WorkerProcess]:
        return [w for w in self.workers if w.name == name]

    def alive(self, name: str) -> bool:
        return any(w.alive() for w in self._named(name))

    def kill(self, name: str) -> None:
        for worker in self._named(name):
            worker.kill()

    def publish(self, files=None, **kw):
        from streams.publish import publish_files

        return publish_files(files or [self.folder / "telemetry.jsonl.gz"], bootstrap=self.bootstrap,
                             topic=self.prefix + "fabric.telemetry", jobs_topic=self.prefix + "fabric.jobs", **kw)

    def stored(self) -> list[dict]:
        return stored_incidents(self.db)

    def wait_for(self, expected: list[dict], timeout: float = 120, key=incident_summary) -> list[dict]:
        """The stored incidents once key(stored) == key(expected), or as they are at the timeout."""
        deadline = time.monotonic() + timeout
        got: list[dict] = []
        while time.monotonic() < deadline:
            got = self.stored()
            if key(got) == key(expected):
                return got
            time.sleep(1)
        return got

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text()[-2500:]}" for p in sorted(self.tmp.glob("*.log")))

    def stop(self) -> None:
        for worker in self.workers:
            worker.terminate()  # all at once: they shut down in parallel
        for worker in self.workers:
            worker.stop()
