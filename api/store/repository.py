"""Incident store: write the engine's incident dicts, read them back in the same shape.

The engine hands over incidents as plain dicts in the contract (section 6) shape;
this module is the one place that turns them into rows and rows back into dicts.
Every function takes the session first and everything else by keyword.

Time window filters (`since`, `until`) select the incidents *active* in the window:
opened at or before `until`, and not resolved before `since` (still open, or
resolved at or after `since`).
"""
from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, TypeVar

from sqlalchemy import ColumnElement, delete, func, insert, or_
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, SQLModel, col, select

from api.store import changes
from api.store.db import StoreError
from contract.times import parse_rfc3339, rfc3339
from api.store.tables import AffectedJobRow, IncidentRow, RootCauseRow, SymptomRow, TopologyRow

_CHUNK = 500  # ids per IN (...) clause, well under SQLite's bound-parameter limit
# The largest limit/offset a read takes: fits a 32-bit integer, so no database or driver
# overflows on it (SQLite's OFFSET + LIMIT near 2**63 does), and no store holds this many.
MAX_OFFSET = 2**31 - 1
_CHILDREN = (RootCauseRow, AffectedJobRow, SymptomRow)
_Row = TypeVar("_Row", RootCauseRow, AffectedJobRow, SymptomRow)


# ---------------------------------------------------------------------------- writing


def upsert_incidents(session: Session, *, incidents: list[dict]) -> int:
    """Store incidents, replacing any stored incident with the same id (and its children).

    One transaction per call. Writing the same incidents twice leaves the same content.
    If an id appears more than once in `incidents`, the last one wins.
    Returns the number of distinct incidents written.
    """
    latest = {_require(inc, "id", "?"): inc for inc in incidents}
    if not latest:
        return 0
    records = [_IncidentRecord.from_dict(inc) for inc in latest.values()]
    try:
        for ids in _chunks(list(latest)):
            for table in (*_CHILDREN, IncidentRow):
                key = IncidentRow.id if table is IncidentRow else table.incident_id  # type: ignore[attr-defined]
                stmt = delete(table).where(col(key).in_(ids))
                session.exec(stmt.execution_options(synchronize_session=False))
        _bulk_insert(session, IncidentRow, [r.incident for r in records])
        _bulk_insert(session, RootCauseRow, [c for r in records for c in r.root_causes])
        _bulk_insert(session, AffectedJobRow, [j for r in records for j in r.affected_jobs])
        _bulk_insert(session, SymptomRow, [s for r in records for s in r.symptoms])
        changes.record(session, incident_ids=list(latest))
        session.commit()
    except BaseException:
        session.rollback()
        raise
    return len(records)


def save_topology(session: Session, *, document: dict) -> None:
    """Replace the stored topology snapshot."""
    problem = _json_problem(document)
    if problem is not None:
        raise StoreError(f"topology document: {problem}")
    try:
        session.merge(TopologyRow(id=1, document=document))
        session.commit()
    except IntegrityError:
        # Another process (a second worker starting beside this one, the API) inserted the
        # row between merge's read and its insert: it exists now, so this merge updates it.
        session.rollback()
        session.merge(TopologyRow(id=1, document=document))
        session.commit()


# ---------------------------------------------------------------------------- reading


def get_incident(session: Session, *, incident_id: str) -> dict | None:
    row = session.get(IncidentRow, _no_nul("incident_id", incident_id))
    return None if row is None else _with_children(session, [row])[0]


def list_incidents(
    session: Session,
    *,
    status: str | None = None,
    cause: str | None = None,
    entity: str | None = None,
    job: str | None = None,
    tenant: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int | None = 50,
    offset: int = 0,
) -> list[dict]:
    """Incidents matching every given filter, newest first (opened_at, then id, descending).

    `cause` matches any root cause of an incident; `entity` matches a root cause
    entity id, a symptom entity id or a symptom device; `job` and `tenant` match an
    affected job; `since`/`until` keep the incidents active in that window (see the
    module docstring). `limit=None` means no limit.
    """
    if not 0 <= offset <= MAX_OFFSET or (limit is not None and not 0 <= limit <= MAX_OFFSET):
        raise ValueError(f"limit and offset must be in [0, {MAX_OFFSET}], got limit={limit} offset={offset}")
    conditions = _conditions(
        status=status, cause=cause, entity=entity, job=job, tenant=tenant, since=since, until=until
    )
    stmt = (
        select(IncidentRow)
        .where(*conditions)
        .order_by(col(IncidentRow.opened_at).desc(), col(IncidentRow.id).desc())
        .offset(offset)
        .limit(limit)
    )
    return _with_children(session, list(session.exec(stmt)))


