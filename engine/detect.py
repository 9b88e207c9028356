"""Stage 3: features -> symptoms, by the rules, with state per (rule, entity).

Persistence is judged in event seconds with a floor in samples of the series' own
interval `I` (`interval_of`, the reorderer's estimate; 1 s without one): a symptom starts
when its rule's condition held in max(hits, ceil(for_s / I) + 2) samples (+ 1 instead for
a gauge, `instant`, once they span for_s; one whose counter's increases add up to hits,
for a rule with `count`) within max(within_s, (that + 1) x I), and ends after max(clear_s,
clear_samples x I) without a hit; a silence rule raises a symptom on a device quiet for
max(after_s, after_intervals x its interval). Time is event time (records, `advance`):
no wall clock. docs/design.md "Interval-invariant detection" says why.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Callable

import msgspec

from engine.baseline import LevelState, LevelWire, level_seeds
from engine.level_plan import LevelPlan, level_plan, observe_record
from engine.detect_parts import (  # noqa: F401  (end_all, pending_out, restore_out: models/scorer.py)
    Feature, _evidence, _template, clear_after, counted, end_all, missed, needed, pending_out, restore_out, symptom_key)
from engine.events import SymptomWire, symptom_from_wire, symptom_to_wire
from engine.features import MEASUREMENTS, FeatureExtractor, plan
from engine.features_compile import level_names
from engine.ports import AnomalyScorer
from engine.types import Entity, Metric, Symptom
from rules.schema import Rule, RuleSet

# Rule families that say a series' link is down (oper-down, admin-down): its level rules'
# windows restart, so a link back from maintenance is judged against a past it was up in.
LINK_DOWN_FAMILIES = frozenset({"link_state", "maintenance"})
# A device's sample interval before it is known: the longest contract section 1 allows.
UNKNOWN_DEVICE_INTERVAL_S = 60.0
SAMPLED = frozenset(m for m, spec in MEASUREMENTS.items() if spec.counters)  # polled, not events


class DetectorState(msgspec.Struct, frozen=True, omit_defaults=True):
    """The detector's state (a checkpoint). Its rules, roles and models come from the
    worker's files; the feature memory is `FeatureState`, the models' `ScorerState`."""

    active: list[tuple[str, str, SymptomWire]]  # rule id, entity id, its symptom
    hits: list[tuple[str, str, list[tuple[float, dict[str, Feature]]]]]
    last_seen: dict[str, float]
    silent: dict[str, SymptomWire]
    clock: float
    unresolved_entities: int
    # Not yet drained: a key is the active or silent symptom of that key (one object,
    # still updated until drained), a symptom is one that ended.
    out: list[str | SymptomWire]
    intervals: list[tuple[str, str, float]] = []  # rule id, entity id: the interval its run is judged in
    probes: dict[str, str] = {}  # device -> a sampled series of it (its silence counts its intervals)
    levels: list[tuple[str, str, LevelWire]] = []  # rule id, series: a level rule's windows (engine.baseline)
    runs: list[tuple[str, str, str, int]] = []  # rule id, entity id, series, misses: a for_s rule's run
    down: list[str] = []  # series whose link was down at their last record (`Detector.down`)


@dataclass
class Detector:
    rules: RuleSet
    roles: dict[str, str] = field(default_factory=dict)  # device -> role, for silence rules
    extractor: FeatureExtractor = field(init=False)
    active: dict[tuple[str, str], Symptom] = field(default_factory=dict)
    hits: dict[tuple[str, str], deque] = field(default_factory=dict)
    last_seen: dict[str, float] = field(default_factory=dict)
    silent: dict[str, Symptom] = field(default_factory=dict)
    clock: float = float("-inf")  # newest event time processed
    unresolved_entities: int = 0
    unresolved_example: str | None = None  # the first hit that resolved to no entity (not checkpointed)
    _rules_of: dict[str, Rule] = field(default_factory=dict)
    _templates: dict[str, list] = field(default_factory=dict)
    # measurement -> (its compiled features and rule checks, its level rules or None)
    _compute: dict[str, tuple[Callable, LevelPlan | None]] = field(default_factory=dict)
    _position: dict[str, int] = field(default_factory=dict)  # rule id -> its place in the catalogue
    _out: list[Symptom] = field(default_factory=list)
    # series -> its sample interval in seconds, or None while unknown (DetectStage: the
    # reorderer's estimate). Without it every series counts as sampled each second.
    interval_of: Callable[[str], float | None] | None = None
    intervals: dict[tuple[str, str], float] = field(default_factory=dict)  # (rule, entity) -> I of its run
    probes: dict[str, str] = field(default_factory=dict)  # device -> one of its sampled series
    # The anomaly scorer (engine.ports.AnomalyScorer): fed the same features, ticked with the rules.
    scorer: AnomalyScorer | None = None
    levels: dict[tuple[str, str], LevelState] = field(default_factory=dict)  # (level rule, series) -> its windows
    # series -> {(for_s rule, entity): samples of that series its condition missed since
    # the run of hits began}: a run that misses too many is broken (engine.detect_parts.missed).
    runs: dict[str, dict[tuple[str, str], int]] = field(default_factory=dict)
    # With models: the modelled series whose link was down at their last record.
    # The first record back up is not a reading of the running link (its counters' deltas
    # span the transition: a port back from maintenance showed 11,000 corrected frames in
    # one sample, its run while down), so the models do not see it: its tail in their
    # minute-long mean opened link_degraded on a probe at 10 s. The rules judge it as ever.
    down: set[str] = field(default_factory=set)
    _modelled: frozenset[str] = frozenset()
    # silence rule id -> the devices of its roles (`roles` is the topology's, fixed): a tick
    # looks at those, not at every device heard (hosts are most of them)
    _watched: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._watched = {r.id: tuple(d for d, role in self.roles.items() if role in r.roles) for r in self.rules.silence}
        for i, r in enumerate(self.rules.rules):
            self._rules_of[r.id] = r
            self._templates[r.id] = _template(r.entity)
            self._position[r.id] = i
        wanted = {m: set(self.rules.features_needed(m)) for m in self.rules.by_measurement}
        if self.scorer is not None:
            self._modelled = frozenset(m for m in MEASUREMENTS if self.scorer.features_needed(m))
            for m in self._modelled:
                wanted.setdefault(m, set()).update(self.scorer.features_needed(m))
        self.extractor = FeatureExtractor({m: plan(m, frozenset(f)) for m, f in wanted.items()})
        # The models need every record's features; the rules only those of records they fire
        # on; the level rules none: the kernel adds their values to their windows and hands
        # a tuple of them over when a bucket closes or a level is off (compile_plan).
        for m in wanted:
            by = self.rules.by_measurement.get(m, ())
            levels = tuple(r for r in by if r.level is not None)
            compute = self.extractor.compile(m, tuple(r for r in by if r.level is None), always=False, levels=levels,
                                             model=self.scorer.vector_names(m) if m in self._modelled else ())
            self._compute[m] = (compute, level_plan(levels, level_names(levels), self._position) if levels else None)

    def process(self, metric: Metric) -> None:
        """One record, in event-time order. Symptoms started or ended go to `drain()`."""
        ts = metric.ts
        host = metric.tags["host"]
        if ts > self.clock:
            self.clock = ts
        self.last_seen[host] = ts
        if host not in self.probes and metric.name in SAMPLED:
            self.probes[host] = metric.series
        if host in self.silent:
            sym = self.silent.pop(host)
            sym.end = ts
            self._out.append(sym)
        entry = self._compute.get(metric.name)
        if entry is None:
            return
        compute, levels = entry
        out = self.extractor.run(metric, compute)
        runs = self.runs.get(metric.series) if self.runs else None
        if runs:
            if not missed(self.hits, runs, () if out is None else out[1]):
                del self.runs[metric.series]
        if out is None:
            return
        lv = None  # the level rules' values (compile_plan's level tuple)
        if metric.name in self._modelled:  # the models read the tuple of their features
            if levels is None:
                feats, fired, _, vec = out
            else:
                feats, fired, _, vec, lv = out
            if vec is None:  # no feature at all
                return
            add = self.scorer.adder(metric.series)
            if self.down and metric.series in self.down and not any(r.family in LINK_DOWN_FAMILIES for r in fired):
                self.down.discard(metric.series)  # back up: this record is the transition's (`down`)
            elif add is not None:  # a series seen before: its bound accumulator (models.windows)
                add(vec)
            else:
                self.scorer.observe(metric.name, metric.series, metric.tags, ts, vec)
        elif levels is None:
            feats, fired, _ = out
            if feats is None:
                return
        else:
            feats, fired, _, lv = out
        if lv is not None:
            off = self._levels(metric, levels, lv)
            if off:  # rare: a level off; the hits go in catalogue order, as the rules are listed
                position = self._position
                for _, rule, st, small in sorted([(position[r.id], r, None, feats) for r in fired] + off,
                                                 key=itemgetter(0)):
                    if st is None:
                        self._hit(rule, metric, small)
                    else:
                        self._level_hit(rule, st, metric, small)
                return
        for rule in fired:
            self._hit(rule, metric, feats)

    def _levels(self, metric: Metric, levels: LevelPlan, lv: tuple) -> list | None:
        """The record into its level rules' windows (`level_plan.observe_record`). The kernel
        hands a record over when a bucket closes, a verdict holds, or the series' windows
        are not yet attached to its counter memory (attached here: the kernel adds the
        records in between itself)."""
        off = observe_record(levels, self.levels, metric.series, metric.ts, lv, self._interval)
        memory = self.extractor.series.get(metric.series)
        if memory is not None and memory.levels is None:
            memory.levels = [self.levels.setdefault((r.id, metric.series), LevelState()) for r in levels.rules]
        return off

    def _restart_levels(self, metric: Metric, down_s: float) -> None:
        """The series' link has been down `down_s` s on this record: the windows of its
        level rules whose recent window that much down could sway start again
        (`LevelState.restart`). A port taken down for maintenance sends no codewords, so
        its corrected-FEC median while down is zero, and the healthy noise it shows once
        back up (a hundred frames/s) was a rise of hundreds of times (tune-wide: three
        `link_degraded` on ports back from admin-down). A bounce of a few seconds is a
        blip a median ignores, and restarting on it threw away the level a gray fault
        had left: a NIC whose PCIe stall share was rising bounced its link once, and its
        new baseline was the raised level (tune-retired pcie_stall-1, never found). So a
        window starts again only once the link has been down a quarter of its recent
        window (a median moves once half of it has)."""
        entry = self._compute.get(metric.name)
        plan = entry[1] if entry is not None else None
        for r in plan.rules if plan is not None else ():
            st = self.levels.get((r.id, metric.series))
            if st is not None and down_s * 4 >= r.level.recent_s:
                st.restart()

    def _level_hit(self, rule: Rule, st: LevelState, metric: Metric, feats: dict) -> None:
        """A level rule's record while its series is off its own level: a hit, and the
        symptom carries the recent and baseline medians."""
        name = rule.level.feature
        sym = self._hit(rule, metric, feats, st)
        if sym is not None:
            m = sym.metrics
            if st.recent is not None and st.recent > m.get(f"{name}_recent", float("-inf")):
                m[f"{name}_recent"] = st.recent
            if st.baseline is not None:
                m.setdefault(f"{name}_baseline", st.baseline)

    def _hit(self, rule: Rule, metric: Metric, feats: dict, level: LevelState | None = None) -> Symptom | None:
        """One record the rule's condition holds on: the active symptom it extends or
        starts (None while the run of hits is still short). A level rule's first verdict
        (`level`) counts the closed buckets just before it that are off on their own
        (`level_seeds`): the median proves the level left, the buckets how long ago."""
        eid = self._entity(rule, metric)
        if rule.family in LINK_DOWN_FAMILIES:
            if metric.name in self._modelled:
                self.down.add(metric.series)
            down = self.active.get((rule.id, eid)) if eid is not None else None
            self._restart_levels(metric, metric.ts - down.start if down is not None else 0.0)
        if eid is None:
            self.unresolved_entities += 1
            self.unresolved_example = self.unresolved_example or f"rule {rule.id} ({rule.entity}) on {metric.series}"
            return None
        ts = metric.ts
        key = (rule.id, eid)
        sym = self.active.get(key)
        iv = self._interval(metric.series)
        self.intervals[key] = iv
        if sym is None:
            dq = self.hits.get(key)
            if dq is None:
                dq = self.hits[key] = deque()
                if level is not None:
                    dq.extend((at, {}) for at in level_seeds(rule.level, level, ts))
            dq.append((ts, feats))
            need = needed(rule, iv)
            window = max(rule.within_s, (need + 1) * iv)
            while dq[0][0] < ts - window:
                dq.popleft()
            runs = self.runs.get(metric.series) if rule.for_s > 0 and rule.level is None else None
            short = counted(rule, dq) < rule.hits if rule.count else len(dq) < need
            if short or (rule.instant and ts - dq[0][0] < rule.for_s):
                if rule.for_s > 0 and rule.level is None:
                    self.runs.setdefault(metric.series, {}).setdefault(key, 0)
                return None
            del self.hits[key]
            if runs is not None:
                runs.pop(key, None)
            start = dq[0][0]
            sym = Symptom(
                key=symptom_key(rule.id, eid, start), kind=rule.symptom, family=rule.family,
                entity=Entity(rule.entity_kind, eid), device=metric.tags["host"],
                start=start, last=ts, severity=rule.severity, rule=rule.id,
            )
            for at, earlier in dq:
                _evidence(sym, rule, earlier, at)
            self.active[key] = sym
            self._out.append(sym)
            sym.last = ts
            return sym
        sym.last = ts
        _evidence(sym, rule, feats, ts)
        return sym

    def _interval(self, series: str) -> float:
        iv = self.interval_of(series) if self.interval_of is not None else None
        return iv if iv else 1.0

    def device_interval(self, device: str) -> float:
        """The sample interval of one of the device's sampled series; until it is known
        (a device seen once, or only through events), the longest interval contract section
        1 allows, 60 s: a switch polled every 30 s was declared silent 5 s after its first
        record, its interval read as 1 s (tune-range link_flap-0: a `device_down` beside the
        flap it hid)."""
        if self.interval_of is None:
            return 1.0  # no estimates at all: every series is read at 1 s (module docstring)
        probe = self.probes.get(device)
        iv = self.interval_of(probe) if probe is not None else None
        return iv if iv else UNKNOWN_DEVICE_INTERVAL_S

    def _entity(self, rule: Rule, metric: Metric) -> str | None:
        out = []
        tags, fields = metric.tags, metric.fields
        for is_field, text in self._templates[rule.id]:
            if not is_field:
                out.append(text)
                continue
            v = tags.get(text)
            if v is None:
                v = fields.get(text)
            if v is None or v == "":
                return None
            out.append(str(v))
        return "".join(out)

    def advance(self, watermark: float) -> None:
        """Event time has reached `watermark`: end quiet symptoms, raise silences."""
        now = min(watermark, self.clock)
        intervals = self.intervals
        for key, sym in list(self.active.items()):
            if sym.last < now - clear_after(self._rules_of[key[0]], intervals.get(key, 1.0)):
                sym.end = sym.last
                del self.active[key]
                intervals.pop(key, None)
                self._out.append(sym)
        for key, dq in list(self.hits.items()):
            rule, iv = self._rules_of[key[0]], intervals.get(key, 1.0)
            if dq[-1][0] < now - max(rule.within_s, (needed(rule, iv) + 1) * iv):
                del self.hits[key]
                intervals.pop(key, None)
        if self.runs:
            for series, runs in list(self.runs.items()):
                for key in [k for k in runs if k not in self.hits]:
                    del runs[key]
                if not runs:
                    del self.runs[series]
        last_seen, silent = self.last_seen, self.silent
        for rule in self.rules.silence:
            for device in self._watched[rule.id]:
                seen = last_seen.get(device)
                if seen is None or device in silent:
                    continue
                quiet = now - seen
                if quiet >= rule.after_s and quiet >= rule.after_intervals * self.device_interval(device):
                    sym = Symptom(
                        key=symptom_key(rule.id, device, seen), kind=rule.symptom, family=rule.family,
                        entity=Entity("switch", device), device=device, start=seen, last=now,
                        severity=rule.severity, metrics={"silent_s": now - seen}, rule=rule.id,
                    )
                    self.silent[device] = sym
                    self._out.append(sym)
        for sym in self.silent.values():
            sym.last = now
            sym.metrics["silent_s"] = now - sym.start
        if self.scorer is not None:
            self.scorer.advance(now)
            self._out.extend(self.scorer.drain())

    def drain(self) -> list[Symptom]:
        """Symptoms that started or ended since the last drain, in order of occurrence."""
        out, self._out = self._out, []
        return out

    def finish(self) -> None:
        """End of input: every active symptom ends at its last hit."""
        end_all(self.active, self._out)
        end_all(self.silent, self._out)
        if self.scorer is not None:
            self.scorer.finish()
            self._out.extend(self.scorer.drain())

    def snapshot(self) -> DetectorState:
        live = [*self.active.values(), *self.silent.values()]
        return DetectorState(
            active=[(r, e, symptom_to_wire(s)) for (r, e), s in self.active.items()],
            hits=[(r, e, [(ts, dict(f)) for ts, f in dq]) for (r, e), dq in self.hits.items()],
            last_seen=dict(self.last_seen), silent={d: symptom_to_wire(s) for d, s in self.silent.items()},
            clock=self.clock, unresolved_entities=self.unresolved_entities, out=pending_out(self._out, live),
            intervals=[(r, e, iv) for (r, e), iv in self.intervals.items()], probes=dict(self.probes),
            levels=[(r, series, st.to_wire()) for (r, series), st in self.levels.items()],
            runs=[(r, e, series, n) for series, runs in self.runs.items() for (r, e), n in runs.items()],
            down=sorted(self.down))

    def restore(self, state: DetectorState) -> None:
        """Continue from `state`; ValueError (before any change) if it names a rule this
        detector does not have."""
        for rule, _, _ in [*state.active, *state.hits, *state.levels]:
            if rule not in self._rules_of:
                raise ValueError(f"the checkpoint holds state of rule {rule!r}, which is not loaded")
        if any(not dq for _, _, dq in state.hits):
            raise ValueError("the checkpoint holds an empty run of hits")
        active = {(r, e): symptom_from_wire(s) for r, e, s in state.active}
        silent = {d: symptom_from_wire(s) for d, s in state.silent.items()}
        self._out = restore_out(state.out, [*active.values(), *silent.values()])
        self.active, self.silent = active, silent
        self.hits = {(r, e): deque((ts, dict(f)) for ts, f in dq) for r, e, dq in state.hits}
        self.last_seen = dict(state.last_seen)
        self.clock, self.unresolved_entities = state.clock, state.unresolved_entities
        self.intervals = {(r, e): iv for r, e, iv in state.intervals}
        self.probes = dict(state.probes)
        self.levels = {(r, series): LevelState.from_wire(w) for r, series, w in state.levels}
        self.runs, self.down = {}, set(state.down)
        for r, e, series, n in state.runs:
            self.runs.setdefault(series, {})[(r, e)] = n
        for memory in self.extractor.series.values():  # the kernel adds to the restored windows
            memory.levels = None
