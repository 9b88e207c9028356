"""Operator verdicts on incidents, and the field precision they give per cause.

A verdict is `confirmed`, `false_alarm`, `wrong_cause` (with the right cause and entity)
or `duplicate_of` (another incident's id), with a note. The latest verdict on an incident
is the one that counts. Field precision of a cause = confirmed / (confirmed + false_alarm
+ wrong_cause) over the incidents whose top cause (when judged) was that cause;
duplicates count in neither part. `GET /feedback/precision` gives it per day of the
incidents' opening; `/metrics` gives the totals.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from datetime import datetime, timezone
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Path
from pydantic import BaseModel, Field
from sqlmodel import Session, col, select

from api.auth import OperatorDep
from api.routes import AUTH, TEXT_PATTERN, SessionDep, Store
from api.schemas import CauseName, ErrorPublic
from api.store import repository
from api.store.ops_tables import FeedbackRow
from contract.times import parse_rfc3339, rfc3339

VERDICTS = ("confirmed", "false_alarm", "wrong_cause", "duplicate_of")
Verdict = Literal["confirmed", "false_alarm", "wrong_cause", "duplicate_of"]
MAX_NOTE = 4000
router = APIRouter(tags=["feedback"])


class FeedbackCreate(BaseModel):
    verdict: Verdict
    right_cause: CauseName | None = Field(default=None, description="with wrong_cause: the cause it really was")
    right_entity: str | None = Field(default=None, min_length=1, max_length=256, pattern=TEXT_PATTERN,
                                     description="with wrong_cause: the entity it really was on")
    duplicate_of: str | None = Field(default=None, min_length=1, max_length=256, pattern=TEXT_PATTERN,
                                     description="with duplicate_of: the incident this one repeats")
    note: str = Field(default="", max_length=MAX_NOTE)


class FeedbackPublic(BaseModel):
    id: int
    incident_id: str
    verdict: Verdict
    cause: str = Field(description="the incident's top cause when the verdict was given")
    entity: str
    right_cause: str | None
    right_entity: str | None
    duplicate_of: str | None
    note: str
    incident_opened_at: str
    created_at: str


class PrecisionPublic(BaseModel):
    cause: str
    day: str = Field(description="UTC day the judged incidents opened, YYYY-MM-DD")
    confirmed: int
    false_alarm: int
    wrong_cause: int
    duplicate_of: int
    precision: float | None = Field(description="confirmed / (confirmed + false_alarm + wrong_cause); null: none judged")


# ------------------------------------------------------------------ repository


class FeedbackError(ValueError):
    """A verdict that does not hold together; `field` names the body field at fault."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


def add_feedback(session: Session, *, incident_id: str, verdict: str, right_cause: str | None = None,
                 right_entity: str | None = None, duplicate_of: str | None = None, note: str = "",
                 now: datetime | None = None) -> dict | None:
    """Record a verdict; None when there is no such incident. FeedbackError names a bad field."""
    incident = repository.get_incident(session, incident_id=incident_id)
    if incident is None:
        return None
    _check(session, incident_id, verdict, right_cause, right_entity, duplicate_of, note)
    top = incident["root_causes"][0] if incident["root_causes"] else None
    row = FeedbackRow(incident_id=incident_id, verdict=verdict, cause=top["cause"] if top else "unexplained",
                      entity=top["entity"]["id"] if top else "", right_cause=right_cause, right_entity=right_entity,
                      duplicate_of=duplicate_of, note=note,
                      incident_opened_at=datetime.fromtimestamp(parse_rfc3339(incident["opened_at"]), tz=timezone.utc),
                      created_at=now or datetime.now(timezone.utc))
    session.add(row)
    session.commit()
    session.refresh(row)
    return feedback_dict(row)


def _check(session: Session, incident_id: str, verdict: str, right_cause: str | None, right_entity: str | None,
           duplicate_of: str | None, note: str) -> None:
    if verdict not in VERDICTS:
        raise FeedbackError("verdict", f"verdict must be one of {', '.join(VERDICTS)}; got {verdict!r}")
    if "\x00" in note:
        raise FeedbackError("note", "note must not contain NUL (U+0000)")
    if verdict == "wrong_cause":
        for name, value in (("right_cause", right_cause), ("right_entity", right_entity)):
            if not value:
                raise FeedbackError(name, f"a wrong_cause verdict needs {name}")
    elif right_cause or right_entity:
        name = "right_cause" if right_cause else "right_entity"
        raise FeedbackError(name, f"{name} goes with a wrong_cause verdict only, not {verdict}")
    if verdict == "duplicate_of":
        if not duplicate_of:
            raise FeedbackError("duplicate_of", "a duplicate_of verdict needs duplicate_of (an incident id)")
        if duplicate_of == incident_id:
            raise FeedbackError("duplicate_of", "an incident is not a duplicate of itself")
        if repository.get_incident(session, incident_id=duplicate_of) is None:
            raise FeedbackError("duplicate_of", f"no incident with id {duplicate_of!r}")
    elif duplicate_of:
        raise FeedbackError("duplicate_of", f"duplicate_of goes with a duplicate_of verdict only, not {verdict}")


