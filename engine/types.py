"""Domain types shared by every pipeline stage.

Plain dataclasses: serialisable, comparable, free of any transport (Kafka, HTTP, SQL).
Times are event times in float seconds since the Unix epoch.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

# The contract's entity kinds, causes and ids live in contract/ (imported by every layer).
from contract.entities import (  # noqa: F401  (names the stages use with the types below)
    CAUSE_ENTITY_KIND, CAUSES, HOST, INTERFACE, JOB, LINK, STORAGE, SWITCH, device_of, interface_id, link_id,
)
from contract.times import rfc3339  # noqa: F401
from engine.samples import copied, display


@dataclass(frozen=True, slots=True, order=True)
class Entity:
    kind: str
    id: str

    def to_dict(self) -> dict:
        return {"kind": self.kind, "id": self.id}


@dataclass(slots=True)
class Metric:
    """One normalized telemetry record (a Telegraf metric with its time in seconds)."""

    name: str
    tags: dict[str, str]
    fields: dict[str, float | str]
    ts: float
    series: str = ""  # measurement and sorted tags: the identity of a time series


@dataclass(frozen=True, slots=True)
class Reject:
    """A record that could not be read: a short reason code and a human detail."""

    reason: str
    detail: str
    raw: str


@dataclass(frozen=True, slots=True)
class Job:
    job_id: str
    tenant: str
    user: str
    state: str
    hosts: tuple[str, ...]
    storage: tuple[str, ...] | None  # None: every storage host
    start: float | None
    end: float | None

    def running_at(self, ts: float) -> bool:
        """Whether the job holds its nodes at event time ts: start <= ts < end, None
        being open. A PENDING job holds none, whatever its projected times say."""
        if self.state == "PENDING":
            return False
        return (self.start is None or self.start <= ts) and (self.end is None or ts < self.end)


@dataclass(slots=True)
class Symptom:
    """A detected abnormal condition on one entity over an interval of event time."""

    key: str  # stable: rule id, entity id and start time
    kind: str  # what was seen, e.g. "pfc_pause_tx"
    family: str  # symptom family, e.g. "pfc"
    entity: Entity
    device: str  # device the entity lives on (host name)
    start: float
    last: float
    end: float | None = None
    severity: float = 0.5  # 0..1
    metrics: dict[str, float] = field(default_factory=dict)  # peak feature values
    rule: str = ""
    # metric -> its values over the symptom's life, [(event time, value)], bounded (engine/samples.py)
    samples: dict[str, list[tuple[float, float]]] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return self.end is None

    def snapshot(self) -> Symptom:
        """A copy that the detector's later updates of this symptom leave as it is."""
        return replace(self, metrics=dict(self.metrics), samples=copied(self.samples))

    def to_dict(self, shown_samples: dict | None = None) -> dict:
        """The contract section 6 JSON; `shown_samples`: `display(self.samples)` when the
        caller kept it from before (`Incident.to_dict`)."""
        return {
            "key": self.key,
            "kind": self.kind,
            "family": self.family,
            "entity": self.entity.to_dict(),
            "device": self.device,
            "start": rfc3339(self.start),
            "last": rfc3339(self.last),
            "end": rfc3339(self.end),
            "severity": round(self.severity, 3),
            "metrics": {k: round(v, 3) for k, v in sorted(self.metrics.items())},
            "rule": self.rule,
            # (beyond contract section 6: accept more)
            "samples": display(self.samples) if shown_samples is None else shown_samples,
        }


@dataclass(frozen=True, slots=True)
class RootCause:
    rank: int
    cause: str
    entity: Entity
    score: float
    evidence: tuple[dict, ...] = ()

    def to_dict(self) -> dict:
        return {
            "rank": self.rank,
            "cause": self.cause,
            "entity": self.entity.to_dict(),
            "score": round(self.score, 4),
            "evidence": list(self.evidence),
        }


@dataclass(frozen=True, slots=True)
class AffectedJob:
    job_id: str
    tenant: str
    impact: str
    # Where the job runs: the hosts a tenant's view of the incident may show (api/scope.py).
    # A copy of the placement, not part of the verdict: equality ignores it.
    hosts: tuple[str, ...] = field(default=(), compare=False)

    def to_dict(self) -> dict:
        return {"job_id": self.job_id, "tenant": self.tenant, "impact": self.impact, "hosts": list(self.hosts)}
