"""The worker's /healthz document and /metrics figures, gathered from its stages."""
from __future__ import annotations

from collections import Counter

import faust
from faust.types import TP

from engine.pipeline import CorrelateStage, DetectStage
from notify.metrics import render_notify
from streams.detect_child import ChildStage, figures
from streams.metrics import WorkerMetrics, render


def _finite(t: float) -> float | None:
    return t if t != float("-inf") else None  # (-inf is not JSON)


def health(agents) -> dict:
    """/healthz: the stages held, event time correlated up to, what correlation waits for."""
    cp = agents.checkpoints
    c = cp.stages.get(agents.correlate_key)
    applied = c.applied_to if isinstance(c, CorrelateStage) else float("-inf")
    # event time correlated up to; null before the first second
    store = agents.store
    doc = {"status": "ok" if store.available else "store_unavailable", "stages": sorted(cp.stages),
           "applied_to": _finite(applied),
           # incident changes wait in order while the store is away, and are written when it is back
           "store": {"available": store.available, "pending_changes": len(store.pending)},
           # the detect stages' processes (streams.detect_child): none when they run in this one
           "detect_processes": [{"pid": c.process.pid, "alive": c.process.is_alive(), "in_flight": c.in_flight,
                                 "stages": sorted(c.stages)} for c in agents.children]}
    if isinstance(c, CorrelateStage) and agents.sources:
        idle = agents.sources[0].idle()
        # correlation holds everything back until these partitions tick (or go idle)
        doc["waiting_for"] = c.waiting_for(idle)
        doc["idle_sources"] = sorted(idle)
    return doc


def _detect_figures(m: WorkerMetrics, stages) -> None:
    rejects: Counter = Counter()
    clocks = []
    for stage in stages:
        if not isinstance(stage, (DetectStage, ChildStage)):
            continue
        f = figures(stage)
        m.records += f.records
        m.duplicates += f.duplicates
        m.superseded += f.superseded
        m.symptoms += f.symptoms
        rejects.update(f.rejects)
        for reason, (n, example) in f.unused.items():
            entry = m.unused.setdefault(reason, [0, example])
            entry[0] += n
        if f.clock != float("-inf"):
            clocks.append(f.clock)
    m.rejects = dict(rejects)
    m.newest_event_time = max(clocks) if clocks else None


def _lag(app: faust.App, offsets: dict[tuple[str, int], int]) -> dict[str, int]:
    lag = {}
    for (topic, partition), offset in offsets.items():
        try:
            high = app.consumer.highwater(TP(topic, partition))
        except Exception:  # not assigned (any more) or not known yet: no figure rather than a wrong one
            continue
        if high is not None:
            lag[f"{topic}:{partition}"] = max(0, high - offset - 1)
    return lag


def worker_metrics(app: faust.App, agents) -> WorkerMetrics:
    counters, cp = agents.counters, agents.checkpoints
    dl = agents.dead_letters
    m = WorkerMetrics(dead_lettered=dl.delivered, dead_letter_truncated=dl.truncated, dead_letter_failed=dl.failed,
                      incident_changes=counters.incident_changes,
                      incident_changes_unpublished=counters.incident_changes_unpublished,
                      symptom_messages_unpublished=counters.symptom_messages_unpublished, stages_restored=cp.restored,
                      checkpoints_refused=cp.refused, snapshots_undelivered=cp.undelivered, state_rebuilt_records=agents.rebuilder.records,
                      first_read_at=counters.first_read_at,
                      last_read_at=counters.last_read_at)
    m.store_available, m.store_pending_changes = int(agents.store.available), len(agents.store.pending)
    _detect_figures(m, cp.stages.values())
    c = cp.stages.get(agents.correlate_key)
    if isinstance(c, CorrelateStage):
        m.incidents_opened, m.incidents_resolved = c.correlator.opened, c.correlator.resolved
        m.incidents_reopened = c.correlator.reopened
        m.applied_event_time = _finite(c.applied_to)
        m.late_events = c.late
        if agents.sources:
            m.idle_sources = len(agents.sources[0].idle())
    m.consumer_lag = _lag(app, agents.offsets)
    m.detect_in_flight = sum(child.in_flight for child in agents.children)
    return m


def register(app: faust.App, agents) -> None:
    @app.page("/healthz")
    async def healthz(web, request):
        return web.json(health(agents))

    @app.page("/metrics")
    async def metrics(web, request):
        text = render(worker_metrics(app, agents))
        notifier = getattr(app, "fabric_notifier", None)
        if notifier is not None:
            text += render_notify(notifier.figures())
        return web.text(text, content_type="text/plain; version=0.0.4")
