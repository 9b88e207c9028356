"""Stage 2: counters -> rates, gauges -> values, plus a few derived features.

The catalogue below is contract section 2 written as data: which fields are cumulative
counters (C), gauges (G) or event fields (E) for each measurement, and how the entity id
is formed. Rules name features: a counter `x` becomes the feature `x_rate` (per second),
a gauge or event field keeps its name, and derived features combine them.

Only the features some rule (or model) needs are computed: the hot path does no work for
fields nobody reads.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from operator import itemgetter
from typing import Callable

import msgspec

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
    counters = tuple(sorted(c for c in m.counters if f"{c}_rate" in raw))
    gauges = tuple(sorted(g for g in m.gauges if g in raw))
    return FeaturePlan(counters, gauges, tuple(chosen), frozenset(wanted))


NOT_YET = type("NotYet", (), {"__repr__": lambda self: "NOT_YET"})()  # no value of a counter yet


@dataclass(slots=True)
class SeriesState:
    ts: float
    values: tuple  # the plan's counters' last numeric values, in plan order (or NOT_YET)
    # The series lacks some of the plan's counters (e.g. a NIC's pause counters of the
    # priorities it does not use), so reading them all at once would fail on every
    # record: this is the compute compiled for the counters it has (`compile_plan`).
    sparse: Callable | None = None
    tally: list | None = None  # [counter values that were not numbers], shared by an extractor's series


_NUMBERS = frozenset((int, float))


def _condition(c, var: str | None, floats: set[str]) -> str:
    """A rule condition on a local, with `Rule.matches`'s meaning: a missing feature or one
    of the other type (a string where a number is expected, or the reverse) is false.
    Rates, sums and argmaxes hold a float or None, so they need no type test."""
    if var is None:
        return "False"
    if var in floats:
        return "False" if isinstance(c.value, str) else f"({var} is not None and {var} {c.op} {float(c.value)!r})"
    if isinstance(c.value, str):
        return f"({var}.__class__ is str and {var} {c.op} {c.value!r})"
    return f"({var}.__class__ in NUM and {var} {c.op} {float(c.value)!r})"


# (plan, measurement, rules, always, model) -> its compute: the functions keep no state (a
# series' memory is in its SeriesState), so stages and extractors with equal plans share them.
_PLANS: dict[tuple, Callable] = {}


def compile_plan(p: FeaturePlan, measurement: str = "", rules: tuple = (), always: bool = True,
                 model: tuple[str, ...] = ()) -> Callable:
    """compute(fields, tags, st, dt) -> None or (features, rules that fired, resets): one
    plan, and the conditions of `rules` on its measurement, as straight-line code.

    Gauges are read from the fields (else the tags: event records carry some facts as
    tags). The counters are read at once (one C call) into locals beside their previous
    values (`st`, a SeriesState, or None for a plan without counters). A series that
    lacks some of them (a NIC that reports only the priorities it uses) gets code
    compiled for the ones it has, and checks in one C call that the others are still
    absent (a few sets of missing counters per plan; past MAX_SHAPES, read one by one).
    A counter that is not an int or a float counts as absent. With a previous value a
    counter's rate is delta / dt, or a reset is counted when it decreased; a counter
    equal to its previous value has rate
    0.0 at once (the same object: a small int that did not change, e.g. the PFC counters
    of idle priorities; or an equal int, whose difference is exactly 0). When every
    counter is a number, the tuple read is the new memory as it is; otherwise the absent
    and non-numeric ones keep their previous values and the memory is rebuilt. Derived
    sums and argmaxes are added up inline (a sum of inputs all present in one expression,
    the same additions in the same order); the other derived features get a dict of their
    inputs. The rules' conditions are tested on the locals, so a record no rule fires on
    builds no feature dict, nor the derived features that only report (e.g. which PFC
    priority pauses): unless `always`, compute returns None when no rule fired and no
    counter was reset. The features (only those `wanted`, and only present ones) and the
    rules that fired (in the order given; none when there is no feature) are what
    `FeatureExtractor.extract` and `Detector.process` hand on.

    With `model` (the feature names an anomaly model reads, in its order), compute runs
    for every record and returns a fourth item: those features as a tuple (None where
    absent), or None when the record has no feature at all; the feature dict is then
    built only when a rule fired (the models read the tuple, the rules the dict).
    Generated once per measurement because this is the hottest code in the engine."""
    always = always or bool(model)  # the models read every record
    key = (p, measurement, tuple(rules), always, tuple(model))
    known = _PLANS.get(key)
    if known is not None:  # every stage of a worker (one per partition) runs the same plans
        return known
    shapes: dict[frozenset[str] | None, Callable] = {}  # counters a sparse series lacks -> its compute

    def sparse(fields, tags, st, dt):
        """A series without some of the counters (or no longer without them): the compute
        for the counters it has, compiled once per set of missing ones."""
        absent = frozenset(c for c in p.counters if c not in fields)
        if not absent:  # it has them all (again)
            st.sparse = None
            return full(fields, tags, st, dt)
        if absent not in shapes and len(shapes) >= MAX_SHAPES:
            absent = None  # past MAX_SHAPES sets, a series reads its counters one by one
        fn = shapes.get(absent)
        if fn is None:
            fn = shapes[absent] = _compile(p, measurement, rules, always, model, absent, sparse)
        st.sparse = fn
        return fn(fields, tags, st, dt)

    full = _compile(p, measurement, rules, always, model, frozenset(), sparse)
    if len(_PLANS) >= 256:  # (tests compile many rule sets; a worker a handful)
        _PLANS.clear()
    _PLANS[key] = full
    return full


MAX_SHAPES = 16  # sets of missing counters compiled per plan (then: read one by one)


def _compile(p: FeaturePlan, measurement: str, rules: tuple, always: bool, model: tuple[str, ...],
             absent: frozenset[str] | None, sparse: Callable) -> Callable:
    """compile_plan's code for one set of `absent` counters: frozenset() for records
    with all of them (read at once; a KeyError hands the record to `sparse`), a set for
    a series that lacks those (the others read at once, the absent ones checked absent in
    one C call: they have no rate and keep their memory), None for a series read counter
    by counter (absent ones are None)."""
    src = ["def compute(fields, tags, st, dt):"]
    if p.counters and absent == frozenset():  # a sparse series goes to its own code first
        src += ["    if st.sparse is not None:", "        return st.sparse(fields, tags, st, dt)"]
    elif absent:  # and leaves it when one of the counters it lacked has come
        src += ["    if not ABSENT.isdisjoint(fields):", "        return SPARSE(fields, tags, st, dt)"]
    src.append("    resets = 0")
    local: dict[str, str] = {}
    floats: set[str] = set()  # locals that hold a float or None
    for i, name in enumerate(p.gauges):
        v = local[name] = f"G{i}"
        src += [f"    {v} = fields.get({name!r})", f"    if {v} is None:", f"        {v} = tags.get({name!r})"]
    n = len(p.counters)
    xs, os_ = (", ".join(f"{a}{i}" for i in range(n)) + ("," if n == 1 else "") for a in "xo")
    missing = absent or frozenset()
    read = [c for c in p.counters if c not in missing] if absent is not None else []
    if n:
        src.append("    keep = False")  # a counter kept its previous value: the memory is not X
        if absent is None:  # one by one
            src.append("    X = tuple(map(fields.get, COUNTERS))")
        else:
            if read:
                src += ["    try:", "        X = READ(fields)", "    except KeyError:",  # one it had is gone
                        "        return SPARSE(fields, tags, st, dt)"]
        if absent:
            if read:
                src.append(", ".join(f"    x{i}" if k == 0 else f"x{i}" for k, i in enumerate(
                    i for i, c in enumerate(p.counters) if c not in missing)) + ("," if len(read) == 1 else "") + " = X")
            src.append(f"    {os_} = st.values")
            src += [f"    R{i} = None" for i, c in enumerate(p.counters) if c in missing]
        else:
            src += [f"    {xs} = X", f"    {os_} = st.values"]
    for i, c in enumerate(p.counters):
        r, x, o = f"R{i}", f"x{i}", f"o{i}"
        local[f"{c}_rate"] = r
        floats.add(r)
        if c in missing:
            continue  # no rate (R = None above); its memory keeps o
        src += [
            f"    if {x} is {o}:",  # the very number it held before
            f"        {r} = 0.0",
            f"    elif {x} is None:",  # absent
            f"        {r} = None",
            f"        {x} = {o}",
            "        keep = True",
            f"    elif type({x}) is int:",
            f"        if {o} is NOT_YET:",
            f"            {r} = None",
            f"        elif {x} == {o}:",  # an int equal to its previous value: x - o is exactly 0
            f"            {r} = 0.0",
            f"        elif {x} > {o}:",
            f"            {r} = ({x} - {o}) / dt",
            "        else:",
            "            resets += 1",
            f"            {r} = None",
            f"    elif type({x}) is float:",
            f"        if {o} is NOT_YET:",
            f"            {r} = None",
            f"        elif {x} >= {o}:",
            f"            {r} = ({x} - {o}) / dt",
            "        else:",
            "            resets += 1",
            f"            {r} = None",
            "    else:",  # not a number (a string, a boolean): no rate, the previous value kept, counted
            "        st.tally[0] += 1",
            f"        {r} = None",
            f"        {x} = {o}",
            "        keep = True",
        ]
    if n:  # each x now holds the counter's new memory: its value, or the one kept
        if absent:  # the absent ones keep theirs
            kept = ", ".join(f"o{i}" if c in missing else f"x{i}" for i, c in enumerate(p.counters))
            src.append(f"    st.values = ({kept}{',' if n == 1 else ''})")
        else:
            src.append(f"    st.values = ({xs}) if keep else X")
    tested = {c.feature for r in rules for c in (*r.all, *r.any)}
    late: list[str] = []  # derived features no condition reads: computed once a rule fired
    for j, d in enumerate(p.derived):
        v = local[d.name] = f"D{j}"
        ins = [(k, local[name]) for k, name in enumerate(d.inputs) if name in local]
        out = src if d.name in tested else late
        if d.kind == "sum":  # as `_sum`: from 0.0, the present rates in order
            floats.add(v)
            if ins:  # all present (the usual case): the same additions, in one expression
                out += [f"    if {' and '.join(f'{w} is not None' for _, w in ins)}:",
                        f"        {v} = {' + '.join(['0.0'] + [w for _, w in ins])}", "    else:"]
            pad = "    " if ins else ""
            out.append(f"{pad}    t, seen = 0.0, False")
            for _, w in ins:
                out += [f"{pad}    if {w} is not None:", f"{pad}        t += {w}", f"{pad}        seen = True"]
            out.append(f"{pad}    {v} = t if seen else None")
        elif d.kind == "argmax":  # as `_argmax`: the first index of the largest rate above 0
            floats.add(v)
            out.append(f"    best, {v} = 0.0, None")
            for k, w in ins:
                out += [f"    if {w} is not None and {w} > best:", f"        best, {v} = {w}, {float(k)!r}"]
        elif d.kind == "max":  # as `_max`: the first largest of the inputs that are numbers
            out.append(f"    {v} = None")
            for _, w in ins:
                out += [f"    if isinstance({w}, NUMBER) and ({v} is None or {w} > {v}):", f"        {v} = {w}"]
        elif d.kind == "util":  # as `_util`: rate (bytes/s) * 8 over a positive speed
            r, sp = (local.get(name, "None") for name in d.inputs)
            out += [f"    if {r} is None or not isinstance({sp}, NUMBER) or {sp} <= 0:", f"        {v} = None",
                    "    else:", f"        {v} = {r} * 8.0 / ({sp} * {d.scale!r})"]
        else:
            out.append("    x = {}")
            for name, w in ((name, local[name]) for name in d.inputs if name in local):
                out += [f"    if {w} is not None:", f"        x[{name!r}] = {w}"]
            out.append(f"    {v} = FN[{j}](x)")
    src.append("    fired = []")
    for j, r in enumerate(rules):
        parts = []
        if r.all:
            parts.append(" and ".join(_condition(c, local.get(c.feature), floats) for c in r.all))
        if r.any:
            parts.append("(" + " or ".join(_condition(c, local.get(c.feature), floats) for c in r.any) + ")")
        src += [f"    if {' and '.join(parts) or 'True'}:", f"        fired.append(RULES[{j}])"]
    if not always:
        src += ["    if not fired:", "        return (None, fired, resets) if resets else None"]
    src += late
    if model:
        present = [local[name] for name in model if name in local]
        present += [local[name] for name in sorted(p.wanted) if name in local and name not in model]
        nothing = " and ".join(f"{v} is None" for v in present) or "True"  # the dict would be empty
        src += [f"    vec = ({', '.join(local.get(name, 'None') for name in model)},)",
                "    if not fired:",
                f"        if {nothing}:",
                "            return (None, [], resets, None)",
                "        return (None, fired, resets, vec)"]
    src.append("    feats = {}")
    for name in sorted(p.wanted):
        if name in local:
            src += [f"    if {local[name]} is not None:", f"        feats[{name!r}] = {local[name]}"]
    if model:
        src.append("    return (feats, fired, resets, vec) if feats else (None, [], resets, None)")
    else:
        src.append("    return (feats, fired, resets) if feats else (None, [], resets)")
    namespace = {"NUM": _NUMBERS, "NUMBER": (int, float), "NOT_YET": NOT_YET, "FN": [d.fn for d in p.derived], "RULES": tuple(rules),
                 "READ": itemgetter(*read) if len(read) > 1 else (lambda f: (f[read[0]],)) if read else None,
                 "COUNTERS": p.counters, "ABSENT": missing, "SPARSE": sparse}
    text = "\n".join(src)
    filename = f"<features of {measurement or 'a plan'}{'' if absent == frozenset() else ' (sparse)'}>"
    exec(compile(text, filename, "exec"), namespace)
    compute = namespace["compute"]
    compute.source = text
    return compute


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
    _compute: dict[str, Callable] = field(default_factory=dict)
    _fresh: dict[str, tuple] = field(default_factory=dict)  # measurement -> no previous values
    _tally: list = field(default_factory=lambda: [0])  # counter values that were not numbers (SeriesState.tally)

    @property
    def non_numeric(self) -> int:
        """Counter values that were strings or booleans: no rate, never silently used."""
        return self._tally[0]

    def __post_init__(self) -> None:
        self._compute = {m: self.compile(m) for m in self.plans}
        self._fresh = {m: (NOT_YET,) * len(p.counters) for m, p in self.plans.items() if p.counters}

    def compile(self, measurement: str, rules: tuple = (), always: bool = True,
                model: tuple[str, ...] = ()) -> Callable:
        return compile_plan(self.plans[measurement], measurement, rules, always, model)

    def extract(self, metric) -> dict | None:
        compute = self._compute.get(metric.name)
        if compute is None:
            return None
        out = self.run(metric, compute)
        return None if out is None else out[0]

    def run(self, metric, compute: Callable) -> tuple | None:
        """One record through `compute` (compiled for its measurement): None, or (features
        or None, rules fired, resets)."""
        fresh = self._fresh.get(metric.name)
        if fresh is None:  # no counters: no memory
            return compute(metric.fields, metric.tags, None, 1.0)
        st = self.series.get(metric.series)
        if st is None:
            st = self.series[metric.series] = SeriesState(metric.ts, fresh, tally=self._tally)
            dt = 1.0  # no previous values: no rate yet
        else:
            dt = metric.ts - st.ts
            if dt <= 0:
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
