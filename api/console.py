"""The web console: static pages at `/console/`, and the JSON they draw from.

The pages are plain HTML, CSS and JavaScript modules shipped in the package
(`api/static/console/`, package data): no build step, nothing fetched from elsewhere.
They read the API (`/incidents`, `/incidents/stream`, the layouts below) like any
other client. `install` adds all of it to an app, ahead of the API's own routes so
`/incidents/stream` is not taken for an incident id.
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles

from api import console_layout, scope, stream
from api.auth import OperatorDep, PrincipalDep
from api.routes import _NOT_FOUND, SessionDep, _id, get_incident, topology_document

STATIC = Path(__file__).parent / "static" / "console"

router = APIRouter()


@router.get("/", include_in_schema=False)
def home() -> RedirectResponse:
    return RedirectResponse("/console/")


@router.get(
    "/topology/layout",
    response_model=dict[str, Any],
    responses=_NOT_FOUND,
    summary="The topology laid out as Clos layers (rows) and rails (groups), for drawing",
)
def topology_layout(request: Request, session: SessionDep, _principal: OperatorDep) -> dict:
    return console_layout.layout(topology_document(request, session))


@router.get(
    "/incidents/{incident_id}/topology",
    response_model=dict[str, Any],
    responses=_NOT_FOUND,
    summary="The part of the topology an incident touches, laid out, with its cause and symptoms marked",
)
def incident_topology(
    incident_id: Annotated[str, _id("an incident id")], request: Request, session: SessionDep, principal: PrincipalDep
) -> dict:
    """A tenant's view leaves out the hosts its jobs do not run on (`api.scope`)."""
    incident = get_incident(incident_id, request, session, principal)
    document = topology_document(request, session)
    if not principal.sees_everything:
        document = scope.scope_topology(document, visible_hosts=scope.visible_hosts(incident))
    return console_layout.around(document, incident)


def install(app: FastAPI, *, settings: stream.StreamSettings | None = None) -> None:
    """Add the stream, the console's routes and its static files to `app`."""
    app.state.stream = settings or stream.StreamSettings()
    app.include_router(stream.router)
    app.include_router(router)
    app.mount("/console", StaticFiles(directory=STATIC, html=True), name="console")
