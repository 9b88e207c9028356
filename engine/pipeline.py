"""The diagnosis as two stages, and the whole of it in one process.

Stage 1 (`DetectStage`): bytes -> normalize -> order -> features -> detect -> events.
Stage 2 (`CorrelateStage`): events -> correlate -> rank -> incident changes.

`replay` wires them in memory (`Pipeline`); the Kafka workers run stage 1 per partition
of hosts and stage 2 on the symptoms topic. Neither stage knows how it is fed.
"""
from __future__ import annotations

import dataclasses
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Collection, Iterable

from engine import checkpoint
from engine.cabling import Cabling, Miswiring
from engine.checkpoint import CheckpointError, CorrelateCheckpoint, DetectCheckpoint, StatsState
from engine.correlate import CorrelationConfig, Correlator
from engine.detect import Detector
from engine.events import JOB, SYMPTOM, TICK, StageEvent, event_from_wire, event_to_wire
from engine.features import JOB_MEASUREMENT, MEASUREMENTS
from engine.jobs import JobBook, JobError, job_from_placement
from engine.mapping import MappingSet, default_mappings
from engine.normalize import Parser
from engine.order import Reorderer
from engine.ports import AnomalyScorer, MaintenanceSource
from engine.topology import Topology
from engine.types import Metric, Reject
from rules.schema import RuleSet



UNJUDGED = "?"  # a series' place in the topology not judged yet (restored: _count_unplaced judges it)
# Ticks a stage makes one by one across a stretch without records (`DetectStage._ticks_to`);
# beyond them, one: every detection timer has fired by then (the longest, a switch's
# silence, is 3 intervals of at most 60 s), and a fabric back after a weekend must not
# send 200,000 ticks.
GAP_TICKS = 900

# Reasons a record (or a part of one) was read and not used, each counted with an example
# (Stats.unused_figures), the replay summary's "unused" and the worker's fabric_rca_unused_total.
UNUSED = {
    "unknown_measurement": "a measurement no rule or mapping knows (ignored)",
    "unknown_field": "a field its measurement does not have (ignored)",
    "non_numeric_field": "a counter sent as a string or boolean (no rate)",
    "unknown_device": "a record of a device the topology does not name (detected on, placed nowhere)",
    "unknown_interface": "a record of an interface the topology does not cable",
    "unresolved_hit": "a rule hit whose entity template found no value in the record (no symptom)",
}


@dataclass(frozen=True)
class EngineConfig:
    lateness_s: float = 5.0  # release delay behind the fleet's time, and the least lateness of any series
    lateness_intervals: float = 3.0  # a series may be this many of its sample intervals late (contract 1)
    max_lateness_s: float = 180.0  # ... but never more than this
    skew_s: float = 30.0  # a record leading the fleet by max(3 intervals, 10 s) + this is quarantined
    tick_s: float = 1.0  # event-time step of detection and correlation timers
    refresh_s: float = 5.0  # an active symptom is sent again each time its evidence is this much longer
    correlation: CorrelationConfig = CorrelationConfig()
    learn_rate: float = 0.0  # anomaly models: online learning step (0: baselines stay as trained)


def new_reorderer(config: EngineConfig, stats=None) -> Reorderer:
    """The order stage as `config` sets it: detection, training (models.train) and the
    baselines (evaluation.baselines) all read telemetry in this one order."""
    return Reorderer(lateness_s=config.lateness_s, lateness_intervals=config.lateness_intervals,
                     max_lateness_s=config.max_lateness_s, skew_s=config.skew_s, stats=stats)


