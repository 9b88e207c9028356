"""A real Prometheus Alertmanager of one test's own, and a tiny HTTP receiver.

The binary is built once by scripts/tool-alertmanager into the tool cache (outside the
clone); `FABRIC_RCA_ALERTMANAGER` names another. `Alertmanager` starts it on a free
127.0.0.1 port with a config of the test's, clustering off, and waits for /-/ready.
`Receiver` is an HTTP server on a free port that records every POST (path, headers, body).
"""
from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

from testkit.ports import free_port

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "tool-alertmanager"


def alertmanager_binary() -> Path | None:
    """The binary to run, or None when it is not built (scripts/tool-alertmanager builds it)."""
    given = os.environ.get("FABRIC_RCA_ALERTMANAGER")
    if given:
        return Path(given)
    path = Path(subprocess.run([str(SCRIPT), "--path"], capture_output=True, text=True, check=True).stdout.strip())
    return path if path.exists() else None


class Alertmanager:
    def __init__(self, binary: Path, workdir: Path, config: str, *, timeout: float = 30.0) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "alertmanager.yml").write_text(config)
        self.log = workdir / "alertmanager.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [str(binary), f"--config.file={workdir / 'alertmanager.yml'}", f"--storage.path={workdir / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}", "--cluster.listen-address=", "--log.level=info"],
                stdout=log, stderr=subprocess.STDOUT)
        self._wait(timeout)

    def _wait(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"alertmanager exited {self.proc.returncode}:\n{self.log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.url}/-/ready", timeout=1.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        self.stop()
        raise TimeoutError(f"alertmanager at {self.url} not ready within {timeout} s:\n{self.log.read_text()[-2000:]}")

    def alerts(self, **params: str) -> list[dict]:
        return httpx.get(f"{self.url}/api/v2/alerts", params=params, timeout=5.0).raise_for_status().json()

    def groups(self) -> list[dict]:
        return httpx.get(f"{self.url}/api/v2/alerts/groups", timeout=5.0).raise_for_status().json()

    def groups_alerts(self) -> list[dict]:
        """Every alert of every group (what Alertmanager routes)."""
        return [a for g in self.groups() for a in g["alerts"]]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self):
        return json.loads(self.body)


class Receiver:
    """Records each POST; answers `status` (200 unless a test sets another)."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.status = 200
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with receiver._lock:
                    receiver.requests.append(Request(self.path, dict(self.headers.items()), body))
                    status = receiver.status
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):  # quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def at(self, path: str) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.path == path]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
