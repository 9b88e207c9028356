"""The generic webhook's signature: HMAC-SHA256 of the exact body bytes.

Header `X-Fabric-RCA-Signature-256: sha256=<hex digest>` (GitHub's scheme, so existing
verifiers work). A receiver recomputes the digest over the raw body it received, with the
shared secret, and compares in constant time (`verify`). `X-Fabric-RCA-Delivery` is a
unique id per delivery (a retry repeats it) for receivers that drop duplicates.
"""
from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path

SIGNATURE_HEADER = "X-Fabric-RCA-Signature-256"
DELIVERY_HEADER = "X-Fabric-RCA-Delivery"
EVENT_HEADER = "X-Fabric-RCA-Event"
SECRET_ENV = "FABRIC_RCA_WEBHOOK_SECRET"


def signature(secret: bytes, body: bytes) -> str:
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def verify(secret: bytes, body: bytes, header: str | None) -> bool:
    """Whether `header` is the signature of `body` under `secret` (constant-time)."""
    return header is not None and hmac.compare_digest(signature(secret, body), header.strip())


def load_secret(path: Path | None, env: dict[str, str] | os._Environ) -> bytes:
    """The secret from `path` (trailing newline stripped), else `$FABRIC_RCA_WEBHOOK_SECRET`.

    ValueError when neither gives one, or it is empty: an unsigned webhook is not offered."""
    if path is not None:
        try:
            text = Path(path).read_text().strip()
        except OSError as exc:
            raise ValueError(f"--webhook-secret-file {str(path)!r}: cannot read it ({exc.strerror})") from None
        if not text:
            raise ValueError(f"--webhook-secret-file {str(path)!r} is empty")
        return text.encode()
    text = (env.get(SECRET_ENV) or "").strip()
    if not text:
        raise ValueError(f"--webhook needs a secret: --webhook-secret-file FILE or ${SECRET_ENV}")
    return text.encode()