@dataclass
class Stats:
    records: int = 0  # metrics read (a batch counts each metric)
    lines: int = 0
    rejects: Counter = field(default_factory=Counter)
    ignored_measurements: Counter = field(default_factory=Counter)
    mapped: Counter = field(default_factory=Counter)  # records converted, per mapping (engine/mapping.py)
    ignored_fields: int = 0
    duplicates: int = 0
    merged: int = 0  # halves of one sample (same series and time, other fields) merged
    conflicting_fields: int = 0  # fields both halves held with different values (the later kept)
    late: int = 0  # records behind the release watermark taken within their series' bound
    late_halves: int = 0
    clock_suspects: dict = field(default_factory=dict)  # host -> [future_timestamp rejects, max s ahead]
    counter_resets: int = 0
    non_numeric_fields: int = 0  # counter values that were strings or booleans (no rate; counted, not used)
    superseded: int = 0  # late records older than their series' newest sample: taken, no rate (a newer one covers it)
    symptoms: int = 0
    incidents_opened: int = 0
    incidents_resolved: int = 0
    incidents_reopened: int = 0  # resolved incidents whose fault came back (engine/reopen.py)
    watermark: float | None = None
    # What was read and not used (UNUSED; `unused_figures` gives every reason): the counts
    # of the reasons no other count here holds (unknown devices and interfaces, unresolved
    # hits) and the first example of each reason. Since the process started (not
    # checkpointed); the records are still read as far as they can be.
    unused: Counter = field(default_factory=Counter)
    unused_examples: dict = field(default_factory=dict)

    def note_unused(self, reason: str, example: str, n: int = 1) -> None:
        if n:
            self.unused[reason] += n
        self.unused_examples.setdefault(reason, example)

    def unused_figures(self) -> dict[str, list]:
        """Every reason of UNUSED that counted: [count, first example]."""
        counts = {"unknown_measurement": sum(self.ignored_measurements.values()), "unknown_field": self.ignored_fields,
                  "non_numeric_field": self.non_numeric_fields, **self.unused}
        first = next(iter(self.ignored_measurements), "")  # (a Counter keeps the order names came in)
        return {reason: [n, self.unused_examples.get(reason, first if reason == "unknown_measurement" else "")]
                for reason, n in sorted(counts.items()) if n}

    def summary(self) -> dict:
        return {
            "records": self.records,
            "lines": self.lines,
            "rejects": dict(sorted(self.rejects.items())),
            "rejected": sum(self.rejects.values()),
            "duplicates": self.duplicates,
            "merged_halves": self.merged,
            "conflicting_fields": self.conflicting_fields,
            "late_records": self.late,
            "late_superseded": self.superseded,
            "clock_suspect_devices": {h: {"future_timestamps": n, "ahead_s": ahead}
                                      for h, (n, ahead) in sorted(self.clock_suspects.items())},
            "ignored_measurements": dict(sorted(self.ignored_measurements.items())),
            "mapped": dict(sorted(self.mapped.items())),
            "ignored_fields": self.ignored_fields,
            "counter_resets": self.counter_resets,
            "non_numeric_fields": self.non_numeric_fields,
            "symptoms": self.symptoms,
            "incidents_opened": self.incidents_opened,
            "incidents_resolved": self.incidents_resolved,
            "incidents_reopened": self.incidents_reopened,
            "unused": {reason: {"count": n, "example": example}
                       for reason, (n, example) in self.unused_figures().items()},
        }

    def snapshot(self) -> StatsState:
        return StatsState(self.records, self.lines, dict(self.rejects), dict(self.ignored_measurements),
                          self.ignored_fields, self.duplicates, self.counter_resets, self.symptoms,
                          self.incidents_opened, self.incidents_resolved, self.watermark, self.non_numeric_fields,
                          self.merged, self.conflicting_fields, self.late, self.late_halves,
                          {h: (int(c), float(a)) for h, (c, a) in self.clock_suspects.items()})

    def restore(self, state: StatsState) -> None:
        """In place: the reorderer and the pipeline count into this object."""
        for f in dataclasses.fields(self):
            if f.name in ("mapped", "superseded", "incidents_reopened", "unused", "unused_examples"):  # (not in
                setattr(self, f.name, {"mapped": Counter(), "unused": Counter(), "unused_examples": {}}  # the checkpoint
                        .get(f.name, 0))  # format: counted again from the restore)
                continue
            value = getattr(state, f.name)
            if f.name == "clock_suspects":
                value = {h: [c, a] for h, (c, a) in value.items()}
            elif isinstance(value, dict):
                value = Counter(value)
            setattr(self, f.name, value)


