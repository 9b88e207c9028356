"""Stage 2: counters -> rates, gauges -> values, plus a few derived features.

The catalogue below is contract section 2 written as data: which fields are cumulative
counters (C), gauges (G) or event fields (E) for each measurement, and how the entity id
is formed. Rules name features: a counter `x` becomes the feature `x_rate` (per second)
and `x_delta` (its increase since the previous sample),
a gauge or event field keeps its name, and derived features combine them.

Only the features some rule (or model) needs are computed: the hot path does no work for
fields nobody reads.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import msgspec

from engine.features_compile import NOT_YET, compile_plan  # noqa: F401  (the compiled kernel; its reference: engine.features_reference)
from contract.measurements import DERIVED_FEATURES, JOB_MEASUREMENT, MEASUREMENTS, PRIOS, DerivedFeature, Measurement, known_features  # noqa: F401  (re-exported: the catalogue's home is contract/)


def _sum(names: list[str]) -> Callable[[dict], float | None]:
    def f(x: dict) -> float | None:
        total, seen = 0.0, False
        for n in names:
            v = x.get(n)
            if v is not None:
                total += v
                seen = True
        return total if seen else None
    return f


def _util(rate: str, speed: str, scale: float) -> Callable[[dict], float | None]:
    def f(x: dict) -> float | None:
        r, s = x.get(rate), x.get(speed)
        if r is None or not isinstance(s, (int, float)) or s <= 0:
            return None
        return r * 8.0 / (s * scale)
    return f


def _per_op(time_rate: str, ops_rate: str) -> Callable[[dict], float | None]:
    def f(x: dict) -> float | None:
        t, n = x.get(time_rate), x.get(ops_rate)
        if t is None or not n:
            return None
        return t / n
    return f


def _little(inflight: str, ops: list[str]) -> Callable[[dict], float | None]:
    """Little's law: the mean time an I/O spends in flight (ms) is the I/O in flight over
    the I/O completed per second."""
    n = _sum(ops)
    def f(x: dict) -> float | None:
        q, r = x.get(inflight), n(x)
        return 1000.0 * q / r if isinstance(q, (int, float)) and r else None
    return f


def _ratio_sum(times: list[str], ops: list[str]) -> Callable[[dict], float | None]:
    t, n = _sum(times), _sum(ops)
    def f(x: dict) -> float | None:
        a, b = t(x), n(x)
        return a / b if a is not None and b else None
    return f


def _busy(rate: str, speed: str, paused: list[str], scale: float) -> Callable[[dict], float | None]:
    """The share of the interval an egress was sending or paused (at most 1; 1 when its
    speed is unknown: no bound). A queue holds only while its port sends at line rate or
    is paused, so a port that marked ECN while busy a third of a sample was congested a
    third of it at most, in bursts."""
    util, pause = _util(rate, speed, scale), _sum(paused)
    def f(x: dict) -> float | None:
        u = util(x)
        if u is None:
            return None if x.get(rate) is None else 1.0
        return min(1.0, u + (pause(x) or 0.0) / 1e6)
    return f


def _max(names: list[str]) -> Callable[[dict], float | None]:
    def f(x: dict) -> float | None:
        vals = [x[n] for n in names if isinstance(x.get(n), (int, float))]
        return max(vals) if vals else None
    return f


def _argmax(names: list[str]) -> Callable[[dict], float | None]:
    """Index (e.g. the PFC priority) of the largest positive input."""
    def f(x: dict) -> float | None:
        best, at = 0.0, None
        for i, n in enumerate(names):
            v = x.get(n)
            if v is not None and v > best:
                best, at = v, i
        return None if at is None else float(at)
    return f


@dataclass(frozen=True)
class Derived:
    name: str
    inputs: tuple[str, ...]  # features it reads (and all it reads)
    fn: Callable[[dict], float | None]
    kind: str = ""  # "sum", "argmax", "max" or "util": compiled inline (same arithmetic as `fn`)
    scale: float = 1.0  # "util": the unit of the speed, in bit/s


_ARITHMETIC = {
    "sum": lambda d: _sum(list(d.inputs)),
    "max": lambda d: _max(list(d.inputs)),
    "argmax": lambda d: _argmax(list(d.inputs)),
    "util": lambda d: _util(d.inputs[0], d.inputs[1], d.scale),
    "per_op": lambda d: _per_op(d.inputs[0], d.inputs[1]),
    "ratio_sum": lambda d: _ratio_sum(list(d.inputs[:len(d.inputs) // 2]), list(d.inputs[len(d.inputs) // 2:])),
    "little": lambda d: _little(d.inputs[0], list(d.inputs[1:])),
    "busy": lambda d: _busy(d.inputs[0], d.inputs[1], list(d.inputs[2:]), d.scale),
}
_INLINE = frozenset({"sum", "argmax", "max", "util"})  # compiled inline by compile_plan


def _derived(spec: DerivedFeature) -> Derived:
    """The contract's derived feature as a function (and, for the simple kinds, the kind
    the compiled plan inlines with the same arithmetic)."""
    return Derived(spec.name, spec.inputs, _ARITHMETIC[spec.kind](spec),
                   spec.kind if spec.kind in _INLINE else "", spec.scale)


DERIVED: dict[str, dict[str, Derived]] = {
    meas: {name: _derived(spec) for name, spec in feats.items()} for meas, feats in DERIVED_FEATURES.items()
}


@dataclass(frozen=True)
class FeaturePlan:
    """What to compute for one measurement, resolved once from the features asked for:
    the counters and gauges read (asked for, or inputs of a derived feature asked for),
    the derived features, and the features a record's feature dict holds (`wanted`)."""

    counters: tuple[str, ...]
    gauges: tuple[str, ...]
    derived: tuple[Derived, ...]
    wanted: frozenset[str] = frozenset()


