"""Free TCP ports on 127.0.0.1, from the OS."""
from __future__ import annotations

import socket


def free_ports(n: int) -> list[int]:
    """n distinct ports free right now (all bound at once, so none repeats)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port() -> int:
    return free_ports(1)[0]
