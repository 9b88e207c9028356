"""Stage 6: the incident: one fault, its symptoms, its ranked causes and its blast radius.

Ids are deterministic (a hash of the symptom that founded the incident), so replaying the
same telemetry twice into one store updates rows instead of duplicating them.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import msgspec

from engine.events import SymptomWire, symptom_from_wire, symptom_to_wire
from engine.samples import display
from engine.types import AffectedJob, RootCause, Symptom, rfc3339

TITLES = {
    "link_flap": "Link {e} is flapping",
    "link_degraded": "Link {e} is degraded (CRC/FEC/symbol errors)",
    "pfc_storm": "PFC pause storm from {e}",
    "congestion": "Sustained congestion at {e}",
    "microburst": "Microbursts with buffer drops at {e}",
    "nic_degraded": "NIC {e} is degraded (drops or PCIe stalls)",
    "storage_slow": "Storage {e} is slow",
    "device_down": "Switch {e} is down",
    "noisy_neighbor": "Job {e} saturates shared links (noisy neighbor)",
    "link_miswired": "Link {e} is miswired (LLDP sees another neighbour)",  # an extension cause (engine/cabling.py)
}


def incident_title(cause: str | None, entity_id: str, jobs: int) -> str:
    """The line a person reads first: the top cause on its entity, and the jobs it hurt."""
    if cause is None:
        return "Unexplained symptoms"
    return f"{TITLES[cause].format(e=entity_id)} ({jobs} job{'s' if jobs != 1 else ''} affected)"


def incident_id(founding_key: str) -> str:
    return "inc-" + hashlib.sha1(founding_key.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class SeverityPolicy:
    critical_jobs: int = 3
    critical_hosts: int = 32
    major_jobs: int = 1
    major_hosts: int = 2

    def grade(self, *, jobs: int, hosts: int) -> str:
        if jobs >= self.critical_jobs or hosts >= self.critical_hosts:
            return "critical"
        if jobs >= self.major_jobs or hosts >= self.major_hosts:
            return "major"
        return "minor"


@dataclass
class Incident:
    id: str
    opened_at: float
    updated_at: float
    symptoms: dict[str, Symptom] = field(default_factory=dict)
    status: str = "open"
    detected_at: float | None = None  # watermark at first publication; None: not yet published
    resolved_at: float | None = None
    root_causes: list[RootCause] = field(default_factory=list)
    affected_jobs: list[AffectedJob] = field(default_factory=list)
    hosts_affected: int = 0
    severity: str = "minor"
    received_at: float = 0.0  # watermark when its first incident-opening symptom arrived
    can_open: bool = False  # holds a symptom that may open an incident on its own
    dirty: bool = True
    maintenance: str | None = None  # why its root cause is under maintenance (engine.maintenance); sticks
    credible: bool = False  # its leading cause has evidence enough for a fault (engine/credible.py)
    onset: float | None = None  # ... which began then
    # symptom key -> (its samples, as shown): an incident changes again and again while
    # most of its symptoms do not, and showing the samples was a tenth of a replay of a
    # pause storm. A symptom's samples are not changed once it is held here (the
    # correlator holds snapshots), so the same object shows the same.
    _shown: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def published(self) -> bool:
        return self.detected_at is not None

    @property
    def last_activity(self) -> float:
        return max((s.end if s.end is not None else s.last) for s in self.symptoms.values())

    @property
    def quiet(self) -> bool:
        return all(s.end is not None for s in self.symptoms.values())

    def title(self) -> str:
        top = self.root_causes[0] if self.root_causes else None
        return incident_title(top.cause if top else None, top.entity.id if top else "", len(self.affected_jobs))

    def to_dict(self) -> dict:
        """The contract section 6 JSON."""
        symptoms = sorted(self.symptoms.values(), key=lambda s: (s.start, s.key))
        return {
            "id": self.id,
            "status": self.status,
            "severity": self.severity,
            "opened_at": rfc3339(self.opened_at),
            "updated_at": rfc3339(self.updated_at),
            "resolved_at": rfc3339(self.resolved_at),
            "detected_at": rfc3339(self.detected_at),
            "title": self.title(),
            "maintenance": self.maintenance is not None,
            "maintenance_reason": self.maintenance,
            "root_causes": [rc.to_dict() for rc in self.root_causes],
            "affected_jobs": [j.to_dict() for j in self.affected_jobs],
            "symptoms": [s.to_dict(self._samples_shown(s)) for s in symptoms],
        }

    def _samples_shown(self, s: Symptom) -> dict:
        shown = self._shown
        got = shown.get(s.key)
        if got is None or got[0] is not s.samples:
            if len(shown) >= 2 * len(self.symptoms) + 16:  # (symptoms folded away)
                for key in [k for k in shown if k not in self.symptoms]:
                    del shown[key]
            got = shown[s.key] = (s.samples, display(s.samples))
        return got[1]

    def snapshot(self) -> IncidentState:
        return IncidentState(
            id=self.id, opened_at=self.opened_at, updated_at=self.updated_at,
            symptoms=[symptom_to_wire(s) for s in self.symptoms.values()], status=self.status,
            detected_at=self.detected_at, resolved_at=self.resolved_at, root_causes=list(self.root_causes),
            affected_jobs=list(self.affected_jobs), hosts_affected=self.hosts_affected, severity=self.severity,
            received_at=self.received_at, can_open=self.can_open, dirty=self.dirty, maintenance=self.maintenance,
            credible=self.credible, onset=self.onset)

    @classmethod
    def restore(cls, st: IncidentState) -> Incident:
        if not st.symptoms:
            raise ValueError(f"the checkpoint holds incident {st.id} without symptoms")
        symptoms = {s["key"]: symptom_from_wire(s) for s in st.symptoms}
        return cls(id=st.id, opened_at=st.opened_at, updated_at=st.updated_at, symptoms=symptoms,
                   status=st.status, detected_at=st.detected_at, resolved_at=st.resolved_at,
                   root_causes=list(st.root_causes), affected_jobs=list(st.affected_jobs),
                   hosts_affected=st.hosts_affected, severity=st.severity, received_at=st.received_at,
                   can_open=st.can_open, dirty=st.dirty, maintenance=st.maintenance, credible=st.credible,
                   onset=st.onset)


class IncidentState(msgspec.Struct, frozen=True, omit_defaults=True):
    """An incident being correlated, as checkpoint data."""

    id: str
    opened_at: float
    updated_at: float
    symptoms: list[SymptomWire]
    status: str
    detected_at: float | None
    resolved_at: float | None
    root_causes: list[RootCause]
    affected_jobs: list[AffectedJob]
    hosts_affected: int
    severity: str
    received_at: float
    can_open: bool
    dirty: bool
    maintenance: str | None = None  # (added in 0.2; older checkpoints hold none)
    credible: bool = False  # (a checkpoint from before persistence: ranked again when dirty)
    onset: float | None = None
