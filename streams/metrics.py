"""Prometheus exposition of a worker's counters, rendered by prometheus-client.

Counters come from the stages' own `Stats` and the correlator; lag comes from the
consumer's positions. The worker's hot path only bumps its own counters: a
`WorkerCollector` reads a `WorkerMetrics` snapshot at scrape time, in a registry of its
own per app (several apps share one process in the tests, so never the global one).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector


@dataclass
class WorkerMetrics:
    records: int = 0
    rejects: dict[str, int] = field(default_factory=dict)
    duplicates: int = 0
    superseded: int = 0  # late records behind a newer sample of their series: taken, no rate
    symptoms: int = 0
    incidents_opened: int = 0
    incidents_resolved: int = 0
    incidents_reopened: int = 0
    incident_changes: int = 0
    incident_changes_unpublished: int = 0  # of those, refused by the broker on the incidents topic
    symptom_messages_unpublished: int = 0  # symptoms messages the broker refused (lost to correlation)
    snapshots_undelivered: int = 0  # stage snapshots the broker did not take (their input stays unacked)
    dead_lettered: int = 0  # dead letters the broker acknowledged
    dead_letter_truncated: int = 0  # of those, sent cut to the topic's size limit
    dead_letter_failed: int = 0  # not acknowledged after every retry
    store_available: int = 1  # 0 while the store refuses writes
    store_pending_changes: int = 0  # incident changes waiting for the store
    checkpoints_refused: int = 0  # snapshots a stage refused to restore (rebuilt from input instead)
    stages_restored: int = 0  # stages resumed from a snapshot (after a restart or a rebalance)
    state_rebuilt_records: int = 0  # input messages re-read to rebuild stages whose snapshot was refused
    consumer_lag: dict[str, int] = field(default_factory=dict)  # "topic:partition" -> messages behind
    unused: dict[str, list] = field(default_factory=dict)  # reason -> [count, an example] (engine.pipeline.UNUSED)
    newest_event_time: float | None = None  # newest event time stage 1 has read
    applied_event_time: float | None = None  # event time stage 2 has correlated up to
    idle_sources: int = 0  # telemetry partitions correlation no longer waits for (silent too long)
    late_events: int = 0  # events that came after correlation passed their tick, applied on arrival
    first_read_at: float | None = None  # Unix time stage 1 took its first telemetry message
    last_read_at: float | None = None  # Unix time stage 1 finished its latest telemetry message
    detect_in_flight: int = 0  # telemetry messages sent to the detect children and not answered yet


def _counter(name: str, help_: str, value: float) -> CounterMetricFamily:
    """`name` ends in _total; prometheus-client strips it and the text format adds it back."""
    return CounterMetricFamily(name, help_, value=value)


def _gauge(name: str, help_: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, help_, value=value)


def _labelled(family: CounterMetricFamily | GaugeMetricFamily, label: str,
              values: dict[str, int], empty: str) -> CounterMetricFamily | GaugeMetricFamily:
    """One sample per label value, sorted; a single 0 sample labelled `empty` if none."""
    for key, n in sorted(values.items()) or [(empty, 0)]:
        family.add_metric([key], n)
    return family


def families(m: WorkerMetrics) -> Iterator[Metric]:
    """The metric families of one snapshot, in exposition order (names, types, labels and
    HELP texts are the contract of /metrics)."""
    yield _counter("fabric_rca_records_total", "Telemetry records read by stage 1.", m.records)
    yield _labelled(CounterMetricFamily("fabric_rca_rejects_total", "Unreadable records, by reason.",
                                        labels=["reason"]), "reason", m.rejects, "none")
    unused = CounterMetricFamily("fabric_rca_unused_total",
                                 "What was read and not used, by reason, with the first example seen "
                                 "(unknown measurements, fields, devices, interfaces; non-numeric counters; "
                                 "rule hits that resolved to no entity).", labels=["reason", "example"])
    for reason, (n, example) in sorted(m.unused.items()) or [("none", (0, ""))]:
        unused.add_metric([reason, example], n)
    yield unused
    yield from _dead_letters(m)
    yield _counter("fabric_rca_duplicates_total", "Duplicate records dropped.", m.duplicates)
    yield _counter("fabric_rca_late_superseded_total",
                   "Late records older than a sample of their series already read: taken, no rate (the newer "
                   "sample's counters cover them).", m.superseded)
    yield _counter("fabric_rca_symptoms_total", "Symptoms raised by stage 1.", m.symptoms)
    yield _counter("fabric_rca_incidents_opened_total", "Incidents published.", m.incidents_opened)
    yield _counter("fabric_rca_incidents_resolved_total", "Incidents resolved.", m.incidents_resolved)
    yield _counter("fabric_rca_incidents_reopened_total",
                   "Resolved incidents reopened: their fault came back on the same entity within --reopen-within.",
                   m.incidents_reopened)
    yield _counter("fabric_rca_incident_changes_total", "Incident changes stored and published.",
                   m.incident_changes)
    yield from _unpublished(m)
    yield _gauge("fabric_rca_store_available", "1 when the store takes writes, 0 while it refuses them.",
                 m.store_available)
    yield _gauge("fabric_rca_store_pending_changes",
                 "Incident changes waiting, in order, for the store to come back.", m.store_pending_changes)
    yield _counter("fabric_rca_checkpoints_refused_total",
                   "Checkpoints a stage refused to restore; the stage was rebuilt from its partition's input.",
                   m.checkpoints_refused)
    yield _counter("fabric_rca_state_rebuilt_records_total",
                   "Input messages re-read, from the earliest retained offset up to the committed one, to rebuild "
                   "stages whose checkpoint was refused.", m.state_rebuilt_records)
    yield _counter("fabric_rca_stages_restored_total", "Stages resumed from a checkpoint.", m.stages_restored)
    yield _labelled(GaugeMetricFamily("fabric_rca_consumer_lag_messages", "Messages not yet consumed, per partition.",
                                      labels=["partition"]), "partition", m.consumer_lag, "none")
    yield _gauge("fabric_rca_idle_partitions",
                 "Telemetry partitions silent for longer than the idle limit; correlation does not wait for them.",
                 m.idle_sources)
    yield _counter("fabric_rca_late_events_total",
                   "Stage events that arrived after correlation had passed their tick (from a partition that was idle, "
                   "or a job placement published late), applied on arrival rather than in order.",
                   m.late_events)
    yield _gauge("fabric_rca_detect_in_flight_messages",
                 "Telemetry messages sent to the worker's detect processes and not yet answered (0 with the stages in "
                 "the worker's process); near 4,096 a process, the detect stages are what holds the worker back.",
                 m.detect_in_flight)
    yield _gauge("fabric_rca_processing_delay_seconds",
                 "Event time between the newest record read and what correlation has applied.", _delay(m))
    yield _gauge("fabric_rca_first_read_timestamp_seconds",
                 "Unix time this worker took its first telemetry message (0: none yet).", m.first_read_at or 0)
    yield _gauge("fabric_rca_last_read_timestamp_seconds",
                 "Unix time this worker finished its latest telemetry message (0: none yet); "
                 "time() minus this is how long its telemetry has been silent.", m.last_read_at or 0)


def _dead_letters(m: WorkerMetrics) -> Iterator[Metric]:
    yield _counter("fabric_rca_dead_lettered_total", "Dead letters the broker acknowledged.", m.dead_lettered)
    yield _counter("fabric_rca_dead_letter_truncated_total",
                   "Dead letters sent cut to the size limit (header truncated).", m.dead_letter_truncated)
    yield _counter("fabric_rca_dead_letter_failed_total",
                   "Dead letters not acknowledged after every retry (logged as errors).", m.dead_letter_failed)


def _unpublished(m: WorkerMetrics) -> Iterator[Metric]:
    yield _counter("fabric_rca_incident_changes_unpublished_total",
                   "Incident changes the broker refused on the incidents topic (stored all the same; "
                   "the first one logged as an error).", m.incident_changes_unpublished)
    yield _counter("fabric_rca_symptom_messages_unpublished_total",
                   "Symptoms messages the broker refused on the symptoms topic: their events never reached "
                   "correlation (the first one logged as an error).", m.symptom_messages_unpublished)
    yield _counter("fabric_rca_snapshots_undelivered_total",
                   "Stage snapshots the broker did not take (away, or one over the state topic's max.message.bytes: "
                   "more partitions make them smaller); their input stays unacked until one is delivered.",
                   m.snapshots_undelivered)


def _delay(m: WorkerMetrics) -> float:
    if m.newest_event_time is None or m.applied_event_time is None:
        return 0.0
    return max(0.0, m.newest_event_time - m.applied_event_time)


class WorkerCollector(Collector):
    """Yields the families of `snapshot()` at each scrape."""

    def __init__(self, snapshot: Callable[[], WorkerMetrics]):
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        return families(self._snapshot())


def worker_registry(snapshot: Callable[[], WorkerMetrics]) -> CollectorRegistry:
    """A registry of its own (not prometheus-client's global one) holding a WorkerCollector."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(WorkerCollector(snapshot))
    return registry


def render_registry(registry: CollectorRegistry) -> str:
    """The text exposition (format 0.0.4) of everything in `registry`."""
    return generate_latest(registry).decode()


def render(m: WorkerMetrics) -> str:
    """The text exposition of one snapshot."""
    return render_registry(worker_registry(lambda: m))