def plan(measurement: str, wanted: frozenset[str]) -> FeaturePlan:
    m = MEASUREMENTS[measurement]
    derived = DERIVED.get(measurement, {})
    raw: set[str] = set()
    chosen: list[Derived] = []
    for f in sorted(wanted):
        if f in derived:
            chosen.append(derived[f])
            raw.update(derived[f].inputs)
        else:
            raw.add(f)
    counters = tuple(sorted(c for c in m.counters if f"{c}_rate" in raw or f"{c}_delta" in raw))
    gauges = tuple(sorted(g for g in m.gauges if g in raw))
    return FeaturePlan(counters, gauges, tuple(chosen), frozenset(wanted))


@dataclass(slots=True)
class SeriesState:
    ts: float
    values: tuple  # the plan's counters' last numeric values, in plan order (or NOT_YET)
    # The series lacks some of the plan's counters (e.g. a NIC's pause counters of the
    # priorities it does not use), so reading them all at once would fail on every
    # record: this is the compute that reads them one by one (`compile_plan`).
    sparse: Callable | None = None
    tally: list | None = None  # [counter values that were not numbers], shared by an extractor's series
    # The windows of the level rules of its measurement (engine.baseline.LevelState, one per
    # rule, owned and checkpointed by the detector), which the compiled kernel adds to.
    levels: list | None = None


@dataclass
class FeatureExtractor:
    """Per-series counter memory. `extract` returns the features of one record (those
    its plan was asked for), or None when there are none (e.g. the first sample of a
    series that only has counters) and for samples not newer than the last one. A
    counter that decreased was reset: it gets no rate for that interval. `run` does the
    same with a plan compiled with rules (`compile`): the detector's hot path."""

    plans: dict[str, FeaturePlan]
    series: dict[str, SeriesState] = field(default_factory=dict)
    counter_resets: int = 0
    # late samples older than their series' newest: no rate (Stats.superseded); counted from
    # the restore, not checkpointed (format 2 is released; like Stats.mapped)
    superseded: int = 0
    _compute: dict[str, Callable] = field(default_factory=dict)
    _fresh: dict[str, tuple] = field(default_factory=dict)  # measurement -> no previous values
    _tally: list = field(default_factory=lambda: [0])  # counter values that were not numbers (SeriesState.tally)

    @property
    def non_numeric(self) -> int:
        """Counter values that were strings or booleans: no rate, never silently used."""
        return self._tally[0]

    @property
    def non_numeric_example(self) -> str | None:
        """`measurement.counter` of the first value that was not a number (None: none yet)."""
        return self._tally[1] if len(self._tally) > 1 else None

    def __post_init__(self) -> None:
        self._compute = {m: self.compile(m) for m in self.plans}
        self._fresh = {m: (NOT_YET,) * len(p.counters) for m, p in self.plans.items() if p.counters}

    def compile(self, measurement: str, rules: tuple = (), always: bool = True,
                model: tuple[str, ...] = (), levels: tuple = ()) -> Callable:
        return compile_plan(self.plans[measurement], measurement, rules, always, model, levels)

    def extract(self, metric) -> dict | None:
        compute = self._compute.get(metric.name)
        if compute is None:
            return None
        out = self.run(metric, compute)
        return None if out is None else out[0]

    def run(self, metric, compute: Callable) -> tuple | None:
        """One record through `compute` (compiled for its measurement): None, or (features
        or None, rules fired, resets), and with models or level rules the items
        `compile_plan` adds."""
        fresh = self._fresh.get(metric.name)
        if fresh is None:  # no counters: no memory
            return compute(metric.fields, metric.tags, None, 1.0)
        st = self.series.get(metric.series)
        if st is None:
            st = self.series[metric.series] = SeriesState(metric.ts, fresh, tally=self._tally)
            dt = 1.0  # no previous values: no rate yet
        else:
            dt = metric.ts - st.ts
            if dt <= 0:  # (0: a late half released alone, counted by the reorderer)
                if dt < 0:
                    self.superseded += 1
                return None
            st.ts = metric.ts
        out = compute(metric.fields, metric.tags, st, dt)
        if out is not None and out[2]:
            self.counter_resets += out[2]
        return out

    def snapshot(self) -> FeatureState:
        """The counter memory with each series' values by counter name (independent of the
        plans, which come from the rules in force) and the resets counted."""
        out = {}
        for key, st in self.series.items():
            counters = self.plans[key.split("|", 1)[0]].counters
            out[key] = SeriesMemory(st.ts, {c: v for c, v in zip(counters, st.values) if v is not NOT_YET})
        return FeatureState(out, self.counter_resets, self._tally[0])

    def restore(self, state: FeatureState) -> None:
        """Continue from `state`: series of measurements the plans have no counters for
        (rules changed since) are left out, counters the plans lack are not read."""
        self.series = {}
        for key, st in state.series.items():
            measurement = key.split("|", 1)[0]
            if measurement in self._fresh:
                values = st.values
                self.series[key] = SeriesState(st.ts, tuple(values.get(c, NOT_YET) for c in self.plans[measurement].counters),
                                               tally=self._tally)
        self.counter_resets = state.counter_resets
        self._tally[0] = state.non_numeric


class SeriesMemory(msgspec.Struct, frozen=True, array_like=True):
    ts: float
    values: dict[str, bool | int | float]  # counter -> its last value


class FeatureState(msgspec.Struct, frozen=True):
    series: dict[str, SeriesMemory]
    counter_resets: int
    non_numeric: int = 0  # counter values that were not numbers (Stats.non_numeric_fields)
