"""Maintenance windows: stored, served (`/maintenance`), and handed to the engine as data.

`StoreWindows` is the engine's `MaintenanceSource`: it reads the windows from the store
in its own thread every `refresh_s` seconds, so the correlator reads a list, never a
database; while the store is away it keeps the windows it last read.
"""
from __future__ import annotations

import logging
import threading
from datetime import datetime, timezone
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path
from pydantic import BaseModel, Field, field_validator
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from api.auth import OperatorDep
from api.routes import AUTH, TEXT_PATTERN, SessionDep, parse_time
from api.schemas import ErrorPublic
from api.store.db import create_schema, make_engine
from api.store.ops_tables import MaintenanceRow
from contract.times import rfc3339
from engine.maintenance import Window

log = logging.getLogger("fabric_rca.maintenance")
router = APIRouter(tags=["maintenance"])
MAX_NOTE = 1000
MAX_ENTITY = 256


class MaintenanceCreate(BaseModel):
    entity: str = Field(min_length=1, max_length=MAX_ENTITY, pattern=TEXT_PATTERN,
                        description="a device (leaf03), an interface (leaf03:swp1) or a link id")
    starts_at: str = Field(alias="from", min_length=1, max_length=64,
                           description="RFC 3339 time or epoch seconds")
    ends_at: str = Field(alias="until", min_length=1, max_length=64,
                         description="RFC 3339 time or epoch seconds, after `from`")
    note: str = Field(default="", max_length=MAX_NOTE)

    model_config = {"populate_by_name": True}

    @field_validator("note")
    @classmethod
    def _printable(cls, v: str) -> str:
        if "\x00" in v:
            raise ValueError("note must not contain NUL (U+0000)")
        return v


class MaintenancePublic(BaseModel):
    id: int
    entity: str
    starts_at: str = Field(alias="from", description="RFC 3339 UTC")
    ends_at: str = Field(alias="until", description="RFC 3339 UTC")
    note: str
    created_at: str = Field(description="wall-clock time the window was added")


# ------------------------------------------------------------------ repository


def add_window(session: Session, *, entity: str, starts_at: datetime, ends_at: datetime, note: str = "",
               now: datetime | None = None) -> dict:
    if ends_at <= starts_at:
        raise ValueError(f"until ({rfc3339(ends_at)}) must be after from ({rfc3339(starts_at)})")
    row = MaintenanceRow(entity=entity, starts_at=starts_at, ends_at=ends_at, note=note,
                         created_at=now or datetime.now(timezone.utc))
    session.add(row)
    session.commit()
    session.refresh(row)
    return window_dict(row)


def list_windows(session: Session) -> list[dict]:
    rows = session.exec(select(MaintenanceRow).order_by(col(MaintenanceRow.starts_at), col(MaintenanceRow.id)))
    return [window_dict(r) for r in rows]


def delete_window(session: Session, *, window_id: int) -> bool:
    row = session.get(MaintenanceRow, window_id)
    if row is None:
        return False
    session.delete(row)
    session.commit()
    return True


def window_dict(row: MaintenanceRow) -> dict:
    return {"id": row.id, "entity": row.entity, "from": rfc3339(row.starts_at), "until": rfc3339(row.ends_at),
            "note": row.note, "created_at": rfc3339(row.created_at)}


def engine_windows(session: Session) -> list[Window]:
    return [Window(id=str(r.id), entity=r.entity, start=r.starts_at.timestamp(), end=r.ends_at.timestamp(), note=r.note)
            for r in session.exec(select(MaintenanceRow))]


# ---------------------------------------------------------------------- routes

_ERRORS: dict[int | str, dict[str, Any]] = {400: {"model": ErrorPublic, "description": "the body is not JSON"},
                                           422: {"model": ErrorPublic, "description": "a parameter is wrong"},
                                           503: {"model": ErrorPublic, "description": "the database is not usable"},
                                           **AUTH}


@router.post("/maintenance", status_code=201, response_model=MaintenancePublic, responses=_ERRORS, summary="Add a maintenance window",
             description="Incidents whose root cause lies on `entity` (or a port or link of that device) and "
                         "that open within [from, until] are kept, marked `maintenance`, and not notified.")
def post_window(body: MaintenanceCreate, session: SessionDep,
                  _principal: OperatorDep) -> dict:
    starts, ends = parse_body_time("from", body.starts_at), parse_body_time("until", body.ends_at)
    if ends <= starts:
        raise HTTPException(status_code=422, detail=[{"type": "value_error", "loc": ["body", "until"],
                                                      "msg": f"until ({body.ends_at}) must be after from ({body.starts_at})",
                                                      "input": body.ends_at}])
    return add_window(session, entity=body.entity, starts_at=starts, ends_at=ends, note=body.note)


@router.get("/maintenance", response_model=list[MaintenancePublic], responses=_ERRORS, summary="Maintenance windows, earliest first")
def get_windows(session: SessionDep,
                  _principal: OperatorDep) -> list[dict]:
    return list_windows(session)


@router.delete("/maintenance/{window_id}", status_code=204, summary="Delete a maintenance window",
               responses={404: {"model": ErrorPublic, "description": "no window with that id"}, **_ERRORS})
def remove_window(window_id: Annotated[int, Path(ge=1, le=2**31 - 1, description="a window id")],
                  session: SessionDep,
                  _principal: OperatorDep) -> None:
    if not delete_window(session, window_id=window_id):
        raise HTTPException(status_code=404, detail=f"no maintenance window with id {window_id}")


def parse_body_time(name: str, value: str) -> datetime:
    """`api.routes.parse_time`, with its 422 located in the body rather than the query."""
    try:
        parsed = parse_time(name, value)
    except HTTPException as exc:
        detail = [{**d, "loc": ["body", name]} for d in exc.detail]
        raise HTTPException(status_code=422, detail=detail) from None
    assert parsed is not None
    return parsed


# ------------------------------------------------------------ the engine's port


class StoreWindows:
    """The windows in the store at `db_url`, re-read every `refresh_s` seconds in a thread."""

    def __init__(self, db_url: str | None = None, *, engine: Engine | None = None, refresh_s: float = 5.0) -> None:
        self._engine = engine or make_engine(db_url or "")
        self.refresh_s = refresh_s
        self._windows: tuple[Window, ...] = ()
        self._schema = False
        self._stop = threading.Event()
        self.refresh()
        self._thread = threading.Thread(target=self._run, name="fabric-rca-maintenance", daemon=True)
        self._thread.start()

    def windows(self) -> tuple[Window, ...]:
        return self._windows

    def refresh(self) -> None:
        try:
            if not self._schema:
                create_schema(self._engine)
                self._schema = True
            with Session(self._engine) as session:
                self._windows = tuple(engine_windows(session))
        except Exception as exc:  # noqa: BLE001 - the store away: keep the windows last read
            log.warning("maintenance windows not read (%s: %s); keeping %d", type(exc).__name__,
                        str(exc).splitlines()[0][:200] if str(exc) else "", len(self._windows))

    def close(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.refresh_s):
            self.refresh()
