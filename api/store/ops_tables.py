"""Tables of what operators record: maintenance windows, verdicts on incidents, API tokens.

Neither references `incident` by a foreign key: an incident's row is rewritten on every
upsert, and a verdict must outlive that (and may name an incident the store lost)."""
from __future__ import annotations

from datetime import datetime

from sqlmodel import Field, SQLModel

from api.store.tables import UTCDateTime


class MaintenanceRow(SQLModel, table=True):
    """A maintenance window: incidents whose root cause lies on `entity` (or on a port or
    link of that device) opening within [starts_at, ends_at] are marked, not notified."""

    __tablename__ = "maintenance_window"  # type: ignore[assignment]

    id: int | None = Field(default=None, primary_key=True)
    entity: str = Field(index=True)
    starts_at: datetime = Field(sa_type=UTCDateTime, index=True)
    ends_at: datetime = Field(sa_type=UTCDateTime, index=True)
    note: str = ""
    created_at: datetime = Field(sa_type=UTCDateTime)


class FeedbackRow(SQLModel, table=True):
    """One operator verdict on an incident; the latest per incident is the one that counts.

    `cause` and `entity` are the incident's top root cause when the verdict was given:
    precision is per cause the engine named, whatever the incident became later."""

    __tablename__ = "feedback"  # type: ignore[assignment]

    id: int | None = Field(default=None, primary_key=True)
    incident_id: str = Field(index=True)
    verdict: str = Field(index=True)
    cause: str = Field(index=True)
    entity: str
    right_cause: str | None = None
    right_entity: str | None = None
    duplicate_of: str | None = None
    note: str = ""
    incident_opened_at: datetime = Field(sa_type=UTCDateTime, index=True)  # for precision by day
    created_at: datetime = Field(sa_type=UTCDateTime, index=True)


class TokenRow(SQLModel, table=True):
    """An API bearer token (api/auth.py): the token is `frca_<id>_<secret>`; only a hash of the
    whole token is kept, so the store cannot give a token back. Revoked rows stay, for the record."""

    __tablename__ = "api_token"  # type: ignore[assignment]

    id: str = Field(primary_key=True)
    token_sha256: str  # hex SHA-256 of the whole token, compared in constant time
    role: str = Field(index=True)  # admin, operator or tenant
    tenant: str | None = Field(default=None, index=True)  # the tenant of a tenant token
    name: str = ""
    created_at: datetime = Field(sa_type=UTCDateTime)
    revoked_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