def job_event(m: Metric, *, tick: float, source: str) -> StageEvent | Reject:
    """A job_placement record as the event stage 2 applies, or the reason it cannot be."""
    try:
        job = job_from_placement(tags=m.tags, fields=m.fields, ts=m.ts)
    except JobError as exc:
        return Reject("bad_job", str(exc), m.series)
    return StageEvent(JOB, tick, source, job=job)


class DetectStage:
    """Stage 1. Feed lines; take events and rejects.

    A replay on several cores (engine/shards.py) splits it: one stage reads (`release_to`:
    parse, map, order, jobs), and hands what it releases to the stages that detect, one
    per shard of the devices (`take_released`)."""

    def __init__(self, *, rules: RuleSet, roles: dict[str, str], config: EngineConfig = EngineConfig(),
                 source: str = "", stats: Stats | None = None, scorer: AnomalyScorer | None = None,
                 mappings: MappingSet | None = None, interfaces: frozenset[str] | None = None):
        # `interfaces`: the topology's cabled interfaces ("device:interface"), to count
        # records of others as unused (None: not checked); `roles` names its devices.
        self.config = config
        self._roles = roles
        self._interfaces = interfaces
        self._release: Callable[[list, list[bool]], None] | None = None  # a reading stage's (`release_to`)
        self._intervals: dict[str, float] | None = None  # a detecting stage's (`take_released`)
        self.mappings = default_mappings() if mappings is None else mappings
        self.source = source
        self.stats = stats or Stats()
        # The reorderer counts duplicates straight into the stats (no per-record bookkeeping here).
        self.reorder = new_reorderer(config, stats=self.stats)
        self.detector = Detector(rules, roles, scorer=scorer, interval_of=self.reorder.interval)
        self._parse = Parser().parse_line  # the stage owns its parser's memo of checked tags
        self._known_fields = {m.name: m.counters | m.gauges for m in MEASUREMENTS.values()}
        self._unknown_fields: dict[str, tuple[int, int, str]] = {}  # series -> _series_check
        self._next_tick: float | None = None
        self._told: dict[str, float] = {}  # active symptom key -> the last sign it was sent with
        self._events: list[StageEvent] = []
        self.rejected: list[Reject] = []

    def feed(self, line: bytes | str) -> bool:
        """One recorded line or Kafka message value. True when it left events or rejects to
        take (`events()`, `take_rejects()`). Shaped for the common line (one record,
        nothing rejected, nothing released for detection): no calls besides the parse
        and the push, no properties, and a plain False."""
        metrics, rejects = self._parse(line)
        known = self._known_fields
        for m in metrics:  # (a set lookup per record: all a contract record pays for mappings)
            if m.name not in known:
                metrics = self._map(metrics)
                break
        stats = self.stats
        stats.lines += 1
        stats.records += len(metrics) + len(rejects)
        released = self.reorder.push(metrics, rejects)  # (counts duplicates into stats)
        if not (rejects or released):
            return False
        if rejects:
            for r in rejects:
                stats.rejects[r.reason] += 1
            self.rejected.extend(rejects)
        if released:
            self._process(released)  # may end a tick, or add a job event or a bad_job reject
        return bool(self._events or self.rejected)

    def release_to(self, release: Callable[[list, list[bool]], None]) -> None:
        """Make this a reading stage: what the order releases goes to `release` (in time
        order, jobs' placements and the time of each record that reaches a new tick among
        them), not to detection; this stage keeps the tick a job takes effect at."""
        self._release = release

    def take_released(self, items: list, intervals: dict[str, float]) -> None:
        """Detect on what a reading stage released (engine/shards.py): its records of this
        stage's devices, and as a float the time of another's that reached a new tick
        (the ticks run as if this stage had read it), with the sample intervals the reading
        stage estimated anew since its last batch (`Reorderer.estimated`)."""
        if self._intervals is None:
            self._intervals = {}
            self.detector.interval_of = self._intervals.get
        self._intervals.update(intervals)
        if items:
            self._process(items)

    def _process(self, metrics: list) -> None:
        if self._release is not None:
            return self._hand_over(metrics)
        known, stats, unknown = self._known_fields, self.stats, self._unknown_fields
        detector = self.detector
        process = detector.process
        tick = self.config.tick_s
        next_tick = self._next_tick
        ignored = 0
        for m in metrics:
            ts = m if m.__class__ is float else m.ts  # (a float: another shard's record, its time alone)
            if next_tick is None:
                next_tick = self._next_tick = (ts // tick + 1) * tick
            elif ts > next_tick:
                self._ticks_to(ts)
                next_tick = self._next_tick
            if ts is m:  # (the time alone: the clock is the reading stage's, `finish`)
                continue
            fields = known.get(m.name)
            if fields is None:
                if m.name == JOB_MEASUREMENT:
                    self._job(m)
                else:
                    stats.ignored_measurements[m.name] += 1
                continue
            # Unknown fields are counted; a series keeps its field set, so the set
            # difference is worked out again only when the number of fields changes
            # (with whether its device and interface are in the topology: `_series_check`).
            n = len(m.fields)
            seen = unknown.get(m.series)
            if seen is None or seen[0] != n:
                seen = unknown[m.series] = self._series_check(m, n, fields)
            if seen[2]:
                self._count_unplaced(m, seen[2])
            ignored += seen[1]
            process(m)
        stats.ignored_fields += ignored

    def _hand_over(self, metrics: list[Metric]) -> None:
        """A reading stage's `_process`: the ticks kept as `_process` and `_ticks_to` keep
        them, without ticking; a job's placement applied here; each other record handed
        over with whether it reached a new tick (every detecting stage must tick at it)."""
        step, known, detector = self.config.tick_s, self._known_fields, self.detector
        next_tick = self._next_tick
        out, reach = [], []
        for m in metrics:
            ts = m.ts
            if next_tick is None:
                new, next_tick = True, (ts // step + 1) * step
            elif ts > next_tick:
                new, next_tick = True, (math.ceil(ts / step) - 1) * step + step  # (where _ticks_to leaves it)
            else:
                new = False
            self._next_tick = next_tick
            if m.name in known:
                if ts > detector.clock:  # (the newest time detected on: the detecting stages' last tick)
                    detector.clock = ts
            elif m.name == JOB_MEASUREMENT:
                self._job(m)
                if new:
                    out.append(ts)
                    reach.append(True)
                continue
            out.append(m)
            reach.append(new)
        self._release(out, reach)

    def _series_check(self, m: Metric, n: int, fields: frozenset) -> tuple[int, int, str]:
        """(fields, unknown fields, the unused reason of its place or "") of a series."""
        extra = m.fields.keys() - fields
        if extra:
            self.stats.unused_examples.setdefault("unknown_field", f"{m.name}.{min(extra)}")
        return n, len(extra), self._place(m)

    def _place(self, m: Metric) -> str:
        """The unused reason of a record's place in the topology, or "" (in it)."""
        host = m.tags["host"]
        if self._roles and host not in self._roles:
            return "unknown_device"
        if self._interfaces is not None and "interface" in m.tags \
                and f"{host}:{m.tags['interface']}" not in self._interfaces:
            return "unknown_interface"
        return ""

    def _count_unplaced(self, m: Metric, reason: str) -> None:
        if reason is UNJUDGED:  # a series restored from a checkpoint: its place is judged now
            n, extra, _ = self._unknown_fields[m.series]
            _, _, reason = self._unknown_fields[m.series] = (n, extra, self._place(m))
            if not reason:
                return
        tags = m.tags
        self.stats.note_unused(reason, tags["host"] if reason == "unknown_device" else f"{tags['host']}:{tags['interface']}")

    def _map(self, metrics: list[Metric]) -> list[Metric]:
        """Records of measurements the contract does not know, converted by the mapping
        that takes them (engine/mapping.py) before they are ordered: the halves of one
        contract sample (SNMP's two tables, Prometheus' one metric per measurement) then
        merge on the contract's series. Others pass as they are (counted as ignored later)."""
        known, mapped, take = self._known_fields, self.stats.mapped, self.mappings.map
        out = []
        for m in metrics:
            if m.name not in known and m.name != JOB_MEASUREMENT:
                result = take(m)
                if result is not None:
                    m = result[0]
                    mapped[result[1]] += 1
            out.append(m)
        return out

    def _job(self, m: Metric) -> None:
        tick = self._next_tick if self._next_tick is not None else m.ts
        result = job_event(m, tick=tick, source=self.source)
        if isinstance(result, Reject):
            self.stats.rejects[result.reason] += 1
            self.rejected.append(result)
        else:
            self._events.append(result)

    def _ticks_to(self, ts: float) -> None:
        """Every tick from the next one up to a record at `ts` (each whole second before it):
        a tick's symptoms are those of the records up to it (a record at the tick's very
        second included), and its timers (a symptom's end, a switch's silence) run to it,
        whichever record comes next. A stage of one Kafka partition hears only its own
        devices, and one polled every 30 s may hear nothing for most of an interval;
        ticking only at its next record, with the timers run to its last record, tagged
        its symptoms and silences with other ticks than `replay`'s, which hears every
        device, and stage 2 founded a candidate on another symptom
        (tests/test_partitions_coarse.py). A record after a tick proves the input has
        reached it (records come in event-time order, the late ones aside)."""
        step, detector = self.config.tick_s, self.detector
        first, end = round(self._next_tick / step), math.ceil(ts / step)
        ks = range(first, end) if end - first <= GAP_TICKS else [*range(first, first + GAP_TICKS), end - 1]
        for k in ks:
            now = k * step
            if now > detector.clock:
                detector.clock = now
            self._tick(now)

    def _tick(self, now: float) -> None:
        self.detector.advance(now)
        told = self._told
        for s in self.detector.drain():
            if s.end is None:
                self.stats.symptoms += 1
                told[s.key] = s.last
            else:
                told.pop(s.key, None)
            # A snapshot: the detector keeps updating its own symptom after this tick.
            snap = s.snapshot()
            self._events.append(StageEvent(SYMPTOM, now, self.source, symptom=snap))
        self._refresh(now)
        self._events.append(StageEvent(TICK, now, self.source))
        self._next_tick = now + self.config.tick_s
        self.stats.watermark = now
        self.stats.counter_resets = self.detector.extractor.counter_resets
        self.stats.non_numeric_fields = self.detector.extractor.non_numeric
        self._sync_unused()
        self.stats.superseded = self.detector.extractor.superseded

    def _sync_unused(self) -> None:
        """What the extractor and the detector know of the unused into `stats`: the first
        non-numeric counter, the hits that resolved to no entity."""
        st, ex, det = self.stats, self.detector.extractor, self.detector
        if ex.non_numeric_example is not None:
            st.unused_examples.setdefault("non_numeric_field", ex.non_numeric_example)
        if det.unresolved_entities:
            st.unused["unresolved_hit"] = det.unresolved_entities
            st.unused_examples.setdefault("unresolved_hit", det.unresolved_example or "")

    def _refresh(self, now: float) -> None:
        """Symptoms are sent when they start and end; the correlator also needs to know
        that an active one is still being seen (how long its evidence lasts, in event
        time: contract section 8's persistence). An active symptom is sent again, as an
        update, when its last sign has crossed another `refresh_s` of its age since the
        last sign it was sent with (kept per symptom, and in the checkpoint)."""
        step, told = self.config.refresh_s, self._told
        scorer = self.detector.scorer
        live = self.detector.active.values() if scorer is None else [*self.detector.active.values(), *scorer.live()]
        for s in live:
            sent = told.get(s.key)
            if sent is not None and (s.last - s.start) // step > (sent - s.start) // step:
                told[s.key] = s.last
                snap = s.snapshot()
                self._events.append(StageEvent(SYMPTOM, now, self.source, symptom=snap))

    def finish(self, clock: float = float("-inf")) -> None:
        """End of input: release held records and run the timers past the last event time
        (a detecting stage's: the newest the reading stage detected on, `clock`, if later)."""
        rejects: list[Reject] = []
        released = self.reorder.flush(rejects)
        for r in rejects:
            self.stats.rejects[r.reason] += 1
        self.rejected.extend(rejects)
        if released:
            self._process(released)
        if self._release is not None:
            return  # (the detecting stages run the timers)
        last = max(self.detector.clock, clock)
        if last != float("-inf"):
            self._tick(last // self.config.tick_s * self.config.tick_s + self.config.tick_s)

    @property
    def has_events(self) -> bool:
        """Whether `events()` has something to hand over (a tick passed, a job arrived)."""
        return bool(self._events)

    def events(self) -> list[StageEvent]:
        out = self._events
        if out:  # (most records end no tick: nothing to hand over, nothing to allocate)
            self._events = []
        return out

    def take_rejects(self) -> list[Reject]:
        out, self.rejected = self.rejected, []
        return out

    # --- checkpoints -------------------------------------------------------------------
    def state(self) -> DetectCheckpoint:
        """All state, so a restarted worker continues exactly where this one was. It shares
        the held records' tags and fields with the stage: encode it before feeding more."""
        d = self.detector
        return DetectCheckpoint(
            stats=self.stats.snapshot(), reorder=self.reorder.snapshot(), unknown_fields={k: v[:2] for k, v in self._unknown_fields.items()},
            next_tick=self._next_tick, events=[event_to_wire(e) for e in self._events], rejected=list(self.rejected),
            detector=d.snapshot(), features=d.extractor.snapshot(),
            scorer=d.scorer.checkpoint() if d.scorer is not None else None, told=dict(self._told))

    def load(self, state: DetectCheckpoint) -> None:
        """Continue from `state`. ValueError if it does not fit this stage's rules and
        models: the stage is then as it was."""
        before = self.state()
        try:
            self._load(state)
        except (ValueError, KeyError, TypeError) as exc:
            self._load(before)
            raise CheckpointError(f"detect checkpoint does not fit this worker: {exc}") from None

    def _load(self, state: DetectCheckpoint) -> None:
        d = self.detector
        if (state.scorer is None) != (d.scorer is None):
            raise ValueError("written by a worker with models" if state.scorer is not None
                             else "written by a worker without models")
        d.restore(state.detector)
        d.extractor.restore(state.features)
        if d.scorer is not None:
            d.scorer.resume(state.scorer)
        self.stats.restore(state.stats)
        self.reorder.restore(state.reorder)
        # (n, unknown fields) per series; its place in the topology is judged again at its next record
        self._unknown_fields = {k: (n, extra, UNJUDGED) for k, (n, extra) in state.unknown_fields.items()}
        self._next_tick = state.next_tick
        self._told = dict(state.told)
        self._events = [event_from_wire(e) for e in state.events]
        self.rejected = list(state.rejected)

    def snapshot(self) -> bytes:
        """The state as a checkpoint (engine.checkpoint). Rules, roles, config and the
        trained models are not in it: they come from the worker's own files."""
        return checkpoint.encode(self.state())

    def restore(self, data: bytes) -> None:
        """Continue from a checkpoint; CheckpointError (the stage unchanged) if refused."""
        self.load(checkpoint.decode(data, "detect"))


class CorrelateStage:
    """Stage 2. Events from one or more stage-1 sources are held until every source has
    ticked past them, then applied in canonical order, tick by tick.

    `sources` names the stage-1 sources to wait for (the Kafka workers: every telemetry
    partition) before anything is applied: without it, a source that starts late (its
    partition's worker still restoring, its first records not there yet) would find the
    others' ticks applied and its own events applied out of order, founding different
    incidents than `replay`. The caller may name sources `idle` in `advance` (a partition
    that has no data); they are not waited for until they tick again. Sources that tick
    without being named are waited for from their first tick on (`replay`: one source)."""

    def __init__(self, *, topology: Topology, rules: RuleSet, jobs: JobBook | None = None,
                 config: EngineConfig = EngineConfig(), sources: Iterable[str] = (),
                 opens_incident: Callable[[str], bool] | None = None, maintenance: MaintenanceSource | None = None,
                 miswired: tuple[Miswiring, ...] = ()):
        # `miswired`: the LLDP survey's miswired links (engine/cabling.py), incidents of their own.
        # `opens_incident` answers for symptoms no rule of `rules` raised (the anomaly
        # scorer's: AnomalyScorer.opens_incident); rules answer for their own.
        def opens(rule: str) -> bool:
            return rules.opens_incident(rule) if opens_incident is None or rule in rules.opening else opens_incident(rule)

        corr = config.correlation
        if opens_incident is not None:  # the scorer's evidence makes no cause credible (engine/credible.py)
            def evidence_only(rule: str) -> bool:
                return rule not in rules.opening and not opens_incident(rule)
            corr = dataclasses.replace(corr, persistence=dataclasses.replace(corr.persistence, evidence_only=evidence_only))
        if rules.loud:  # the rules' loud evidence is credible at once (engine/credible.py)
            loud = corr.persistence.loud_rules | rules.loud
            corr = dataclasses.replace(corr, persistence=dataclasses.replace(corr.persistence, loud_rules=loud))
        if rules.events:  # an event rule's evidence lasts its events' instants (engine/credible.py)
            events = corr.persistence.event_rules | rules.events
            corr = dataclasses.replace(corr, persistence=dataclasses.replace(corr.persistence, event_rules=events))
        self.correlator = Correlator(topology=topology, jobs=jobs or JobBook(), opens_incident=opens,
                                     config=corr, maintenance=maintenance, cabling=Cabling(miswired))
        self.sources = frozenset(sources)
        self._pending: list[StageEvent] = []
        self._ticks: dict[str, float] = {}  # source -> its latest tick
        self._times: set[float] = set()  # ticks seen and not yet applied
        self.applied_to: float = float("-inf")
        self.duplicates = 0
        self.late = 0  # events that came after their tick was applied (an idle source, a late job)

    def add(self, event: StageEvent) -> None:
        """One event. A source sends a tick's events before the tick itself, so an event
        at or before its source's last tick is a replay after a restart: a duplicate."""
        if event.tick <= self._ticks.get(event.source, float("-inf")):
            self.duplicates += 1
            return
        if event.kind == TICK:
            self._ticks[event.source] = event.tick
            if event.tick > self.applied_to:
                self._times.add(event.tick)
        elif event.tick <= self.applied_to:
            self.late += 1
            self._apply([event])  # a source that was idle, a late job: apply now rather than drop
        else:
            self._pending.append(event)

    def waiting_for(self, idle: Collection[str] = ()) -> list[str]:
        """Named sources that have not ticked yet (and are not idle): nothing is applied
        until they do."""
        return sorted(s for s in self.sources if s not in self._ticks and s not in idle)

    def advance(self, idle: Collection[str] = ()) -> None:
        """Apply everything up to the slowest source's tick (idle sources aside)."""
        ticks = self._ticks
        if not ticks or (self.sources and self.waiting_for(idle)):
            return
        upto = min((t for s, t in ticks.items() if s not in idle), default=None) if idle else min(ticks.values())
        if upto is None:
            return
        for t in sorted(x for x in self._times if x <= upto):
            now = [e for e in self._pending if e.tick <= t]
            if now:
                self._pending = [e for e in self._pending if e.tick > t]
                self._apply(sorted(now, key=StageEvent.order))
            self.correlator.advance(t)
            self.applied_to = t
        self._times = {x for x in self._times if x > upto}

    def _apply(self, events: list[StageEvent]) -> None:
        for e in events:
            if e.symptom is not None:
                self.correlator.add(e.symptom)
            elif e.job is not None:
                self.correlator.update_job(e.job)

    def changes(self) -> list[dict]:
        return self.correlator.drain()

    # --- checkpoints -------------------------------------------------------------------
    def state(self) -> CorrelateCheckpoint:
        return CorrelateCheckpoint(
            pending=[event_to_wire(e) for e in self._pending], ticks=dict(self._ticks), times=sorted(self._times),
            applied_to=self.applied_to, duplicates=self.duplicates, late=self.late,
            correlator=self.correlator.snapshot())

    def load(self, state: CorrelateCheckpoint) -> None:
        before = self.state()
        try:
            self._load(state)
        except (ValueError, KeyError, TypeError) as exc:
            self._load(before)
            raise CheckpointError(f"correlate checkpoint does not fit this worker: {exc}") from None

    def _load(self, state: CorrelateCheckpoint) -> None:
        self.correlator.restore(state.correlator)
        self._pending = [event_from_wire(e) for e in state.pending]
        self._ticks, self._times = dict(state.ticks), set(state.times)
        self.applied_to, self.duplicates, self.late = state.applied_to, state.duplicates, state.late

    def snapshot(self) -> bytes:
        return checkpoint.encode(self.state())

    def restore(self, data: bytes) -> None:
        """Continue from a checkpoint; CheckpointError (the stage unchanged) if refused."""
        self.load(checkpoint.decode(data, "correlate"))


class Pipeline:
    """Both stages in one process: what `replay` and `evaluate` run."""

    def __init__(self, *, rules: RuleSet, topology: Topology, jobs: JobBook | None = None,
                 config: EngineConfig = EngineConfig(), scorer: AnomalyScorer | None = None,
                 mappings: MappingSet | None = None, maintenance: MaintenanceSource | None = None,
                 miswired: tuple[Miswiring, ...] = ()):
        roles = {d: topology.role(d) for d in topology.devices()}
        self.detect = DetectStage(rules=rules, roles=roles, config=config, scorer=scorer, mappings=mappings,
                                  interfaces=topology.cabled_interfaces())
        self.correlate = CorrelateStage(topology=topology, rules=rules, jobs=jobs, config=config,
                                        opens_incident=scorer.opens_incident if scorer is not None else None,
                                        maintenance=maintenance, miswired=miswired)
        self.stats = self.detect.stats

    @property
    def rejected(self) -> list[Reject]:
        return self.detect.rejected

    def feed(self, line: bytes | str) -> bool:
        """One line; True when rejects wait for `take_rejects()`. The common line leaves
        nothing waiting: one test of `detect.feed`'s answer and done."""
        detect = self.detect
        if detect.feed(line):
            if detect.has_events:  # a tick passed (about once per event-time second), or a job
                self._pump()
            return bool(detect.rejected)
        return False

    def _pump(self) -> None:
        events = self.detect.events()
        if events:
            for e in events:
                self.correlate.add(e)
            self.correlate.advance()
            self.stats.incidents_opened = self.correlate.correlator.opened
            self.stats.incidents_resolved = self.correlate.correlator.resolved
            self.stats.incidents_reopened = self.correlate.correlator.reopened

    def finish(self) -> None:
        self.detect.finish()
        self._pump()

    def changes(self) -> list[dict]:
        return self.correlate.changes()

    def take_rejects(self) -> list[Reject]:
        return self.detect.take_rejects()