def count_incidents(
    session: Session,
    *,
    status: str | None = None,
    cause: str | None = None,
    entity: str | None = None,
    job: str | None = None,
    tenant: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> int:
    """How many incidents `list_incidents` would return with the same filters and no limit."""
    conditions = _conditions(
        status=status, cause=cause, entity=entity, job=job, tenant=tenant, since=since, until=until
    )
    stmt = select(func.count()).select_from(IncidentRow).where(*conditions)
    return int(session.exec(stmt).one())


def job_incidents(session: Session, *, job_id: str) -> list[dict]:
    """Every incident that affected the job, newest first."""
    return list_incidents(session, job=job_id, limit=None)


def incidents_by_id(session: Session, *, ids: list[str], **filters: Any) -> dict[str, dict]:
    """The incidents of `ids` that match `filters` (those of `list_incidents`), by id."""
    unknown = sorted(set(filters) - set(_FILTERS))
    if unknown:
        raise TypeError(f"incidents_by_id: unknown filters {unknown}; the filters are {list(_FILTERS)}")
    conditions = _conditions(**{name: filters.get(name) for name in _FILTERS})
    rows = []
    for chunk in _chunks(ids):
        rows += session.exec(select(IncidentRow).where(col(IncidentRow.id).in_(chunk), *conditions))
    return {inc["id"]: inc for inc in _with_children(session, rows)}


_FILTERS = ("status", "cause", "entity", "job", "tenant", "since", "until")


def load_topology(session: Session) -> dict | None:
    row = session.get(TopologyRow, 1)
    return None if row is None else row.document


def _conditions(
    *,
    status: str | None,
    cause: str | None,
    entity: str | None,
    job: str | None,
    tenant: str | None,
    since: datetime | None,
    until: datetime | None,
) -> list[ColumnElement[bool]]:
    for name, value in (("entity", entity), ("job", job), ("tenant", tenant)):
        _no_nul(name, value)
    until, since = _utc("until", until), _utc("since", since)
    incident_id = col(IncidentRow.id)
    out: list[ColumnElement[bool]] = []
    if status is not None:
        out.append(col(IncidentRow.status) == status)
    if cause is not None:
        out.append(incident_id.in_(_ids_of(RootCauseRow, col(RootCauseRow.cause) == cause)))
    if entity is not None:
        by_cause = _ids_of(RootCauseRow, col(RootCauseRow.entity_id) == entity)
        by_symptom = _ids_of(
            SymptomRow, or_(col(SymptomRow.entity_id) == entity, col(SymptomRow.device) == entity)
        )
        out.append(or_(incident_id.in_(by_cause), incident_id.in_(by_symptom)))
    if job is not None:
        out.append(incident_id.in_(_ids_of(AffectedJobRow, col(AffectedJobRow.job_id) == job)))
    if tenant is not None:
        out.append(incident_id.in_(_ids_of(AffectedJobRow, col(AffectedJobRow.tenant) == tenant)))
    if until is not None:
        out.append(col(IncidentRow.opened_at) <= until)
    if since is not None:
        resolved_at = col(IncidentRow.resolved_at)
        out.append(or_(resolved_at.is_(None), resolved_at >= since))
    return out


def _ids_of(table: type[SQLModel], condition: ColumnElement[bool]) -> Any:
    return select(table.incident_id).where(condition)  # type: ignore[attr-defined]


def _with_children(session: Session, rows: Sequence[IncidentRow]) -> list[dict]:
    ids = [row.id for row in rows]
    causes = _children(session, RootCauseRow, ids, order=(RootCauseRow.rank, RootCauseRow.position))
    jobs = _children(session, AffectedJobRow, ids, order=(AffectedJobRow.position,))
    symptoms = _children(session, SymptomRow, ids, order=(SymptomRow.position,))
    return [
        _incident_dict(row, causes[row.id], jobs[row.id], symptoms[row.id]) for row in rows
    ]


def _children(
    session: Session, table: type[_Row], ids: list[str], *, order: tuple[Any, ...]
) -> dict[str, list[_Row]]:
    out: dict[str, list[_Row]] = defaultdict(list)
    for chunk in _chunks(ids):
        stmt = select(table).where(col(table.incident_id).in_(chunk)).order_by(*order)
        for child in session.exec(stmt):
            out[child.incident_id].append(child)
    return out


# ------------------------------------------------------------- dict <-> row, one place


@dataclass
class _IncidentRecord:
    """An incident dict as column mappings, ready for a bulk insert."""

    incident: dict[str, Any]
    root_causes: list[dict[str, Any]] = field(default_factory=list)
    affected_jobs: list[dict[str, Any]] = field(default_factory=list)
    symptoms: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def from_dict(cls, inc: dict) -> _IncidentRecord:
        iid = str(_require(inc, "id", "?"))
        causes = [_cause_columns(iid, pos, rc) for pos, rc in enumerate(inc.get("root_causes") or [])]
        top = min(causes, key=lambda c: (c["rank"], c["position"]), default=None)
        incident = {
            "id": iid,
            "status": _require(inc, "status", iid),
            "severity": _require(inc, "severity", iid),
            "opened_at": _time(_require(inc, "opened_at", iid), iid, "opened_at"),
            "updated_at": _time(_require(inc, "updated_at", iid), iid, "updated_at"),
            "resolved_at": _time(inc.get("resolved_at"), iid, "resolved_at"),
            "detected_at": _time(_require(inc, "detected_at", iid), iid, "detected_at"),
            "title": _require(inc, "title", iid),
            "top_cause": top["cause"] if top else None,
            "top_entity_kind": top["entity_kind"] if top else None,
            "top_entity_id": top["entity_id"] if top else None,
            "maintenance": bool(inc.get("maintenance")),
            "maintenance_reason": inc.get("maintenance_reason"),
        }
        jobs = [_job_columns(iid, pos, j) for pos, j in enumerate(inc.get("affected_jobs") or [])]
        symptoms = [_symptom_columns(iid, pos, s) for pos, s in enumerate(inc.get("symptoms") or [])]
        return cls(incident, causes, jobs, symptoms)


def _cause_columns(iid: str, position: int, rc: dict) -> dict[str, Any]:
    entity = _require(rc, "entity", iid)
    return {
        "incident_id": iid,
        "position": position,
        "rank": int(_require(rc, "rank", iid)),
        "cause": _require(rc, "cause", iid),
        "entity_kind": _require(entity, "kind", iid),
        "entity_id": _require(entity, "id", iid),
        "score": _number(_require(rc, "score", iid), iid, "root cause score"),
        "evidence": _json(list(rc.get("evidence") or []), iid, "root cause evidence"),
    }


def _job_columns(iid: str, position: int, job: dict) -> dict[str, Any]:
    return {
        "incident_id": iid,
        "position": position,
        "job_id": str(_require(job, "job_id", iid)),
        "tenant": _require(job, "tenant", iid),
        "impact": _require(job, "impact", iid),
        "hosts": [str(h) for h in job.get("hosts") or []],
    }


def _symptom_columns(iid: str, position: int, s: dict) -> dict[str, Any]:
    entity = _require(s, "entity", iid)
    return {
        "incident_id": iid,
        "position": position,
        "key": _require(s, "key", iid),
        "kind": _require(s, "kind", iid),
        "family": _require(s, "family", iid),
        "entity_kind": _require(entity, "kind", iid),
        "entity_id": _require(entity, "id", iid),
        "device": _require(s, "device", iid),
        "start": _time(_require(s, "start", iid), iid, "symptom start"),
        "last": _time(_require(s, "last", iid), iid, "symptom last"),
        "end": _time(s.get("end"), iid, "symptom end"),
        "severity": _number(_require(s, "severity", iid), iid, "symptom severity"),
        "metrics": _json(dict(s.get("metrics") or {}), iid, "symptom metrics"),
        "rule": s.get("rule") or "",
        "samples": _json(dict(s.get("samples") or {}), iid, "symptom samples"),
    }


def _incident_dict(
    row: IncidentRow,
    causes: list[RootCauseRow],
    jobs: list[AffectedJobRow],
    symptoms: list[SymptomRow],
) -> dict:
    return {
        "id": row.id,
        "status": row.status,
        "severity": row.severity,
        "opened_at": rfc3339(row.opened_at),
        "updated_at": rfc3339(row.updated_at),
        "resolved_at": rfc3339(row.resolved_at),
        "detected_at": rfc3339(row.detected_at),
        "title": row.title,
        "maintenance": row.maintenance,
        "maintenance_reason": row.maintenance_reason,
        "root_causes": [
            {
                "rank": rc.rank,
                "cause": rc.cause,
                "entity": {"kind": rc.entity_kind, "id": rc.entity_id},
                "score": rc.score,
                "evidence": rc.evidence,
            }
            for rc in causes
        ],
        "affected_jobs": [
            {"job_id": j.job_id, "tenant": j.tenant, "impact": j.impact, "hosts": list(j.hosts or [])}
            for j in jobs
        ],
        "symptoms": [
            {
                "key": s.key,
                "kind": s.kind,
                "family": s.family,
                "entity": {"kind": s.entity_kind, "id": s.entity_id},
                "device": s.device,
                "start": rfc3339(s.start),
                "last": rfc3339(s.last),
                "end": rfc3339(s.end),
                "severity": s.severity,
                "metrics": s.metrics,
                "rule": s.rule,
                "samples": s.samples or {},
            }
            for s in symptoms
        ],
    }


def _time(value: Any, incident_id: str, what: str) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return _aware(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, tz=timezone.utc)
    if isinstance(value, str):
        try:
            return datetime.fromtimestamp(parse_rfc3339(value, naive_utc=True), tz=timezone.utc)
        except ValueError:
            pass
    raise StoreError(f"incident {incident_id!r}: {what} {value!r} is not an RFC 3339 time")


def _number(value: Any, incident_id: str, what: str) -> float:
    """A finite float: NaN and infinities are not JSON (SQLite stores NaN as NULL)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number):
        raise StoreError(f"incident {incident_id!r}: {what} {value!r} is not a finite number")
    return number


def _json(value: Any, incident_id: str, what: str) -> Any:
    problem = _json_problem(value)
    if problem is not None:
        raise StoreError(f"incident {incident_id!r}: {what}: {problem}")
    return value


def _json_problem(value: Any) -> str | None:
    """Why `value` is not strict JSON, or None.

    PostgreSQL's json type refuses NaN and infinities, which SQLite would keep; both
    backends refuse them here, before anything is written.
    """
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return f"not strict JSON ({exc})"
    return None


def _no_nul(name: str, value: str | None) -> str | None:
    """`value`, refused if it holds U+0000 (PostgreSQL cannot even compare such a string)."""
    if value is not None and "\x00" in value:
        raise ValueError(f"{name} {value!r} contains a NUL character (U+0000); no stored value can")
    return value


def _utc(name: str, value: datetime | None) -> datetime | None:
    """A window bound in UTC; one that leaves the datetime range there (9999-12-31T23:00-01:00) is refused."""
    try:
        return None if value is None else _aware(value).astimezone(timezone.utc)
    except OverflowError:
        raise ValueError(f"{name} {value.isoformat()} is outside the representable range in UTC") from None


def _aware(value: datetime) -> datetime:
    """A naive datetime is taken as UTC (the contract has no local times)."""
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value


def _require(d: Any, key: str, incident_id: str) -> Any:
    if not isinstance(d, dict):
        raise StoreError(f"incident {incident_id!r}: expected an object holding {key!r}, got {d!r}")
    if d.get(key) is None:
        raise StoreError(f"incident {incident_id!r}: missing {key!r}")
    return d[key]


def _bulk_insert(session: Session, table: type[SQLModel], rows: list[dict[str, Any]]) -> None:
    if rows:  # an INSERT with no parameter sets would insert one row of defaults
        session.exec(insert(table), params=rows)


def _chunks(items: list[str]) -> Iterator[list[str]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]

