"""The plain definition of stage 2, which the compiled kernel (`engine.features_compile`)
must agree with: no speed, only the meaning (contract section 2).

For one record of a series and that series' counter memory (the last number of each
counter, by name):
- a counter `c` whose new and previous values are both numbers (int or float, not a
  boolean) has the features `c_rate` = (new - previous) / dt and `c_delta` = new -
  previous (its increase: transitions, not a rate); when it decreased (a reset,
  or a wrap of a fixed-width counter) it has no rate and one reset is counted;
- a counter value that is present but not a number is counted as non-numeric, gets no
  rate and leaves the memory as it was; an absent counter gets no rate either;
- the new memory holds each counter's new value where it is a number, else the old one;
- a gauge keeps its value, read from the fields, else from the tags;
- a derived feature is `Derived.fn` (contract.measurements.DERIVED_FEATURES) over the
  dict of the rates and gauges present;
- the record's features are the plan's wanted ones that are present (not None);
- the rules that fire are those whose `Rule.matches` holds on that dict (none without
  features);
- level rules (`Rule.level`, judged by engine.baseline) are given apart: what they get
  is `level_values`, each one's feature where its condition holds and the features
  their symptoms read, not a dict; once the series' windows are attached
  (`SeriesState.levels`), values that only go into their rule's open bucket are added
  there and nothing is handed over.

`reference_compute` wraps this in compute's calling convention (`compile_plan`'s
docstring), so that tests, and the speed-trick experiment of docs/design.md, can run
either one in the same `FeatureExtractor`.
"""
from __future__ import annotations

import math
from typing import Callable

from engine.features_compile import NOT_YET, level_names


def number(v: object) -> int | float | None:
    """A counter value that counts: an int or a float (a boolean is neither here)."""
    return v if type(v) in (int, float) else None


def reference_features(p, fields: dict, tags: dict, before: dict | None, dt: float) -> tuple[dict, dict, int]:
    """(every feature of plan `p` present, wanted or not; the new counter memory; resets)."""
    before = before or {}
    x: dict = {}
    for g in p.gauges:
        v = fields.get(g)
        x[g] = tags.get(g) if v is None else v
    memory, resets = dict(before), 0
    for c in p.counters:
        new, old = number(fields.get(c)), number(before.get(c))
        if new is None:
            continue
        memory[c] = new
        if old is None:
            continue
        if new >= old:
            x[f"{c}_rate"] = (new - old) / dt
            x[f"{c}_delta"] = new - old
        else:
            resets += 1
    for d in p.derived:
        x[d.name] = d.fn({k: v for k, v in x.items() if v is not None})
    return {k: v for k, v in x.items() if v is not None}, memory, resets


def non_numeric(p, fields: dict) -> int:
    """Counter values present that are not numbers (counted, never used)."""
    return sum(1 for c in p.counters if fields.get(c) is not None and number(fields[c]) is None)


def wanted(p, every: dict) -> dict:
    return {k: v for k, v in every.items() if k in p.wanted}


def fired(rules, feats: dict) -> list:
    return [r for r in rules if feats and r.matches(feats)]


def level_values(levels, names: tuple[str, ...], feats: dict) -> tuple | None:
    """Each level rule's feature where its condition holds (else None), then the values
    of `names` (None where absent); None when no level rule's condition holds."""
    own = [feats[r.level.feature] if feats and r.matches(feats) else None for r in levels]
    if all(v is None for v in own):
        return None
    return (*own, *(feats.get(n) for n in names))


def opens(levels, lv: tuple, st) -> bool:
    """Whether a value of the record closes its rule's bucket (engine.baseline.observe) or
    meets a verdict that holds: the detector's to judge."""
    return any(v is not None and (w.verdict or math.floor(st.ts / r.level.bucket_s) != w.bucket)
               for r, v, w in zip(levels, lv, st.levels))


def reference_compute(p, measurement: str = "", rules: tuple = (), always: bool = True,
                      model: tuple[str, ...] = (), levels: tuple = ()) -> Callable:
    """compute(fields, tags, st, dt) with `compile_plan`'s results, the plain way."""
    always = always or bool(model)
    names = level_names(levels)

    def compute(fields, tags, st, dt):
        before = {} if st is None else {c: v for c, v in zip(p.counters, st.values) if v is not NOT_YET}
        every, memory, resets = reference_features(p, fields, tags, before, dt)
        if st is not None:
            st.values = tuple(memory.get(c, NOT_YET) for c in p.counters)
            st.tally[0] += non_numeric(p, fields)
        feats = wanted(p, every)
        hits = fired(rules, feats)
        lv = level_values(levels, names, feats)
        if lv is not None and st is not None and st.levels is not None and not opens(levels, lv, st):
            for v, w in zip(lv, st.levels):  # only into open buckets: added there, nothing handed over
                if v is not None:
                    w.total, w.count, w.last = w.total + v, w.count + 1, st.ts
            lv = None
        more = (lv,) if levels else ()  # the level tuple, with level rules only
        if model:
            vec = tuple(every.get(n) for n in model)
            if hits:
                return feats, hits, resets, vec, *more
            if not feats and all(v is None for v in vec):
                return None, [], resets, None, *more
            return None, [], resets, vec, *more
        if not always and not hits:
            return (None, [], resets, *more) if resets or lv is not None else None
        return (feats, hits, resets, *more) if feats else (None, [], resets, *more)

    return compute
