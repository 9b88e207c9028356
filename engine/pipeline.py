"""The whole diagnosis as one object: normalize -> order -> features/detect -> correlate.

Transport-free: `replay` feeds it lines from files, the Kafka workers feed it message
values. It only ever sees bytes and event time and hands back incident changes.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from engine.correlate import CorrelationConfig, Correlator
from engine.detect import Detector
from engine.features import JOB_MEASUREMENT, MEASUREMENTS
from engine.jobs import JobBook, JobError, job_from_placement
from engine.normalize import parse_line
from engine.order import Reorderer
from engine.topology import Topology
from engine.types import Metric, Reject
from rules.schema import RuleSet


@dataclass(frozen=True)
class EngineConfig:
    lateness_s: float = 5.0  # how late a record may arrive and still be placed in order
    tick_s: float = 1.0  # event-time step of detection and correlation timers
    correlation: CorrelationConfig = CorrelationConfig()


@dataclass
class Stats:
    records: int = 0  # metrics read (a batch counts each metric)
    lines: int = 0
    rejects: Counter = field(default_factory=Counter)
    ignored_measurements: Counter = field(default_factory=Counter)
    ignored_fields: int = 0
    duplicates: int = 0
    counter_resets: int = 0
    symptoms: int = 0
    incidents_opened: int = 0
    incidents_resolved: int = 0
    watermark: float | None = None

    def summary(self) -> dict:
        return {
            "records": self.records,
            "lines": self.lines,
            "rejects": dict(sorted(self.rejects.items())),
            "rejected": sum(self.rejects.values()),
            "duplicates": self.duplicates,
            "ignored_measurements": dict(sorted(self.ignored_measurements.items())),
            "ignored_fields": self.ignored_fields,
            "counter_resets": self.counter_resets,
            "symptoms": self.symptoms,
            "incidents_opened": self.incidents_opened,
            "incidents_resolved": self.incidents_resolved,
        }


class Pipeline:
    def __init__(self, *, rules: RuleSet, topology: Topology, jobs: JobBook | None = None,
                 config: EngineConfig = EngineConfig()):
        self.config = config
        self.stats = Stats()
        self.reorder = Reorderer(lateness_s=config.lateness_s)
        roles = {d: topology.role(d) for d in topology.devices()}
        self.detector = Detector(rules, roles)
        self.correlator = Correlator(topology=topology, jobs=jobs or JobBook(), opens_incident=rules.opens_incident,
                                     config=config.correlation)
        self._known_fields = {m.name: m.counters | m.gauges for m in MEASUREMENTS.values()}
        self._next_tick: float | None = None
        self._unknown_fields: dict[str, tuple[int, int]] = {}
        self.rejected: list[Reject] = []

    def feed(self, line: bytes | str) -> None:
        """One recorded line or Kafka message value."""
        metrics, rejects = parse_line(line)
        self.stats.lines += 1
        self.feed_metrics(metrics, rejects)

    def feed_metrics(self, metrics: list[Metric], rejects: list[Reject]) -> None:
        stats = self.stats
        stats.records += len(metrics) + len(rejects)
        before = self.reorder.duplicates
        released = self.reorder.push(metrics, rejects)
        stats.duplicates += self.reorder.duplicates - before
        if rejects:
            for r in rejects:
                stats.rejects[r.reason] += 1
            self.rejected.extend(rejects)
        if released:
            self._process(released)

    def _process(self, metrics: list[Metric]) -> None:
        detector, known, stats, unknown = self.detector, self._known_fields, self.stats, self._unknown_fields
        tick = self.config.tick_s
        for m in metrics:
            if self._next_tick is None:
                self._next_tick = (m.ts // tick + 1) * tick
            elif m.ts >= self._next_tick:
                self._tick(m.ts // tick * tick)
            fields = known.get(m.name)
            if fields is None:
                if m.name == JOB_MEASUREMENT:
                    self._job(m)
                else:
                    stats.ignored_measurements[m.name] += 1
                continue
            # Unknown fields are counted; a series keeps its field set, so the set
            # difference is worked out again only when the number of fields changes.
            seen = unknown.get(m.series)
            if seen is None or seen[0] != len(m.fields):
                seen = unknown[m.series] = (len(m.fields), len(m.fields.keys() - fields))
            stats.ignored_fields += seen[1]
            detector.process(m)

    def _job(self, m: Metric) -> None:
        try:
            self.correlator.update_job(job_from_placement(tags=m.tags, fields=m.fields, ts=m.ts))
        except JobError as exc:
            self.stats.rejects["bad_job"] += 1
            self.rejected.append(Reject("bad_job", str(exc), m.series))

    def _tick(self, now: float) -> None:
        self.detector.advance(now)
        for s in self.detector.drain():
            if s.end is None:
                self.stats.symptoms += 1
            self.correlator.add(s)
        self.correlator.advance(now)
        self._next_tick = now + self.config.tick_s
        self.stats.watermark = now
        self.stats.incidents_opened = self.correlator.opened
        self.stats.incidents_resolved = self.correlator.resolved
        self.stats.counter_resets = self.detector.extractor.counter_resets

    def finish(self) -> None:
        """End of input: release held records and run the timers to the last event time."""
        released = self.reorder.flush()
        if released:
            self._process(released)
        last = self.detector.clock
        if last != float("-inf"):
            self._tick(last // self.config.tick_s * self.config.tick_s + self.config.tick_s)

    def changes(self) -> list[dict]:
        return self.correlator.drain()

    def take_rejects(self) -> list[Reject]:
        out, self.rejected = self.rejected, []
        return out
