"""`GET /incidents/stream`: every incident change as a server-sent event, live.

The stream follows the store's change log (`api/store/changes.py`), so it sees what any
process writes into the database (a worker, a replay), on SQLite and PostgreSQL alike:
one indexed read of the log per poll, and the changed incidents only when there are.

Events:
- `ready` (first): `{"seq": N}`, id N: the position the stream starts after.
- `incident`: the incident (the JSON of `GET /incidents/{id}`), id = its change number.
- `gone`: `{"id": ...}`: an incident that changed and no longer matches the filters
  (an `open` incident that resolved, under `status=open`).
- `store_error`: `{"detail": ...}`: the database could not be read; the stream retries.
- a `: heartbeat` comment when nothing happened for a while.

It starts after the change given by `Last-Event-ID` (what `EventSource` sends when it
reconnects) or `after`, else after the last change so far. It ends when the server shuts
down (`closing`, set by `api/server.py`), or when the client goes away.
"""
from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import APIRouter, Header, HTTPException, Query, Request
from fastapi.responses import StreamingResponse
from sqlalchemy.exc import SQLAlchemyError
from starlette.concurrency import run_in_threadpool

from api import access, scope, sse
from api.auth import Principal, PrincipalDep
from api.routes import AUTH, FiltersDep, Store, StoreDep, db_reason
from api.schemas import ErrorPublic, IncidentPublic
from api.store import changes
from api.store.db import StoreError

BATCH = 500  # changes read per poll; a full batch is followed by another read at once


@dataclass
class StreamSettings:
    poll_s: float = 1.0  # how often the change log is read
    heartbeat_s: float = 15.0  # a comment after this long without an event
    retry_ms: int = 2000  # how long a client waits before it reconnects
    closing: asyncio.Event = field(default_factory=asyncio.Event)


router = APIRouter()

_STREAM_DOC = {
    200: {
        "description": "an endless `text/event-stream`: `ready`, then `incident` / `gone` events",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    },
    422: {"model": ErrorPublic, "description": "a filter, `after` or `Last-Event-ID` is not valid"},
    503: {"model": ErrorPublic, "description": "the database is not usable"},
    **AUTH,
}


@router.get(
    "/incidents/stream",
    response_class=StreamingResponse,
    responses=_STREAM_DOC,  # type: ignore[arg-type]
    summary="Incident changes as server-sent events, live",
    description=(
        "Takes the filters of `GET /incidents`. Each `incident` event carries one incident "
        "(the JSON of `GET /incidents/{id}`) and its change number as `id:`; a client that "
        "reconnects with `Last-Event-ID` (or `after`) gets every change after that number. "
        "Without either, the stream starts with the changes after the `ready` event's number."
    ),
)
async def incident_stream(
    request: Request,
    store: StoreDep,
    principal: PrincipalDep,
    filters: FiltersDep,
    after: Annotated[int | None, Query(ge=0, le=sse.MAX_EVENT_ID, description="start after this change number")] = None,
    last_event_id: Annotated[str | None, Header(description="the last change number seen")] = None,
) -> StreamingResponse:
    try:
        resume = sse.parse_last_event_id(last_event_id)
    except sse.EventIdError as exc:
        detail = [{"type": "value_error", "loc": ["header", "Last-Event-ID"], "msg": str(exc), "input": last_event_id}]
        raise HTTPException(status_code=422, detail=detail) from None
    start = resume if resume is not None else after
    if start is None:
        start = await run_in_threadpool(_latest, store)
    shared = scope.Fabric() if principal.sees_everything else await run_in_threadpool(
        _fabric, store, request.app.state.topology)
    reader = _Reader(store, principal, shared, filters)
    settings: StreamSettings = request.app.state.stream
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(_events(reader, start, settings), media_type="text/event-stream", headers=headers)


async def _events(reader: _Reader, cursor: int, settings: StreamSettings) -> AsyncIterator[str]:
    yield sse.retry(settings.retry_ms)
    yield sse.event(json.dumps({"seq": cursor}), name="ready", event_id=cursor)
    quiet_since = time.monotonic()
    while not settings.closing.is_set():
        try:
            read, batch = await run_in_threadpool(reader.changed, cursor)
        except (StoreError, SQLAlchemyError) as exc:
            read, batch = 0, []
            yield sse.event(json.dumps({"detail": f"database unavailable: {db_reason(exc)}"}), name="store_error")
        for seq, name, body in batch:
            yield sse.event(json.dumps(body, separators=(",", ":")), name=name, event_id=seq)
        cursor = max(cursor, read)
        if batch:
            quiet_since = time.monotonic()
        if read and reader.full:
            continue  # a whole batch was read: more may be waiting
        elif time.monotonic() - quiet_since >= settings.heartbeat_s:
            yield sse.comment("heartbeat")
            quiet_since = time.monotonic()
        try:
            await asyncio.wait_for(settings.closing.wait(), settings.poll_s)
        except TimeoutError:
            pass


def _latest(store: Store) -> int:
    with store.session() as session:
        return changes.latest(session)


def _fabric(store: Store, topology: dict | None) -> scope.Fabric:
    with store.session() as session:
        return access.fabric(topology, session)


class _Reader:
    """The changes after a cursor, as the stream's caller may see them.

    A tenant's stream is silent about incidents it cannot see: `gone` goes out only for an
    incident this stream sent before, or one the tenant sees that left the filters."""

    def __init__(self, store: Store, principal: Principal, shared: scope.Fabric, filters: dict[str, Any]) -> None:
        self.store, self.principal, self.shared, self.filters = store, principal, shared, filters
        self.sent: set[str] = set()
        self.full = False

    def changed(self, cursor: int) -> tuple[int, list[tuple[int, str, dict]]]:
        """(the last change number read, or 0; (change number, event name, body) of every change
        after `cursor` the caller may hear of). `full`: the read was a whole batch (more may wait)."""
        with self.store.session() as session:
            log = changes.after(session, seq=cursor, limit=BATCH)
            self.full = len(log) >= BATCH
            if not log:
                return 0, []
            ids = sorted({iid for _, iid in log})
            found = access.by_id(session, self.principal, self.shared, ids, self.filters)
            seen = None if self.principal.sees_everything else access.by_id(session, self.principal, self.shared, ids, {})
        out = []
        for seq, iid in log:
            incident = found.get(iid)
            if incident is not None:
                self.sent.add(iid)
                out.append((seq, "incident", IncidentPublic.model_validate(incident).model_dump(mode="json")))
            elif seen is None or iid in seen or iid in self.sent:
                self.sent.discard(iid)
                out.append((seq, "gone", {"id": iid}))
        return log[-1][0], out
