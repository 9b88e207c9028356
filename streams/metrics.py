"""Prometheus text exposition of a worker's counters (no client library needed).

Counters come from the stages' own `Stats` and the correlator; lag comes from the
consumer's positions. Rendering is a pure function so it can be tested on its own.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class WorkerMetrics:
    records: int = 0
    rejects: dict[str, int] = field(default_factory=dict)
    duplicates: int = 0
    symptoms: int = 0
    incidents_opened: int = 0
    incidents_resolved: int = 0
    incident_changes: int = 0
    dead_lettered: int = 0  # dead letters the broker acknowledged
    dead_letter_truncated: int = 0  # of those, sent cut to the topic's size limit
    dead_letter_failed: int = 0  # not acknowledged after every retry
    store_available: int = 1  # 0 while the store refuses writes
    store_pending_changes: int = 0  # incident changes waiting for the store
    checkpoints_refused: int = 0  # snapshots a stage refused to restore (started fresh instead)
    stages_restored: int = 0  # stages resumed from a snapshot (after a restart or a rebalance)
    consumer_lag: dict[str, int] = field(default_factory=dict)  # "topic:partition" -> messages behind
    newest_event_time: float | None = None  # newest event time stage 1 has read
    applied_event_time: float | None = None  # event time stage 2 has correlated up to
    idle_sources: int = 0  # telemetry partitions correlation no longer waits for (silent too long)
    late_events: int = 0  # events that came after correlation passed their tick, applied on arrival
    first_read_at: float | None = None  # Unix time stage 1 took its first telemetry message
    last_read_at: float | None = None  # Unix time stage 1 finished its latest telemetry message


def _value(value: float) -> str:
    """Exact: integers in full (`:g` would write 1234567 as 1.23457e+06) and floats as
    Python's shortest round-trip form (a Unix time keeps its fraction)."""
    if isinstance(value, int) or value.is_integer():
        return str(int(value))
    return repr(float(value))


def _line(name: str, value: float, labels: dict[str, str] | None = None) -> str:
    if labels:
        inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        return f"{name}{{{inner}}} {_value(value)}"
    return f"{name} {_value(value)}"


def render(m: WorkerMetrics) -> str:
    out: list[str] = []

    def metric(name: str, kind: str, help_: str, samples: list[tuple[float, dict | None]]) -> None:
        out.append(f"# HELP {name} {help_}")
        out.append(f"# TYPE {name} {kind}")
        out.extend(_line(name, v, lab) for v, lab in samples)

    metric("fabric_rca_records_total", "counter", "Telemetry records read by stage 1.", [(m.records, None)])
    metric("fabric_rca_rejects_total", "counter", "Unreadable records, by reason.",
           [(n, {"reason": r}) for r, n in sorted(m.rejects.items())] or [(0, {"reason": "none"})])
    metric("fabric_rca_dead_lettered_total", "counter", "Dead letters the broker acknowledged.", [(m.dead_lettered, None)])
    metric("fabric_rca_dead_letter_truncated_total", "counter",
           "Dead letters sent cut to the size limit (header truncated).", [(m.dead_letter_truncated, None)])
    metric("fabric_rca_dead_letter_failed_total", "counter",
           "Dead letters not acknowledged after every retry (logged as errors).", [(m.dead_letter_failed, None)])
    metric("fabric_rca_duplicates_total", "counter", "Duplicate records dropped.", [(m.duplicates, None)])
    metric("fabric_rca_symptoms_total", "counter", "Symptoms raised by stage 1.", [(m.symptoms, None)])
    metric("fabric_rca_incidents_opened_total", "counter", "Incidents published.", [(m.incidents_opened, None)])
    metric("fabric_rca_incidents_resolved_total", "counter", "Incidents resolved.", [(m.incidents_resolved, None)])
    metric("fabric_rca_incident_changes_total", "counter", "Incident changes stored and published.",
           [(m.incident_changes, None)])
    metric("fabric_rca_store_available", "gauge", "1 when the store takes writes, 0 while it refuses them.",
           [(m.store_available, None)])
    metric("fabric_rca_store_pending_changes", "gauge",
           "Incident changes waiting, in order, for the store to come back.", [(m.store_pending_changes, None)])
    metric("fabric_rca_checkpoints_refused_total", "counter",
           "Checkpoints a stage refused to restore; the stage started fresh at its committed offset.",
           [(m.checkpoints_refused, None)])
    metric("fabric_rca_stages_restored_total", "counter", "Stages resumed from a checkpoint.",
           [(m.stages_restored, None)])
    metric("fabric_rca_consumer_lag_messages", "gauge", "Messages not yet consumed, per partition.",
           [(n, {"partition": tp}) for tp, n in sorted(m.consumer_lag.items())] or [(0, {"partition": "none"})])
    metric("fabric_rca_idle_partitions", "gauge",
           "Telemetry partitions silent for longer than the idle limit; correlation does not wait for them.",
           [(m.idle_sources, None)])
    metric("fabric_rca_late_events_total", "counter",
           "Stage events that arrived after correlation had passed their tick (from a partition that was idle, "
           "or a job placement published late), applied on arrival rather than in order.",
           [(m.late_events, None)])
    if m.newest_event_time is not None and m.applied_event_time is not None:
        delay = max(0.0, m.newest_event_time - m.applied_event_time)
    else:
        delay = 0.0
    metric("fabric_rca_processing_delay_seconds", "gauge",
           "Event time between the newest record read and what correlation has applied.", [(delay, None)])
    metric("fabric_rca_first_read_timestamp_seconds", "gauge",
           "Unix time this worker took its first telemetry message (0: none yet).", [(m.first_read_at or 0, None)])
    metric("fabric_rca_last_read_timestamp_seconds", "gauge",
           "Unix time this worker finished its latest telemetry message (0: none yet); "
           "time() minus this is how long its telemetry has been silent.", [(m.last_read_at or 0, None)])
    return "\n".join(out) + "\n"
