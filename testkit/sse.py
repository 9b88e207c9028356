"""An event stream (`GET /incidents/stream`) read by a thread, its events queued: for tests."""
from __future__ import annotations

import queue
import threading
import time

import httpx


class Events:
    """The events of one open stream, read by a thread into a queue."""

    def __init__(self, url: str, *, headers: dict | None = None, params: dict | None = None):
        self.queue: queue.Queue = queue.Queue()
        self.lines: list[str] = []
        self.status: int | None = None
        self._client = httpx.Client(timeout=httpx.Timeout(30, read=60))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(url, headers, params), daemon=True)
        self._thread.start()

    def _read(self, url, headers, params) -> None:
        try:
            with self._client.stream("GET", url, headers=headers, params=params) as res:
                self.status = res.status_code
                fields: dict = {}
                for line in res.iter_lines():
                    if self._stop.is_set():
                        return
                    self.lines.append(line)
                    if line == "":
                        if "data" in fields:
                            self.queue.put(fields)
                        fields = {}
                    elif not line.startswith(":"):
                        name, _, value = line.partition(": ")
                        fields[name] = fields[name] + "\n" + value if name in fields else value
        except httpx.HTTPError as exc:
            self.queue.put({"event": "client_error", "data": str(exc)})

    def next(self, timeout: float = 30) -> dict:
        return self.queue.get(timeout=timeout)

    def take(self, n: int, timeout: float = 60) -> list[dict]:
        deadline = time.monotonic() + timeout
        return [self.queue.get(timeout=max(0.01, deadline - time.monotonic())) for _ in range(n)]

    def drain(self, *, quiet: float, timeout: float = 60) -> list[dict]:
        """Every event until none came for `quiet` s."""
        out, deadline = [], time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                out.append(self.queue.get(timeout=quiet))
            except queue.Empty:
                return out
        raise AssertionError(f"the stream never went quiet for {quiet} s in {timeout} s")

    def close(self) -> None:
        self._stop.set()
        self._client.close()
