"""Scoring at run time: feature windows -> model verdicts -> symptoms.

The detector hands every record's features to `observe` and calls `advance(now)` at each
event-time tick; when a window closes, each class's rows are scored in one batch.

Persistence is in event time, not in windows or samples, so it means the same at 1 s
and at 10 s sampling (where most 5 s windows hold no sample of an entity): an entity's
*episode* starts with `hits` windows of its data anomalous in a row, and goes on while no
stretch of `clear_s` of event time that its own data showed normal comes between its
anomalous windows. Windows without its data neither extend nor break
an episode; an entity silent for `stale_s` ends it.

- After `hits` anomalous windows an episode raises an **evidence** symptom (rule
  `model:<class>:<kind>`, the kind of its most deviating feature, so ranking applies the
  same physics as to a rule symptom). Evidence never opens an incident: it joins the
  incident of a rule symptom it explains and adds to its ranking, or waits as a
  candidate that a rule symptom may open.
- An episode that is **sustained and strong** -- a run of at least `strong_hits` of its
  windows of data in a row are strong (z_min reached on the robust score alone, not in the forest's band, and the
  window's own means up, not only the smoothed ones) and the run spans `open_s` of
  event time -- replaces its evidence with a **sustained** symptom (rule
  `model:<class>:<kind>:sustained`, from the strong run's start), which opens an incident as the rule of
  the same kind does. A gray fault is such an episode; a model-only blip is not.

Each symptom carries its largest robust score, the forest's score when consulted, and
the features that drove it as evidence. With `learn_rate` > 0 the entities' baselines
keep learning from windows judged clearly normal (every z below `learn_below`), in
constant memory per entity.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import msgspec
import numpy as np

from engine.detect import end_all, pending_out, restore_out
from engine.events import SymptomWire, symptom_from_wire, symptom_to_wire
from engine.samples import add as sample
from engine.types import Entity, Symptom
from models.catalogue import BY_MEASUREMENT, CLASSES
from models.windows import CutterState, Smoother, SmootherState, WindowCutter, symptom_entity

if TYPE_CHECKING:  # the store imports scikit-learn; scoring itself needs only numpy
    from models.store import ModelSet

RULE_PREFIX = "model:"
SUSTAINED = ":sustained"  # rule suffix of a symptom that may open an incident
INF = float("inf")
SEVERITY = 0.5
REPORTED = 3  # driving features a symptom carries as evidence
STRONG_WINDOW_Z = 1.0  # a strong window's own (unsmoothed) means reach this robust score


def rule_id(cls: str, symptom: str, *, sustained: bool = False) -> str:
    return f"{RULE_PREFIX}{cls}:{symptom}" + (SUSTAINED if sustained else "")


def opens_incident(rule: str) -> bool:
    """Whether a model symptom may open an incident: only a sustained one, and then as
    the rule of the same symptom does. Evidence symptoms never do. A symptom of no model
    (the correlator's derived ones, e.g. a job surge) may, as the rules' default says."""
    if not rule.startswith(RULE_PREFIX):
        return True
    if not rule.endswith(SUSTAINED):
        return False
    _, cls, kind = rule[: -len(SUSTAINED)].split(":", 2)
    return all(f.opens_incident for f in CLASSES[cls].features if f.symptom == kind)


@dataclass
class _Streak:
    """An entity's episode: its anomalous windows, none `clear_s` of normal data apart."""

    first: float  # start of its first anomalous window
    last: float  # end of its latest anomalous window
    count: int
    strong: int = 0  # of them, strong windows (`ModelScorer._strong`)
    strong_last: float = 0.0  # end of its latest strong window
    strong_first: float = 0.0  # start of its current run of strong windows
    dipped: bool = False  # the run's latest window of data was not strong (a second in a row ends it)

    def dip(self) -> None:
        """A window of the entity's data that is not strong: one between strong windows
        leaves their run standing (a slow drift's own 5 s means scatter about its rising
        level, and one in a few dips below STRONG_WINDOW_Z: pcie_stall-1 of a 1 s probe of
        the tune-range seeds waited 30 s for an unbroken run); a second in a row ends it (a
        burst's tail: its smoothed mean stays up while its own windows are back at zero)."""
        if self.dipped or self.strong == 0:
            self.strong, self.dipped = 0, False
        else:
            self.dipped = True


class ScorerState(msgspec.Struct, frozen=True):
    """The models' run-time state (a checkpoint); the trained models come from the
    worker's --models."""

    cutter: CutterState
    smoother: SmootherState
    streaks: list[tuple[str, str, _Streak]]  # class, entity key, its run of anomalous windows
    active: list[tuple[str, str, SymptomWire]]
    online: dict[str, dict[str, tuple[list[float], list[float]]]]  # class -> key -> (median, scale)
    windows: int
    anomalies: int
    out: list[str | SymptomWire]  # not yet drained (a key: the active symptom of that key)


@dataclass
class ModelScorer:
    models: "ModelSet"
    hits: int = 2  # anomalous windows of data an episode needs for its evidence symptom ...
    evidence_s: float = 10.0  # ... spanning this much event time
    clear_windows: int = 3  # clear_s = this many windows of event time
    open_s: float = 20.0  # event time an episode spans before it may open an incident ...
    strong_hits: int = 3  # ... with this many windows at z_min on the robust score alone
    stale_s: float = 60.0  # an entity silent this long ends its episode
    learn_rate: float = 0.0
    learn_below: float = 2.0
    cutter: WindowCutter = field(init=False)
    smoother: Smoother = field(default_factory=Smoother)
    streaks: dict[tuple[str, str], _Streak] = field(default_factory=dict)
    active: dict[tuple[str, str], Symptom] = field(default_factory=dict)
    online: dict[str, dict] = field(default_factory=dict)  # class -> key -> (median, scale)
    windows: int = 0
    anomalies: int = 0
    _out: list[Symptom] = field(default_factory=list)
    _quiet_until: float = -INF  # event time before which `advance` has nothing to expire

    def __post_init__(self) -> None:
        self.cutter = WindowCutter(self.models.window_s)

    # --- the detector's hooks (engine.ports.AnomalyScorer) --------------------------------
    def features_needed(self, measurement: str) -> frozenset[str]:
        return self.models.features_needed(measurement)

    def adder(self, series: str):
        return self.cutter.adders.get(series)

    @staticmethod
    def opens_incident(rule: str) -> bool:
        return opens_incident(rule)

    def checkpoint(self) -> bytes:
        return msgspec.msgpack.encode(self.snapshot())

    def resume(self, data: bytes) -> None:
        try:
            state = msgspec.msgpack.decode(data, type=ScorerState)
        except msgspec.DecodeError as exc:
            raise ValueError(f"not the models' run-time state: {exc}") from None
        self.restore(state)

    @staticmethod
    def vector_names(measurement: str) -> tuple[str, ...]:
        """The features `observe` takes for a record of `measurement`, in this order."""
        return BY_MEASUREMENT[measurement].feature_names

    def observe(self, measurement: str, series: str, tags: dict, ts: float, vec: tuple) -> None:
        self.cutter.observe(measurement, series, tags, ts, vec)

    @property
    def clear_s(self) -> float:
        return self.clear_windows * self.models.window_s

    def advance(self, now: float) -> None:
        if self.cutter.due(now):
            start, rows = self.cutter.close(now)
            self._score(start, start + self.models.window_s, rows)
        elif now <= self._quiet_until:
            return  # no window closed and nothing can have expired: skip the scans
        # Entities that stopped reporting: their episodes end (their normal windows end
        # the others, in `_score`).
        for key, st in list(self.streaks.items()):
            if st.last < now - self.stale_s:
                self._end(key)
        # Only scoring (above) moves `last` or adds entries, so until the earliest of
        # these times passes, a tick without a window to close has nothing to do.
        self._quiet_until = min((st.last + self.stale_s for st in self.streaks.values()), default=INF)

    def _end(self, key: tuple[str, str]) -> None:
        """End an entity's episode, and its symptom if it has one."""
        del self.streaks[key]
        sym = self.active.pop(key, None)
        if sym is not None:
            sym.end = sym.last
            self._out.append(sym)

    def snapshot(self) -> ScorerState:
        return ScorerState(
            cutter=self.cutter.snapshot(), smoother=self.smoother.snapshot(),
            streaks=[(c, k, replace(st)) for (c, k), st in self.streaks.items()],
            active=[(c, k, symptom_to_wire(s)) for (c, k), s in self.active.items()],
            online={c: {k: (m.tolist(), sc.tolist()) for k, (m, sc) in d.items()} for c, d in self.online.items()},
            windows=self.windows, anomalies=self.anomalies, out=pending_out(self._out, self.active.values()))

    def restore(self, state: ScorerState) -> None:
        """Continue from `state`; ValueError (before any change) if it does not fit the models."""
        for cls, baselines in state.online.items():
            model = self.models.classes.get(cls)
            width = None if model is None else len(model.floors)
            for key, (med, scale) in baselines.items():
                if width is not None and not len(med) == len(scale) == width:
                    raise ValueError(f"the checkpoint's online baseline of {cls} {key!r} has {len(med)} "
                                     f"values; the model has {width}")
        active = {(c, k): symptom_from_wire(s) for c, k, s in state.active}
        out = restore_out(state.out, active.values())
        self.cutter.restore(state.cutter)
        self.smoother.restore(state.smoother)
        self.streaks = {(c, k): replace(st) for c, k, st in state.streaks}  # (copies: the state stays as taken)
        self.active, self._out = active, out
        self.online = {c: {k: (np.asarray(m, dtype=float), np.asarray(sc, dtype=float)) for k, (m, sc) in d.items()}
                       for c, d in state.online.items()}
        self.windows, self.anomalies = state.windows, state.anomalies
        self._quiet_until = -INF  # scan at the next tick

    def live(self) -> list[Symptom]:
        return list(self.active.values())

    def drain(self) -> list[Symptom]:
        out, self._out = self._out, []
        return out

    def finish(self) -> None:
        end_all(self.active, self._out)

    # --- scoring ----------------------------------------------------------------------
    def _score(self, start: float, end: float, rows: dict) -> None:
        self.windows += 1
        for cls, (slots_of, means) in rows.items():
            model = self.models.classes.get(cls)
            if model is None:
                continue
            keys = [slot.key for slot in slots_of]
            values = self.smoother.rows(keys, means, CLASSES[cls].floors)
            online = self.online.setdefault(cls, {}) if self.learn_rate else None
            z, verdicts = model.score(keys, values, online)
            # A window whose own means are not up is the smoothed mean's tail after a
            # burst, not the anomaly going on: it counts as normal data.
            verdicts = [v for v in verdicts if self._live(cls, v)]
            slots = dict(zip(keys, slots_of))
            bad = {v.key for v in verdicts}
            for v in verdicts:
                self._anomalous(cls, slots[v.key], v, start, end)
            # A window of its own data, normal: before the episode's symptom, it ends the
            # episode (its first `hits` windows of data are anomalous in a row); after,
            # the episode ends `clear_s` after its last anomalous window (windows without
            # its data say nothing either way).
            for k in [k for k in self.streaks if k[0] == cls and k[1] in slots and k[1] not in bad]:
                if k not in self.active or end - self.streaks[k].last >= self.clear_s:
                    self._end(k)
                else:
                    self.streaks[k].dip()
            if self.learn_rate:
                calm = np.flatnonzero(z.max(axis=1) < self.learn_below)
                for i in calm:
                    if keys[i] not in bad:
                        model.learn(keys[i], values[i], self.learn_rate, online)
        self._quiet_until = -INF

    def _anomalous(self, cls: str, slot, verdict, start: float, end: float) -> None:
        self.anomalies += 1
        k = (cls, verdict.key)
        st = self.streaks.get(k)
        if st is None:
            st = self.streaks[k] = _Streak(start, end, 0)
        st.last, st.count = end, st.count + 1
        if not self._strong(cls, verdict):
            st.dip()
        else:
            if st.strong == 0:
                st.strong_first = start
            st.strong, st.strong_last, st.dipped = st.strong + 1, end, False
        if st.count < self.hits or st.last - st.first < self.evidence_s:
            return
        sustained = st.strong_last - st.strong_first >= self.open_s and st.strong >= self.strong_hits
        sym = self.active.get(k)
        if sym is not None and sustained and not sym.rule.endswith(SUSTAINED):
            sym.end = sym.last  # the evidence gives way to the sustained symptom
            self._out.append(sym)
            sym = None
        if sym is None:
            # Evidence spans what its windows prove: an anomaly in two windows in a row may
            # be two samples either side of their boundary (a 2 s burst), so it lasts from
            # the end of its first window to the start of its latest. A sustained symptom
            # has proved its strong run (open_s) and starts with it.
            w = self.models.window_s
            sym = self._symptom(cls, slot, verdict, st.strong_first if sustained else st.first + w, sustained=sustained)
            self.active[k] = sym
            self._out.append(sym)
        sym.last = end if sym.rule.endswith(SUSTAINED) else max(sym.start, start)
        self._evidence(sym, cls, verdict)

    def _live(self, cls: str, verdict) -> bool:
        """Whether a window's anomaly is going on in it: some feature that reached half
        of z_min at either horizon has its own window mean up (z >= STRONG_WINDOW_Z)."""
        n = len(CLASSES[cls].features)
        z = verdict.z
        top = np.maximum(z[:n], z[n:2 * n])
        return bool(np.any((top >= self.models.classes[cls].z_min / 2) & (z[:n] >= STRONG_WINDOW_Z)))

    def _strong(self, cls: str, verdict) -> bool:
        """A window that counts toward opening: a feature reached z_min on its robust
        score alone (not in the forest's band) at either horizon, and that feature's own
        window mean is up too, not only its smoothed one (after a blip or a collective
        phase the minute-long mean stays high for a while: that tail is the blip, not a
        fault going on). A class with `agree` > 1 needs features of that many sides at half
        z_min or more at once, each side's own window mean up too (storage: a slow target
        slows reads and writes, where a background scrub slows only the reads; the
        in-flight time mixes both and is no side of its own, so slow reads raise it too; a
        long scrub's reads at z 16 lifted the smoothed write mean to half z_min for a minute
        while the writes' own windows sat at z 0-3, and that passed for a second side)."""
        if verdict.forest is not None:
            return False
        n = len(CLASSES[cls].features)
        z = verdict.z
        top = np.maximum(z[:n], z[n:2 * n])
        z_min = self.models.classes[cls].z_min
        agree = CLASSES[cls].agree
        if not np.any((top >= z_min) & (z[:n] >= STRONG_WINDOW_Z)):
            return False
        if agree <= 1:
            return True
        up = (top >= z_min / 2) & (z[:n] >= STRONG_WINDOW_Z)
        return len({f.side for f, u in zip(CLASSES[cls].features, up) if u and f.side}) >= agree

    @staticmethod
    def _driver(cls: str, verdict) -> int:
        """The feature a symptom is named after: the most deviating (either horizon) of
        those whose own window mean is up. A smoothed mean still high from a burst that
        ended (a microburst's drops a minute ago) does not name the symptom of another
        feature's rise (the queue filling with a job's traffic after it)."""
        n = len(CLASSES[cls].features)
        z = verdict.z
        top = np.maximum(z[:n], z[n:2 * n])
        live = z[:n] >= STRONG_WINDOW_Z
        return int(np.argmax(np.where(live, top, -1.0))) if live.any() else int(np.argmax(top))

    def _symptom(self, cls: str, slot, verdict, start: float, *, sustained: bool) -> Symptom:
        c = CLASSES[cls]
        top = c.features[self._driver(cls, verdict)]
        eid = symptom_entity(c, verdict.key)
        rule = rule_id(cls, top.symptom, sustained=sustained)
        return Symptom(key=f"{rule}@{verdict.key}@{start:.3f}", kind=top.symptom, family=top.family,
                       entity=Entity(c.entity_kind, eid), device=slot.device, start=start, last=start,
                       severity=SEVERITY, rule=rule)

    @staticmethod
    def _evidence(sym: Symptom, cls: str, verdict) -> None:
        """Peaks over the symptom's life: the largest robust score, the forest's score
        when it was consulted, and the driving features with their values and z. The
        robust score and the values of the features reported so far are sampled at the
        window's end too (engine/samples.py), a point per window."""
        names = CLASSES[cls].model_features
        m = sym.metrics
        m["anomaly_z"] = max(m.get("anomaly_z", 0.0), round(verdict.z_max, 2))
        sample(sym.samples.setdefault("anomaly_z", []), sym.last, round(verdict.z_max, 2))
        if verdict.forest is not None:
            m["forest_score"] = max(m.get("forest_score", 0.0), round(verdict.forest, 4))
        for i in np.argsort(-verdict.z)[:REPORTED]:
            z = float(verdict.z[i])
            if z <= 0:
                break
            name = names[i]
            m[f"{name}_z"] = max(m.get(f"{name}_z", 0.0), round(z, 2))
            v = float(verdict.values[i])
            if v == v:  # not NaN
                m[name] = max(m.get(name, float("-inf")), v)
        for i, name in enumerate(names):
            v = float(verdict.values[i])
            if name in m and v == v:
                sample(sym.samples.setdefault(name, []), sym.last, v)
