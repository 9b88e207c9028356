"""HTTP routes: decode the query, call one repository function, encode the answer."""
from __future__ import annotations

import math
import re
import threading
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request, Response
from fastapi.responses import JSONResponse
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Session

from api import access, scope
from api.auth import OperatorDep, Principal, PrincipalDep, optional_principal
from api.schemas import CAUSE_HELP, CauseName, ErrorPublic, HealthPublic, IncidentPublic, IncidentStatus
from api.store import repository
from api.store.db import StoreError, create_schema
from api.store.repository import MAX_OFFSET

MAX_LIMIT = 1000


class Store:
    """The database of one app; the schema is created on first use, once."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._ready = False
        self._lock = threading.Lock()

    def session(self) -> Session:
        if not self._ready:
            with self._lock:
                if not self._ready:
                    create_schema(self.engine)
                    self._ready = True
        return Session(self.engine)


def get_store(request: Request) -> Store:
    return request.app.state.store


StoreDep = Annotated[Store, Depends(get_store)]


def get_session(store: StoreDep) -> Iterator[Session]:
    with store.session() as session:
        yield session


SessionDep = Annotated[Session, Depends(get_session)]

router = APIRouter()

# Every route but /healthz needs a token unless the server runs with --auth none (api/auth.py).
AUTH: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorPublic, "description": "no bearer token, or one that is unknown, revoked or malformed"},
    403: {"model": ErrorPublic, "description": "the token's role may not do this"},
}
_UNAVAILABLE = {503: {"model": ErrorPublic, "description": "the database is not usable"}, **AUTH}
_NOT_FOUND = {404: {"model": ErrorPublic, "description": "nothing with that id (or not this tenant's)"}, **_UNAVAILABLE}
_TIME_HELP = "RFC 3339 time (e.g. 2025-11-29T07:08:10Z) or epoch seconds (e.g. 1764400090)"
_PAGE_HEADERS = {
    "X-Total-Count": {"description": "incidents matching the filters", "schema": {"type": "integer"}},
    "Link": {"description": 'the next page, `<url>; rel="next"`, when there is one', "schema": {"type": "string"}},
}

# Every string parameter (query or path) is non-empty and free of control characters
# (C0, DEL, C1): no stored id holds one, and PostgreSQL cannot even compare a NUL.
# api/app.py words the pattern's 422 as "must not contain control characters".
TEXT_PATTERN = r"^[^\x00-\x1f\x7f-\x9f]+$"
TIME_MAX_LENGTH = 64


def _text(description: str) -> Any:
    return Query(description=description, min_length=1, pattern=TEXT_PATTERN)


def _time_query() -> Any:
    return Query(description=_TIME_HELP, min_length=1, max_length=TIME_MAX_LENGTH, pattern=TEXT_PATTERN)


def _id(description: str) -> Any:
    return Path(description=description, min_length=1, pattern=TEXT_PATTERN)


def incident_filters(
    status: Annotated[IncidentStatus | None, Query(description="open or resolved")] = None,
    cause: Annotated[CauseName | None, Query(description=CAUSE_HELP)] = None,
    entity: Annotated[str | None, _text("an entity id or a device name")] = None,
    job: Annotated[str | None, _text("an affected job id")] = None,
    tenant: Annotated[str | None, _text("an affected job's tenant")] = None,
    since: Annotated[str | None, _time_query()] = None,
    until: Annotated[str | None, _time_query()] = None,
) -> dict[str, Any]:
    """The incident filters of the query (`GET /incidents` and its stream), decoded."""
    since_at, until_at = parse_time("since", since), parse_time("until", until)
    if since_at and until_at and since_at > until_at:
        raise _invalid("since", since, f"since ({since}) is after until ({until})")
    return {
        "status": status, "cause": cause, "entity": entity, "job": job, "tenant": tenant,
        "since": since_at, "until": until_at,
    }  # fmt: skip


FiltersDep = Annotated[dict[str, Any], Depends(incident_filters)]


@router.get(
    "/healthz",
    response_model=HealthPublic,
    response_model_exclude_none=True,
    responses={503: {"model": HealthPublic, "description": "the database is not usable"}, 401: AUTH[401]},
    summary="Liveness and database check",
    description="Needs no token (a probe has none); the incident count is given to operators only.",
)
def healthz(store: StoreDep, principal: Annotated[Principal | None, Depends(optional_principal)]) -> Any:
    try:
        with store.session() as session:
            count = repository.count_incidents(session)
    except (StoreError, SQLAlchemyError) as exc:
        body = {"status": "error", "db": "error", "detail": db_reason(exc)}
        return JSONResponse(status_code=503, content=body)
    return {"status": "ok", "db": "ok", "incidents": count if principal and principal.sees_everything else None}


@router.get(
    "/incidents",
    response_model=list[IncidentPublic],
    responses={200: {"description": "one page of incidents", "headers": _PAGE_HEADERS}, **_UNAVAILABLE},
    summary="Incidents, newest first",
    description=(
        "Filters combine with AND. `cause` matches any root cause, `entity` a root cause "
        "entity, a symptom entity or a symptom device; `job` and `tenant` match affected "
        "jobs; `since`/`until` keep the incidents active in the window (opened at or "
        "before `until`, not resolved before `since`). The total is in `X-Total-Count`; "
        "a `Link: <...>; rel=\"next\"` header points at the next page when there is one."
    ),
)
def list_incidents(
    request: Request,
    response: Response,
    session: SessionDep,
    principal: PrincipalDep,
    filters: FiltersDep,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 50,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET, description="incidents to skip")] = 0,
) -> list[dict]:
    shared = fabric(request, session, principal)
    items, total = access.page(session, principal, shared, filters, limit=limit, offset=offset)
    response.headers["X-Total-Count"] = str(total)
    if offset + len(items) < total:
        next_url = request.url.include_query_params(offset=offset + limit, limit=limit)
        response.headers["Link"] = f'<{next_url}>; rel="next"'
    return items


@router.get(
    "/incidents/{incident_id}",
    response_model=IncidentPublic,
    responses=_NOT_FOUND,
    summary="One incident",
)
def get_incident(
    incident_id: Annotated[str, _id("an incident id")], request: Request, session: SessionDep, principal: PrincipalDep
) -> dict:
    incident = access.one(session, principal, fabric(request, session, principal), incident_id)
    if incident is None:
        raise HTTPException(status_code=404, detail=f"no incident with id {incident_id!r}")
    return incident


@router.get(
    "/jobs/{job_id}/incidents",
    response_model=list[IncidentPublic],
    responses=_UNAVAILABLE,
    summary="Incidents that affected a job, newest first",
)
def job_incidents(
    job_id: Annotated[str, _id("a job id")], request: Request, session: SessionDep, principal: PrincipalDep
) -> list[dict]:
    filters = {**incident_filters(), "job": job_id}
    return access.page(session, principal, fabric(request, session, principal), filters, limit=None)[0]


@router.get(
    "/topology",
    response_model=dict[str, Any],
    responses=_NOT_FOUND,
    summary="The topology the incidents refer to",
    description="The whole fabric, every host included: operators only.",
)
def topology(request: Request, session: SessionDep, _principal: OperatorDep) -> dict:
    return topology_document(request, session)


def topology_document(request: Request, session: SessionDep) -> dict:
    """The topology served: the one given to the server, else the stored one; 404 without either."""
    given = request.app.state.topology
    document = given if given is not None else repository.load_topology(session)
    if document is None:
        raise HTTPException(
            status_code=404,
            detail="no topology: none was stored in the database and none was given to the server",
        )
    return document


def fabric(request: Request, session: Session, principal: Principal) -> Any:
    """The shared devices of the served topology, for tenant scoping (`api.access`); an
    operator's read needs none, and reads no topology."""
    if principal.sees_everything:
        return scope.Fabric()
    return access.fabric(request.app.state.topology, session)