def list_feedback(session: Session, *, incident_id: str | None = None) -> list[dict]:
    stmt = select(FeedbackRow).order_by(col(FeedbackRow.created_at), col(FeedbackRow.id))
    if incident_id is not None:
        stmt = stmt.where(col(FeedbackRow.incident_id) == incident_id)
    return [feedback_dict(r) for r in session.exec(stmt)]


def latest_verdicts(session: Session) -> list[dict]:
    """The verdict that counts for each judged incident (its latest), oldest incident first."""
    latest: dict[str, dict] = {}
    for fb in list_feedback(session):
        latest[fb["incident_id"]] = fb
    return sorted(latest.values(), key=lambda f: (f["incident_opened_at"], f["incident_id"]))


def feedback_dict(row: FeedbackRow) -> dict:
    return {"id": row.id, "incident_id": row.incident_id, "verdict": row.verdict, "cause": row.cause,
            "entity": row.entity, "right_cause": row.right_cause, "right_entity": row.right_entity,
            "duplicate_of": row.duplicate_of, "note": row.note,
            "incident_opened_at": rfc3339(row.incident_opened_at), "created_at": rfc3339(row.created_at)}


def precision_table(verdicts: list[dict], *, by_day: bool = True) -> list[dict]:
    """Counts and precision per (cause, day) — or per cause, day "all" — of latest verdicts. Pure."""
    counts: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for fb in verdicts:
        day = fb["incident_opened_at"][:10] if by_day else "all"
        counts[(fb["cause"], day)][fb["verdict"]] += 1
    out = []
    for (cause, day), c in sorted(counts.items()):
        judged = c["confirmed"] + c["false_alarm"] + c["wrong_cause"]
        out.append({"cause": cause, "day": day, **{v: c[v] for v in VERDICTS},
                    "precision": c["confirmed"] / judged if judged else None})
    return out


# ---------------------------------------------------------------------- routes

_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorPublic, "description": "the body is not JSON"},
    404: {"model": ErrorPublic, "description": "no incident with that id"},
    422: {"model": ErrorPublic, "description": "a body field is wrong (named in the detail)"},
    503: {"model": ErrorPublic, "description": "the database is not usable"},
    **AUTH,
}


@router.post("/incidents/{incident_id}/feedback", status_code=201, response_model=FeedbackPublic, responses=_ERRORS,
             summary="Record an operator's verdict on an incident")
def post_feedback(incident_id: Annotated[str, Path(min_length=1, pattern=TEXT_PATTERN)], body: FeedbackCreate,
                  session: SessionDep,
                  _principal: OperatorDep) -> dict:
    try:
        made = add_feedback(session, incident_id=incident_id, **body.model_dump())
    except FeedbackError as exc:
        raise HTTPException(status_code=422, detail=[{"type": "value_error", "loc": ["body", exc.field],
                                                      "msg": str(exc), "input": getattr(body, exc.field, None)}])
    if made is None:
        raise HTTPException(status_code=404, detail=f"no incident with id {incident_id!r}")
    return made


@router.get("/incidents/{incident_id}/feedback", response_model=list[FeedbackPublic], responses=_ERRORS,
            summary="The verdicts on an incident, oldest first (the last one counts)")
def get_feedback(incident_id: Annotated[str, Path(min_length=1, pattern=TEXT_PATTERN)], session: SessionDep,
                  _principal: OperatorDep) -> list:
    if repository.get_incident(session, incident_id=incident_id) is None:
        raise HTTPException(status_code=404, detail=f"no incident with id {incident_id!r}")
    return list_feedback(session, incident_id=incident_id)


@router.get("/feedback/precision", response_model=list[PrecisionPublic], responses=_ERRORS,
            summary="Field precision per cause and day, from the latest verdict on each incident")
def get_precision(session: SessionDep,
                  _principal: OperatorDep) -> list[dict]:
    return precision_table(latest_verdicts(session))


def feedback_metrics_text(store: Store) -> str:
    """`fabric_rca_feedback_verdicts{cause,verdict}` and `fabric_rca_field_precision{cause}`."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import GaugeMetricFamily

    with store.session() as session:
        rows = precision_table(latest_verdicts(session), by_day=False)
    verdicts = GaugeMetricFamily("fabric_rca_feedback_verdicts",
                                 "Judged incidents by top cause and latest operator verdict.", labels=["cause", "verdict"])
    precision = GaugeMetricFamily("fabric_rca_field_precision",
                                  "Field precision per cause: confirmed / (confirmed + false_alarm + wrong_cause).",
                                  labels=["cause"])
    for row in rows:
        for v in VERDICTS:
            verdicts.add_metric([row["cause"], v], row[v])
        if row["precision"] is not None:
            precision.add_metric([row["cause"]], row["precision"])

    class _Families:
        def collect(self):
            return iter([verdicts, precision])

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families())  # type: ignore[arg-type]
    return generate_latest(registry).decode()
