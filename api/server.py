"""Run the API with uvicorn: for good (`serve`) or for a test (`running_server`)."""
from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import uvicorn
from fastapi import FastAPI

from api.app import create_app
from api.http_limits import MAX_REQUEST_HEAD, BoundedH11Protocol

# Both servers speak HTTP/1.1 through the bounded h11 protocol (api/http_limits.py):
# an oversized request line or header is answered 414/431, never a reset connection.
HTTP_OPTIONS = {"http": BoundedH11Protocol, "h11_max_incomplete_event_size": MAX_REQUEST_HEAD}


def serve(
    *,
    db_url: str,
    host: str = "127.0.0.1",
    port: int = 8000,
    topology: dict | None = None,
    log_level: str = "warning",
    notify=None,
    auth: str = "tokens",
) -> None:
    """Serve the API until interrupted (Ctrl-C / SIGTERM)."""
    app = create_app(db_url=db_url, topology=topology, notify=notify, auth=auth)
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, **HTTP_OPTIONS)
    _Server(config).run()


class _Server(uvicorn.Server):
    """uvicorn waits for every open connection before it stops, and an event stream
    (`GET /incidents/stream`) never ends by itself: shutting down first tells the
    streams to end (api/stream.py), so Ctrl-C or SIGTERM stops the server at once."""

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        stream = getattr(getattr(self.config.app, "state", None), "stream", None)
        if stream is not None:
            stream.closing.set()
        await super().shutdown(sockets=sockets)


@contextmanager
def running_server(
    *, db_url: str = "", topology: dict | None = None, timeout: float = 10.0, app: FastAPI | None = None,
    notify=None, auth: str = "tokens",
) -> Iterator[str]:
    """A real server on 127.0.0.1 (a free port) in a background thread; yields its base URL.

    It serves `app` if given (one a test has tuned), else a new app of `db_url`. The
    listening socket is bound before the server starts, so the port cannot be taken
    in between. Returns once `/healthz` answers; stops the server on exit.
    """
    app = app or create_app(db_url=db_url, topology=topology, notify=notify, auth=auth)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on", **HTTP_OPTIONS)
    server = _Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name=f"fabric-rca-api-{port}", daemon=True
    )
    thread.start()
    base_url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(base_url, thread, timeout=timeout)
        yield base_url
    finally:
        server.should_exit = True
        thread.join(timeout=timeout)
        sock.close()


def _wait_until_up(base_url: str, thread: threading.Thread, *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not thread.is_alive():
            raise RuntimeError(f"the API server at {base_url} stopped while starting")
        try:
            httpx.get(f"{base_url}/healthz", timeout=1.0)
            return  # any answer, even a 503, means the server is up
        except httpx.TransportError:
            time.sleep(0.02)
    raise TimeoutError(f"the API server at {base_url} did not answer /healthz within {timeout}s")
