"""Bounded request heads for the served API: a 414 or 431 answer, not a reset connection.

uvicorn's h11 protocol answers a request it cannot parse with a 400 and closes the
socket at once. When the client is still sending (a 1 MB header), the bytes left
unread make the kernel reset the connection, and the client never reads the answer.

`BoundedH11Protocol` bounds the request target (path and query) at `MAX_TARGET`
bytes and the whole head (request line plus headers) at `MAX_REQUEST_HEAD` bytes:
a longer target is answered 414 (URI Too Long), a longer head 431 (Request Header
Fields Too Large), whether it arrived whole or is still arriving (h11 alone only
bounds a head still incomplete); anything else h11 refuses stays a 400. The answer is a JSON `{"detail": ...}` like the API's other
errors, the server then half-closes, and reads and drops what the client still sends
until it closes its side (or `LINGER_S` passes), so the client reads the answer.
"""
from __future__ import annotations

import asyncio
import json
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import STATUS_PHRASES, H11Protocol

MAX_TARGET = 8 * 1024  # what Apache and nginx allow a request line by default
MAX_REQUEST_HEAD = 32 * 1024
LINGER_S = 5.0

_DETAILS = {
    400: "invalid HTTP request",
    414: f"the request target (path and query) is longer than {MAX_TARGET} bytes",
    431: f"the request head (request line and headers) is longer than {MAX_REQUEST_HEAD} bytes",
}


class _Connection(h11.Connection):
    """An h11 server connection that keeps the status to answer its last protocol error with."""

    error_status = 400

    def next_event(self) -> Any:
        try:
            event = super().next_event()
        except h11.RemoteProtocolError as exc:
            self.error_status = exc.error_status_hint if exc.error_status_hint in _DETAILS else 400
            if self.error_status == 431 and b"\n" not in self.trailing_data[0][:MAX_REQUEST_HEAD]:
                self.error_status = 414  # the request line alone is too long
            raise
        if isinstance(event, h11.Request):
            self._check_size(event)
        return event

    def _check_size(self, request: h11.Request) -> None:
        """Refuse a head that arrived whole but is over a bound (a Response may still be sent)."""
        head = len(request.method) + len(request.target) + sum(len(n) + len(v) + 4 for n, v in request.headers)
        if len(request.target) > MAX_TARGET:
            self.error_status = 414
        elif head > MAX_REQUEST_HEAD:
            self.error_status = 431
        else:
            return
        raise h11.RemoteProtocolError(_DETAILS[self.error_status], error_status_hint=self.error_status)


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a bounded request head and error answers clients can read."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.conn = _Connection(h11.SERVER, max_incomplete_event_size=MAX_REQUEST_HEAD)
        self._linger: asyncio.TimerHandle | None = None

    def data_received(self, data: bytes) -> None:
        if self._linger is not None:
            return  # answered already: drop the rest of the refused request
        super().data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._linger is not None:
            self._linger.cancel()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        status = getattr(self.conn, "error_status", 400)
        body = json.dumps({"detail": _DETAILS[status]}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        response = h11.Response(status_code=status, headers=headers, reason=STATUS_PHRASES[status])
        for event in (response, h11.Data(data=body), h11.EndOfMessage()):
            self.transport.write(self.conn.send(event))
        if self.transport.can_write_eof():
            self.transport.write_eof()  # the client sees the end of the answer...
            self._linger = self.loop.call_later(LINGER_S, self.transport.close)  # ...and has time to read it
        else:
            self.transport.close()
