"""`/tokens` (admin): create, list and revoke API tokens over HTTP; `/whoami`: the caller.

`fabric-rca tokens add|list|revoke` does the same on the database; the first admin token
can only come from there (no route creates a token without one)."""
from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Path, Request
from pydantic import BaseModel, Field

from api.auth import AdminDep, PrincipalDep, TokenError, add_token, list_tokens, revoke_token
from api.routes import AUTH, TEXT_PATTERN, SessionDep
from api.schemas import ErrorPublic

router = APIRouter(tags=["tokens"])
Role = Literal["admin", "operator", "tenant"]


class TokenCreate(BaseModel):
    role: Role
    tenant: str | None = Field(default=None, min_length=1, max_length=256, pattern=TEXT_PATTERN,
                               description="with role tenant: the tenant (the affected jobs' `tenant`)")
    name: str = Field(default="", max_length=200, pattern=r"^[^\x00-\x1f\x7f-\x9f]*$",
                      description="what the token is for, e.g. who holds it")


class TokenPublic(BaseModel):
    id: str = Field(description="the token's public id (its `frca_<id>_` part)")
    role: Role
    tenant: str | None
    name: str
    created_at: str
    revoked_at: str | None = Field(description="null while the token is valid")


class TokenCreated(TokenPublic):
    token: str = Field(description="the bearer token; shown this once, the store keeps only its hash")


class WhoamiPublic(BaseModel):
    auth: Literal["tokens", "none"]
    role: Role
    tenant: str | None
    token_id: str | None


_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorPublic, "description": "the body is not JSON"},
    422: {"model": ErrorPublic, "description": "a field is wrong (named in the detail)"},
    503: {"model": ErrorPublic, "description": "the database is not usable"},
    **AUTH,
}


@router.post("/tokens", status_code=201, response_model=TokenCreated, responses=_ERRORS, summary="Create a token")
def post_token(body: TokenCreate, session: SessionDep, _admin: AdminDep) -> dict:
    try:
        record, token = add_token(session, role=body.role, tenant=body.tenant, name=body.name)
    except TokenError as exc:
        field = "tenant" if "tenant" in str(exc) else "role"
        raise HTTPException(status_code=422, detail=[{"type": "value_error", "loc": ["body", field],
                                                      "msg": str(exc), "input": getattr(body, field)}]) from None
    return {**record, "token": token}


@router.get("/tokens", response_model=list[TokenPublic], responses=_ERRORS, summary="Every token, oldest first")
def get_tokens(session: SessionDep, _admin: AdminDep) -> list[dict]:
    return list_tokens(session)


@router.delete("/tokens/{token_id}", response_model=TokenPublic, summary="Revoke a token (at once)",
               responses={404: {"model": ErrorPublic, "description": "no token with that id"}, **_ERRORS})
def delete_token(token_id: Annotated[str, Path(min_length=1, max_length=64, pattern=TEXT_PATTERN)],
                 session: SessionDep, _admin: AdminDep) -> dict:
    revoked = revoke_token(session, token_id=token_id)
    if revoked is None:
        raise HTTPException(status_code=404, detail=f"no token with id {token_id!r}")
    return revoked


@router.get("/whoami", response_model=WhoamiPublic, responses=AUTH, summary="The caller's role (and tenant)")
def whoami(request: Request, principal: PrincipalDep) -> dict:
    return {"auth": request.app.state.auth, "role": principal.role, "tenant": principal.tenant,
            "token_id": principal.token_id}
