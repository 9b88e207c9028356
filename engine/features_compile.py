"""The compiled kernel of stage 2: a feature plan and its rules' conditions as
straight-line Python, generated once per (plan, rules): one code for records with all the
counters, one for series that lack some.

This is a speed trick with a plain reference beside it: `engine.features_reference`
defines what compute must return (rates, resets, gauges, derived features, fired rules)
the obvious way, and tests/test_features.py checks the two agree by hypothesis on
arbitrary records (sparse series, non-numeric values, resets, wraps). Change the
reference first; this must follow it.
"""
from __future__ import annotations

import math
from operator import itemgetter
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from engine.features import FeaturePlan

NOT_YET = type("NotYet", (), {"__repr__": lambda self: "NOT_YET"})()  # no value of a counter yet

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


def compile_plan(p: FeaturePlan, measurement: str = "", rules: tuple = (), always: bool = True,
                 model: tuple[str, ...] = (), levels: tuple = ()) -> Callable:
    """compute(fields, tags, st, dt) -> None or (features, rules that fired, resets): one
    plan, and the conditions of `rules` on its measurement, as straight-line code.

    Gauges are read from the fields (else the tags: event records carry some facts as
    tags). The counters are read at once (one C call) into locals beside their previous
    values (`st`, a SeriesState, or None for a plan without counters). A series that
    lacks some of them (a NIC that reports only the priorities it uses) has its counters
    read one by one from then on (code compiled once per plan for such series).
    A counter that is not an int or a float counts as absent. With a previous value a
    counter's rate is delta / dt (and, where a rule reads it, `x_delta` is the delta), or
    a reset is counted when it decreased; a counter
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

    With `levels` (rules judged by their series' own level, `Rule.level`), their
    conditions are tested as the rules' are but they build no feature dict: compute
    returns one more, last, item, `level_values(levels)`'s tuple: each level rule's
    feature where its condition holds (else None), then the values of
    `level_names(levels)` (None where absent); or None when no level rule's condition
    holds. For a series with counters, once the detector has attached its windows
    (`SeriesState.levels`: engine.baseline.LevelState, one per level rule) the kernel
    adds a value that only goes into its rule's open bucket there itself, and hands the
    tuple over only when a bucket closes (the windows' medians are the detector's) or a
    verdict holds: most records of a level rule cost a few additions, not a dict nor a
    call (engine.detect builds the dict of one rule's features on the rare record its
    level is off).
    Generated once per measurement because this is the hottest code in the engine."""
    always = always or bool(model)  # the models read every record
    by_one: list[Callable] = []  # compiled when a series first lacks a counter

    def sparse(fields, tags, st, dt):
        """A series without some of the counters (a NIC that reports only the priorities it
        uses): from now on its counters are read one by one (absent ones are None)."""
        if not by_one:
            by_one.append(_compile(p, measurement, rules, always, model, levels, True, sparse))
        st.sparse = by_one[0]
        return by_one[0](fields, tags, st, dt)

    return _compile(p, measurement, rules, always, model, levels, False, sparse)


def level_names(levels: tuple) -> tuple[str, ...]:
    """The features a level rule's symptom reads (its own and those it reports), in the
    order of the level tuple after the rules' values."""
    return tuple(sorted({f for r in levels for f in r.features}))


def _when(r, local: dict[str, str], floats: set[str]) -> str:
    """A rule's conditions (`Rule.matches`) as one expression on the locals."""
    parts = []
    if r.all:
        parts.append(" and ".join(_condition(c, local.get(c.feature), floats) for c in r.all))
    if r.any:
        parts.append("(" + " or ".join(_condition(c, local.get(c.feature), floats) for c in r.any) + ")")
    return " and ".join(parts) or "True"


def _level_lines(levels: tuple, local: dict[str, str], floats: set[str], memory: bool) -> list[str]:
    """LV = the level tuple (compile_plan's docstring), or None. With a counter `memory`
    whose windows are attached, a value that only goes into its open bucket is added
    there (as `engine.baseline.observe` adds it when no bucket closes) and LV is None."""
    src, own = [], [f"L{j}" for j in range(len(levels))]
    for j, r in enumerate(levels):
        src += [f"    L{j} = {local.get(r.level.feature, 'None')} if {_when(r, local, floats)} else None"]
    values = f"({', '.join(own + [local.get(n, 'None') for n in level_names(levels)])},)"
    none = " and ".join(f"{v} is None" for v in own)
    if not memory:
        return src + [f"    LV = None if {none} else {values}"]
    src += ["    W = st.levels", "    ts = st.ts", "    if W is None:", f"        LV = None if {none} else {values}"]
    opens = " or ".join(f"({v} is not None and (W[{j}].verdict or FLOOR(ts / {r.level.bucket_s!r}) != W[{j}].bucket))"
                        for j, (v, r) in enumerate(zip(own, levels)))
    src += [f"    elif {opens}:", f"        LV = {values}", "    else:", "        LV = None"]
    for j, v in enumerate(own):
        src += [f"        if {v} is not None:", f"            w = W[{j}]",
                f"            w.total += {v}", "            w.count += 1", "            w.last = ts"]
    return src


