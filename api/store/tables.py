"""SQLModel tables of the incident store.

One incident is one `incident` row plus its ranked `root_cause` rows, its
`affected_job` rows and its `symptom` rows. The columns that `GET /incidents`
filters on (status, times, causes, entities, jobs, tenants) are real indexed
columns; the free-form parts (evidence, metrics, the topology document) are JSON.
Child rows keep their `position` in the incident so they come back in the order
the engine wrote them.

These are storage shapes only; the API shapes live in `api/schemas.py`.
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import JSON, Column, DateTime
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator
from sqlmodel import Field, SQLModel


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC datetime on every backend.

    PostgreSQL keeps the offset (timestamptz); SQLite stores naive text, so we
    store UTC there and put the UTC zone back on read. Naive input is refused:
    a time without a zone is a bug upstream, not something to guess.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value.isoformat()} given to a UTC column")
        value = value.astimezone(timezone.utc)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc)


class IncidentRow(SQLModel, table=True):
    __tablename__ = "incident"  # type: ignore[assignment]

    id: str = Field(primary_key=True)
    status: str = Field(index=True)
    severity: str
    opened_at: datetime = Field(sa_type=UTCDateTime, index=True)
    updated_at: datetime = Field(sa_type=UTCDateTime)
    resolved_at: datetime | None = Field(default=None, sa_type=UTCDateTime, index=True)
    detected_at: datetime = Field(sa_type=UTCDateTime)
    title: str
    # The rank-1 root cause, denormalised for cheap filtering and listing.
    top_cause: str | None = Field(default=None, index=True)
    top_entity_kind: str | None = Field(default=None, index=True)
    top_entity_id: str | None = Field(default=None, index=True)
    # Root cause in a maintenance window or on an admin-down port: kept, not notified.
    maintenance: bool = Field(default=False, index=True)
    maintenance_reason: str | None = Field(default=None)


class RootCauseRow(SQLModel, table=True):
    __tablename__ = "root_cause"  # type: ignore[assignment]

    incident_id: str = Field(foreign_key="incident.id", primary_key=True)
    position: int = Field(primary_key=True)
    rank: int
    cause: str = Field(index=True)
    entity_kind: str
    entity_id: str = Field(index=True)
    score: float
    evidence: list[Any] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))


class AffectedJobRow(SQLModel, table=True):
    __tablename__ = "affected_job"  # type: ignore[assignment]

    incident_id: str = Field(foreign_key="incident.id", primary_key=True)
    position: int = Field(primary_key=True)
    job_id: str = Field(index=True)
    tenant: str = Field(index=True)
    impact: str
    hosts: list[str] | None = Field(default=None, sa_column=Column(JSON, nullable=True))  # NULL: stored before hosts were


class SymptomRow(SQLModel, table=True):
    __tablename__ = "symptom"  # type: ignore[assignment]

    incident_id: str = Field(foreign_key="incident.id", primary_key=True)
    position: int = Field(primary_key=True)
    key: str
    kind: str
    family: str
    entity_kind: str
    entity_id: str = Field(index=True)
    device: str = Field(index=True)
    start: datetime = Field(sa_type=UTCDateTime)
    last: datetime = Field(sa_type=UTCDateTime)
    end: datetime | None = Field(default=None, sa_type=UTCDateTime)
    severity: float
    metrics: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    rule: str
    # metric -> [[unix seconds, value], ...] (engine/samples.py); NULL: stored before samples were
    samples: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))


class TopologyRow(SQLModel, table=True):
    """The topology snapshot the incidents refer to; one row, id 1."""

    __tablename__ = "topology"  # type: ignore[assignment]

    id: int = Field(default=1, primary_key=True)
    document: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))


class IncidentChangeRow(SQLModel, table=True):
    """The last write of each incident, numbered: what `GET /incidents/stream` follows.

    One row per incident (a rewrite replaces its row with a new, higher `seq`), so the
    table stays as large as the store and `seq > N` lists every incident written after
    change N, by whichever process wrote it. AUTOINCREMENT on SQLite: a deleted highest
    `seq` is never handed out again (a plain rowid would reuse it and a follower would
    miss the rewrite). See `api/store/changes.py`.
    """

    __tablename__ = "incident_change"  # type: ignore[assignment]
    __table_args__ = {"sqlite_autoincrement": True}

    seq: int | None = Field(default=None, primary_key=True)
    incident_id: str = Field(index=True, unique=True)
    written_at: datetime = Field(sa_type=UTCDateTime)
