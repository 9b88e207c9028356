"""The fabric-rca HTTP API: incidents, jobs and topology out of the incident store.

`create_app` builds everything from its arguments; nothing is created at import.
"""
from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import PackageNotFoundError, version

from fastapi import FastAPI, Request
from fastapi.exception_handlers import request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import SQLAlchemyError

from api import console
from api.auth import AUTH_MODES
from api.operations import include_operations, new_watcher
from api.routes import SessionDep, Store, db_reason, get_session, router
from api.store.db import StoreError, make_engine

__all__ = ["SessionDep", "create_app", "get_session"]

DESCRIPTION = """\
Root causes of faults in an AI-cluster RoCE fabric, as diagnosed by the fabric-rca
engine from switch, NIC, storage and scheduler telemetry.

Each incident names its ranked root causes (cause + entity + score + evidence), the
jobs it affected and the symptoms behind it. Times are event times, RFC 3339 UTC with
milliseconds. The shape is contract section 6. Causes are contract section 5's, plus
the engine's extension causes beyond that list: `link_miswired` (entity: the declared
link), opened when the engine is given the devices' LLDP neighbours (`--lldp`) and a
declared link's ends are seen cabled elsewhere; its evidence holds both topologies' view.

Every route but `/healthz` needs `Authorization: Bearer <token>` (a token of
`fabric-rca tokens add`) unless the server runs with `--auth none`. A tenant token sees
only the incidents that affect its jobs, and in them only its own jobs and hosts.
"""


def create_app(*, db_url: str, topology: dict | None = None, notify=None, auth: str = "tokens") -> FastAPI:
    """An app serving the store at `db_url`; `topology`, if given, is what `/topology` serves;
    `notify` (`notify.NotifySettings`), if given, notifies what the store holds while the app runs.
    `auth`: `tokens` (every route but `/healthz` and the console's files needs a bearer token,
    `api/auth.py`) or `none` (nothing is asked; said out loud by `fabric-rca serve`).

    A bad URL raises `StoreError` here; a database that is down answers 503 later.
    """
    if auth not in AUTH_MODES:
        raise ValueError(f"auth must be one of {', '.join(AUTH_MODES)}; got {auth!r}")
    engine = make_engine(db_url)
    watcher = new_watcher(engine, notify)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        if watcher is not None:
            watcher.start()
        yield
        if watcher is not None:
            watcher.stop()
        engine.dispose()

    app = FastAPI(
        title="fabric-rca",
        description=DESCRIPTION,
        version=_version(),
        lifespan=lifespan,
    )
    app.state.store = Store(engine)
    app.state.auth = auth
    app.state.topology = topology
    app.state.notifier = watcher.notifier if watcher is not None else None
    console.install(app)  # first: its /incidents/stream is not an incident id
    app.include_router(router)
    include_operations(app)
    app.add_exception_handler(RequestValidationError, _invalid_request)
    app.add_exception_handler(StoreError, _database_unavailable)
    app.add_exception_handler(SQLAlchemyError, _database_unavailable)
    return app


async def _invalid_request(request: Request, exc: Exception) -> JSONResponse:
    """FastAPI's 422, with the pattern and empty-string failures said in words."""
    assert isinstance(exc, RequestValidationError)
    errors = [_worded(error) for error in exc.errors()]
    return await request_validation_exception_handler(request, RequestValidationError(errors))


def _worded(error: dict) -> dict:
    name = error["loc"][-1] if error.get("loc") else "the value"
    if error.get("type") == "string_pattern_mismatch":
        return {**error, "msg": f"{name} must not contain control characters (U+0000-U+001F, U+007F-U+009F)"}
    if error.get("type") == "string_too_short" and error.get("ctx", {}).get("min_length") == 1:
        hint = " (leave it out to not filter on it)" if error["loc"][0] == "query" else ""
        return {**error, "msg": f"{name} must not be empty{hint}"}
    return error


async def _database_unavailable(_request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse(status_code=503, content={"detail": f"database unavailable: {db_reason(exc)}"})


def _version() -> str:
    try:
        return version("fabric-rca")
    except PackageNotFoundError:
        return "0+unknown"
