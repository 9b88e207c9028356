"""API shapes: the incident of contract section 6, as served by `GET /incidents`.

Kept apart from the tables (`api/store/tables.py`): the store flattens entities and
keeps times as datetimes, the API nests entities and serves times as the contract's
RFC 3339 strings (`2025-11-29T07:08:10.000Z`, UTC, milliseconds). Field order here is
the key order of the served JSON.
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from contract.entities import CAUSES, EXTENSION_CAUSES

IncidentStatus = Literal["open", "resolved"]
Severity = Literal["critical", "major", "minor"]
# The root causes of contract section 5 and the engine's extension causes, from contract/'s one list.
CauseName = Literal[CAUSES]  # type: ignore[valid-type]
CAUSE_HELP = (f"a root cause: one of contract section 5, or an extension cause of this engine beyond the "
              f"contract's list ({', '.join(EXTENSION_CAUSES)}: docs/design.md \"Extension causes\")")

_TIME = "RFC 3339 UTC time with milliseconds, e.g. 2025-11-29T07:08:10.000Z"


class _Public(BaseModel):
    model_config = ConfigDict(extra="ignore")


class EntityPublic(_Public):
    kind: str = Field(description="link, interface, switch, host, storage or job")
    id: str = Field(description="contract section 4 id, e.g. gpu001:eth0 or gpu001:eth0--leaf01:swp1")


class RootCausePublic(_Public):
    rank: int = Field(description="1 is the most likely cause")
    cause: str = Field(description=CAUSE_HELP.replace("a root cause: one", "one", 1))
    entity: EntityPublic
    score: float = Field(description="confidence in [0, 1]")
    evidence: list[dict[str, Any]] = Field(description="free-form facts behind the verdict")


class AffectedJobPublic(_Public):
    job_id: str
    tenant: str
    impact: str = Field(description="how the root cause touches the job")
    hosts: list[str] = Field(default_factory=list, description="the hosts the job runs on")


class SymptomPublic(_Public):
    key: str
    kind: str = Field(description="what was seen, e.g. pfc_pause_tx")
    family: str
    entity: EntityPublic
    device: str
    start: str = Field(description=_TIME)
    last: str = Field(description=_TIME)
    end: str | None = Field(description=f"{_TIME}; null while the symptom lasts")
    severity: float
    metrics: dict[str, Any]
    rule: str
    samples: dict[str, list[tuple[float, float]]] = Field(
        default_factory=dict,
        description="the metrics that drove it over its life: per metric [[unix seconds, value], ...] in "
                    "event-time order, at most 120 points (the peak, the first and the last kept); "
                    "empty for symptoms stored before samples were, and for silences",
    )


class IncidentPublic(_Public):
    id: str
    status: IncidentStatus
    severity: Severity
    opened_at: str = Field(description=f"{_TIME}: when the first symptom happened (event time)")
    updated_at: str = Field(description=_TIME)
    resolved_at: str | None = Field(description=f"{_TIME}; null while open")
    detected_at: str = Field(
        description=f"{_TIME}: the event-time watermark when the engine first published it"
    )
    title: str
    maintenance: bool = Field(
        default=False,
        description="the root cause lies in a maintenance window or on an admin-down port: kept, not notified",
    )
    maintenance_reason: str | None = Field(default=None, description="which window or port; null when not in maintenance")
    root_causes: list[RootCausePublic] = Field(description="ranked, best first")
    affected_jobs: list[AffectedJobPublic]
    symptoms: list[SymptomPublic]


class HealthPublic(_Public):
    status: Literal["ok", "error"]
    db: Literal["ok", "error"]
    incidents: int | None = Field(default=None, description="incidents stored")
    detail: str | None = Field(default=None, description="why the database is not usable")


class ErrorPublic(_Public):
    detail: Any
