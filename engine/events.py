"""What stage 1 (detect) hands to stage 2 (correlate): symptom changes, job snapshots and
ticks of event time, each labelled with the tick that produced it.

The same events flow in memory during `replay` and over the `fabric.symptoms` topic in
the Kafka workers; stage 2 applies them in one canonical order, so both paths reach the
same incidents.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NotRequired, TypedDict

import orjson

from engine.jobs import job_from_dict, job_to_dict
from engine.types import Entity, Job, Symptom

SYMPTOM, JOB, TICK = "symptom", "job", "tick"
_RANK = {JOB: 0, SYMPTOM: 1}


@dataclass(frozen=True, slots=True)
class StageEvent:
    kind: str  # symptom | job | tick
    tick: float  # the stage-1 tick (event time) at which it was emitted
    source: str = ""  # which stage-1 instance (partition) sent it
    symptom: Symptom | None = None
    job: Job | None = None

    def order(self) -> tuple:
        """Canonical order of application within a tick."""
        if self.symptom is not None:
            s = self.symptom
            return (self.tick, _RANK[SYMPTOM], s.start, s.key, 0 if s.end is None else 1)
        if self.job is not None:
            return (self.tick, _RANK[JOB], self.job.job_id, 0, 0)
        return (self.tick, 2, 0, "", 0)

    def to_bytes(self) -> bytes:
        return orjson.dumps(event_to_wire(self))

    @classmethod
    def from_bytes(cls, data: bytes) -> "StageEvent":
        return _from_doc(orjson.loads(data))


def encode_batch(events: list[StageEvent]) -> bytes:
    """Several events as one message (a JSON array): stage 1 sends what one input message
    produced together, usually a few seconds' ticks and their symptoms."""
    return b"[" + b",".join(e.to_bytes() for e in events) + b"]"


def decode_batch(data: bytes) -> list[StageEvent]:
    """The events of one message: a JSON array of events, or a single event."""
    if data[:1] == b"[":
        return [_from_doc(d) for d in orjson.loads(data)]
    return [StageEvent.from_bytes(data)]


# The wire forms as types: what a checkpoint holds of events, symptoms and jobs, checked
# field by field when it is read (engine.checkpoint).
class SymptomWire(TypedDict):
    key: str
    kind: str
    family: str
    entity: tuple[str, str]
    device: str
    start: float
    last: float
    end: float | None
    severity: float
    metrics: dict[str, float]
    rule: str
    # (added after format 2 was first written: a symptom of an older checkpoint or event has none)
    samples: NotRequired[dict[str, list[tuple[float, float]]]]


class JobWire(TypedDict):
    job_id: str
    tenant: str
    user: str
    state: str
    hosts: list[str]
    storage: list[str] | None
    start: float | None
    end: float | None


class EventWire(TypedDict):
    kind: Literal["symptom", "job", "tick"]
    tick: float
    source: str
    symptom: NotRequired[SymptomWire]
    job: NotRequired[JobWire]


def event_to_wire(e: StageEvent) -> dict:
    doc: dict = {"kind": e.kind, "tick": e.tick, "source": e.source}
    if e.symptom is not None:
        doc["symptom"] = symptom_to_wire(e.symptom)
    if e.job is not None:
        doc["job"] = job_to_dict(e.job)
    return doc


def event_from_wire(doc: dict) -> StageEvent:
    return _from_doc(doc)


def _from_doc(doc: dict) -> StageEvent:
    return StageEvent(
        kind=doc["kind"], tick=float(doc["tick"]), source=doc.get("source", ""),
        symptom=symptom_from_wire(doc["symptom"]) if "symptom" in doc else None,
        job=job_from_dict(doc["job"]) if "job" in doc else None,
    )


def symptom_to_wire(s: Symptom) -> dict:
    """Lossless (float seconds), unlike the contract's display form `Symptom.to_dict`.
    Samples only when there are some: a symptom without is written as before them."""
    doc = {
        "key": s.key, "kind": s.kind, "family": s.family, "entity": [s.entity.kind, s.entity.id],
        "device": s.device, "start": s.start, "last": s.last, "end": s.end, "severity": s.severity,
        "metrics": dict(s.metrics), "rule": s.rule,
    }
    if s.samples:
        doc["samples"] = {name: list(points) for name, points in s.samples.items()}
    return doc


def symptom_from_wire(d: dict) -> Symptom:
    kind, eid = d["entity"]
    return Symptom(
        key=d["key"], kind=d["kind"], family=d["family"], entity=Entity(kind, eid), device=d["device"],
        start=d["start"], last=d["last"], end=d["end"], severity=d["severity"],
        metrics=dict(d["metrics"]), rule=d["rule"],
        samples={name: [(t, v) for t, v in points] for name, points in (d.get("samples") or {}).items()},
    )
