"""Oversized and malformed requests against the real served API: a 4xx answer the client reads.

Before api/http_limits.py, a 1 MB header or URL got the connection reset under the
client while it was still sending, and a URL of 20 KB was served.
"""
from __future__ import annotations

import socket

import httpx
import pytest

from api.http_limits import MAX_REQUEST_HEAD, MAX_TARGET
from api.server import running_server


@pytest.fixture(scope="module")
def base_url(tmp_path_factory) -> str:
    db = tmp_path_factory.mktemp("limits") / "incidents.db"
    with running_server(db_url=f"sqlite:///{db}", auth="none") as url:
        yield url


def exchange(base_url: str, request: bytes) -> tuple[int, bytes]:
    """Send raw bytes, read until the server closes; the status and the body."""
    host, port = base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request)  # the whole request, even past the bound the answer names
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body


def get(target: bytes, *headers: bytes) -> bytes:
    head = [b"GET " + target + b" HTTP/1.1", b"Host: 127.0.0.1", b"Connection: close", *headers]
    return b"\r\n".join([*head, b"", b""])


@pytest.mark.parametrize("size", [MAX_TARGET + 1, 40_000, 1_000_000, 8_000_000])
def test_a_long_url_is_414(base_url, size):
    target = b"/incidents?entity=" + b"x" * (size - len(b"/incidents?entity="))
    status, body = exchange(base_url, get(target))
    assert status == 414
    assert httpx.Response(status, content=body).json() == {
        "detail": f"the request target (path and query) is longer than {MAX_TARGET} bytes"
    }


@pytest.mark.parametrize("size", [MAX_REQUEST_HEAD + 1, 1_000_000, 8_000_000])
def test_long_headers_are_431(base_url, size):
    status, body = exchange(base_url, get(b"/healthz", b"X-Big: " + b"x" * size))
    assert status == 431
    assert "longer than 32768 bytes" in httpx.Response(status, content=body).json()["detail"]


def test_many_headers_adding_up_past_the_bound_are_431(base_url):
    headers = [b"X-H%d: %s" % (i, b"y" * 100) for i in range(400)]
    assert exchange(base_url, get(b"/healthz", *headers))[0] == 431


def test_just_under_the_bounds_is_served(base_url):
    target = b"/incidents?entity=" + b"x" * (MAX_TARGET - len(b"/incidents?entity="))
    status, body = exchange(base_url, get(target, b"X-Big: " + b"x" * (MAX_REQUEST_HEAD - MAX_TARGET - 200)))
    assert (status, body) == (200, b"[]")


def test_garbage_is_400_with_a_json_body(base_url):
    status, body = exchange(base_url, b"\x00\x01 not http\r\n\r\n")
    assert status == 400
    assert httpx.Response(status, content=body).json() == {"detail": "invalid HTTP request"}


def test_an_http_client_reads_the_431_instead_of_a_reset(base_url):
    response = httpx.get(f"{base_url}/healthz", headers={"X-Big": "x" * 2_000_000}, timeout=10)
    assert response.status_code == 431
    assert httpx.get(f"{base_url}/healthz", timeout=10).status_code == 200  # the server is fine