def _compile(p: FeaturePlan, measurement: str, rules: tuple, always: bool, model: tuple[str, ...],
             levels: tuple, one_by_one: bool, sparse: Callable) -> Callable:
    """compile_plan's code: for records with all the counters (read at once; a KeyError
    hands the record to `sparse`), or `one_by_one` for a series that lacks some."""
    src = ["def compute(fields, tags, st, dt):"]
    if p.counters and not one_by_one:  # a sparse series goes to its own code first
        src += ["    if st.sparse is not None:", "        return st.sparse(fields, tags, st, dt)"]
    src.append("    resets = 0")
    local: dict[str, str] = {}
    floats: set[str] = set()  # locals that hold a float or None
    for i, name in enumerate(p.gauges):
        v = local[name] = f"G{i}"
        src += [f"    {v} = fields.get({name!r})", f"    if {v} is None:", f"        {v} = tags.get({name!r})"]
    n = len(p.counters)
    xs, os_ = (", ".join(f"{a}{i}" for i in range(n)) + ("," if n == 1 else "") for a in "xo")
    read = list(p.counters)
    if n:
        src.append("    keep = False")  # a counter kept its previous value: the memory is not X
        if one_by_one:
            src.append("    X = tuple(map(fields.get, COUNTERS))")
        else:
            src += ["    try:", "        X = READ(fields)", "    except KeyError:",  # one is missing
                    "        return SPARSE(fields, tags, st, dt)"]
        src += [f"    {xs} = X", f"    {os_} = st.values"]
    for i, c in enumerate(p.counters):
        r, x, o = f"R{i}", f"x{i}", f"o{i}"
        local[f"{c}_rate"] = r
        floats.add(r)
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
            f"        if len(st.tally) == 1: st.tally.append({measurement + '.' + c!r})",  # (an example)
            f"        {r} = None",
            f"        {x} = {o}",
            "        keep = True",
        ]
    tested = {c.feature for r in rules for c in (*r.all, *r.any)} | set(level_names(levels))
    for i, c in enumerate(p.counters):  # an increase (`x_delta`), where a rule reads it
        if f"{c}_delta" in tested or f"{c}_delta" in p.wanted:
            local[f"{c}_delta"] = f"E{i}"
            src.append(f"    E{i} = None if R{i} is None else x{i} - o{i}")
    if n:  # each x now holds the counter's new memory: its value, or the one kept
        src.append(f"    st.values = ({xs}) if keep else X")
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
        src += [f"    if {_when(r, local, floats)}:", f"        fired.append(RULES[{j}])"]
    lv = ""  # the level tuple as compute's last item
    if levels:
        src += _level_lines(levels, local, floats, bool(p.counters))
        lv = ", LV"
    if not always:
        src += ["    if not fired:",
                f"        return (None, fired, resets{lv}) if resets{' or LV is not None' if lv else ''} else None"]
    src += late
    if model:
        present = [local[name] for name in model if name in local]
        present += [local[name] for name in sorted(p.wanted) if name in local and name not in model]
        nothing = " and ".join(f"{v} is None" for v in present) or "True"  # the dict would be empty
        src += [f"    vec = ({', '.join(local.get(name, 'None') for name in model)},)",
                "    if not fired:",
                f"        if {nothing}:",
                f"            return (None, [], resets, None{lv})",
                f"        return (None, fired, resets, vec{lv})"]
    src.append("    feats = {}")
    for name in sorted(p.wanted):
        if name in local:
            src += [f"    if {local[name]} is not None:", f"        feats[{name!r}] = {local[name]}"]
    if model:
        src.append(f"    return (feats, fired, resets, vec{lv}) if feats else (None, [], resets, None{lv})")
    else:
        src.append(f"    return (feats, fired, resets{lv}) if feats else (None, [], resets{lv})")
    namespace = {"FLOOR": math.floor, "NUM": _NUMBERS, "NUMBER": (int, float), "NOT_YET": NOT_YET, "FN": [d.fn for d in p.derived], "RULES": tuple(rules),
                 "READ": itemgetter(*read) if len(read) > 1 else (lambda f: (f[read[0]],)) if read else None,
                 "COUNTERS": p.counters, "SPARSE": sparse}
    text = "\n".join(src)
    filename = f"<features of {measurement or 'a plan'}{' (sparse)' if one_by_one else ''}>"
    exec(compile(text, filename, "exec"), namespace)
    compute = namespace["compute"]
    compute.source = text
    return compute
