"""Who is asking: bearer tokens, their roles, and the checks every route runs.

A token is `frca_<id>_<secret>` (`<id>` 8 hex digits, `<secret>` 256 random bits,
URL-safe base64). The store keeps the id, the role, the tenant and the SHA-256 of the
whole token (table `api_token`), never the token: a stolen database yields no token. A
presented token is looked up by its id and its hash compared in constant time
(`hmac.compare_digest`); an unknown id is compared against a dummy hash so both paths
take the same time.

Roles: `admin` manages tokens and does what an operator does; `operator` sees and
annotates everything; `tenant` (with a tenant name) sees only its incidents, scoped
(`api/scope.py`). A server run with `--auth none` asks for nothing and treats every
caller as an operator (token routes refuse: there is no admin without tokens).

Refusals carry a body: 401 (no token, or one that is unknown, revoked or malformed, with
`WWW-Authenticate: Bearer`), 403 (a valid token whose role may not do that).
"""
from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlmodel import Session, col, select

from api.store.ops_tables import TokenRow
from contract.times import rfc3339

ROLES = ("admin", "operator", "tenant")
AUTH_MODES = ("tokens", "none")
_TOKEN = re.compile(r"^frca_([0-9a-f]{8})_([A-Za-z0-9_-]{43})$")
_DUMMY = hashlib.sha256(b"no such token").hexdigest()


@dataclass(frozen=True)
class Principal:
    role: str
    tenant: str | None = None
    token_id: str | None = None

    @property
    def sees_everything(self) -> bool:
        return self.role in ("admin", "operator")

    def describe(self) -> str:
        return f"a tenant token (tenant {self.tenant})" if self.role == "tenant" else f"an {self.role} token"


OPEN = Principal(role="operator")  # every caller of a server run with --auth none


class TokenError(ValueError):
    """A token request that does not hold together (a tenant token without a tenant...)."""


# ------------------------------------------------------------------ repository


def token_sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def add_token(session: Session, *, role: str, tenant: str | None = None, name: str = "",
              now: datetime | None = None) -> tuple[dict, str]:
    """A new token: (its record, the token itself, shown this once)."""
    if role not in ROLES:
        raise TokenError(f"role must be one of {', '.join(ROLES)}; got {role!r}")
    if role == "tenant" and not tenant:
        raise TokenError("a tenant token needs the tenant it belongs to (--tenant NAME)")
    if role != "tenant" and tenant:
        raise TokenError(f"only a tenant token names a tenant; an {role} token sees every tenant")
    for _ in range(8):  # 2**32 ids: a clash is rare, and retried
        token_id = secrets.token_hex(4)
        if session.get(TokenRow, token_id) is None:
            break
    else:  # pragma: no cover - eight clashes in a row
        raise TokenError("could not find a free token id")
    token = f"frca_{token_id}_{secrets.token_urlsafe(32)}"
    row = TokenRow(id=token_id, token_sha256=token_sha256(token), role=role, tenant=tenant or None, name=name,
                   created_at=now or datetime.now(timezone.utc))
    session.add(row)
    session.commit()
    session.refresh(row)
    return token_dict(row), token


def list_tokens(session: Session) -> list[dict]:
    return [token_dict(r) for r in session.exec(select(TokenRow).order_by(col(TokenRow.created_at), col(TokenRow.id)))]


def revoke_token(session: Session, *, token_id: str, now: datetime | None = None) -> dict | None:
    """Revoke a token (at once: the next request with it is a 401); None when there is none."""
    row = session.get(TokenRow, token_id)
    if row is None:
        return None
    if row.revoked_at is None:
        row.revoked_at = now or datetime.now(timezone.utc)
        session.add(row)
        session.commit()
        session.refresh(row)
    return token_dict(row)


def principal_of(session: Session, token: str) -> Principal | None:
    """Whose `token` is, or None when it is malformed, unknown or revoked."""
    match = _TOKEN.match(token)
    row = session.get(TokenRow, match.group(1)) if match else None
    good = hmac.compare_digest(row.token_sha256 if row else _DUMMY, token_sha256(token))
    if row is None or not good or row.revoked_at is not None:
        return None
    return Principal(role=row.role, tenant=row.tenant, token_id=row.id)


def token_dict(row: TokenRow) -> dict:
    return {"id": row.id, "role": row.role, "tenant": row.tenant, "name": row.name,
            "created_at": rfc3339(row.created_at), "revoked_at": rfc3339(row.revoked_at)}


def count_tokens(session: Session) -> int:
    return len(list(session.exec(select(TokenRow.id).where(col(TokenRow.revoked_at).is_(None)))))


# ---------------------------------------------------------------- dependencies

bearer = HTTPBearer(auto_error=False, description="a token of `fabric-rca tokens add` (or `POST /tokens`)")
CredentialsDep = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]


def optional_principal(request: Request) -> Principal | None:
    """The caller, None without a token; a bad token is still a 401. (Read from the header
    itself, so a route taking it, `/healthz`, declares no security requirement.)"""
    if request.app.state.auth == "none":
        return OPEN
    header = request.headers.get("authorization")
    if header is None:
        return None
    scheme, _, credentials = header.partition(" ")
    found = None
    if scheme.lower() == "bearer" and credentials.strip():
        with request.app.state.store.session() as session:
            found = principal_of(session, credentials.strip())
    if found is None:
        raise _unauthorized("the bearer token is not valid: unknown, revoked or malformed "
                            "(expected Authorization: Bearer frca_...)")
    return found


def current_principal(request: Request, _declared: CredentialsDep) -> Principal:
    """The caller; 401 without a valid token. (`_declared` puts the bearer scheme in the OpenAPI.)"""
    principal = optional_principal(request)
    if principal is None:
        raise _unauthorized("this route needs a bearer token (Authorization: Bearer <token>; "
                            "create one with `fabric-rca tokens add`)")
    return principal


PrincipalDep = Annotated[Principal, Depends(current_principal)]


def operator(principal: PrincipalDep) -> Principal:
    if not principal.sees_everything:
        raise HTTPException(status_code=403, detail=f"this route needs an operator or admin token; this is "
                                                    f"{principal.describe()}")
    return principal


def admin(request: Request, principal: PrincipalDep) -> Principal:
    if request.app.state.auth == "none":
        raise HTTPException(status_code=403, detail="token management needs a server run with --auth tokens "
                                                    "(this one runs with --auth none)")
    if principal.role != "admin":
        raise HTTPException(status_code=403, detail=f"this route needs an admin token; this is {principal.describe()}")
    return principal


OperatorDep = Annotated[Principal, Depends(operator)]
AdminDep = Annotated[Principal, Depends(admin)]


def _unauthorized(detail: str) -> HTTPException:
    return HTTPException(status_code=401, detail=detail, headers={"WWW-Authenticate": "Bearer"})