def parse_time(name: str, value: str | None) -> datetime | None:
    """An RFC 3339 time or epoch seconds, as an aware UTC datetime; 422 names `name`.

    A naive time is taken as UTC; one that leaves the datetime range on conversion to
    UTC (9999-12-31T23:59:59-01:00) is a 422 too. A `+hh:mm` offset that arrived as
    ` hh:mm` (an unencoded `+` in a query string) is repaired.
    """
    if value is None:
        return None
    text = re.sub(r"(\d\d:\d\d(?::\d\d(?:\.\d+)?)?) (\d\d:\d\d)$", r"\1+\2", value.strip())
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        if math.isfinite(seconds):
            try:
                return datetime.fromtimestamp(seconds, tz=timezone.utc)
            except (OverflowError, OSError, ValueError):
                pass
        raise _invalid(name, value, f"{name} must be an {_TIME_HELP}; {value!r} is out of range")
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise _invalid(name, value, f"{name} must be an {_TIME_HELP}; got {value!r}") from None
    try:
        return parsed.replace(tzinfo=timezone.utc) if parsed.tzinfo is None else parsed.astimezone(timezone.utc)
    except OverflowError:
        raise _invalid(name, value, f"{name} {value!r} is out of range: it is not a time in UTC") from None


def db_reason(exc: BaseException) -> str:
    """A one-line reason for a database failure (the driver's message, not the SQL)."""
    orig = getattr(exc, "orig", None)
    return f"{type(orig or exc).__name__}: {orig or exc}"


def _invalid(name: str, value: str | None, message: str) -> HTTPException:
    """A 422 shaped like FastAPI's own validation errors, naming the query parameter."""
    detail = [{"type": "value_error", "loc": ["query", name], "msg": message, "input": value}]
    return HTTPException(status_code=422, detail=detail)
