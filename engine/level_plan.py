"""A measurement's level rules and a record's values into their windows: the plumbing
between the compiled feature kernel (engine.features_compile, whose level tuple holds the
rules' values, then the features they report) and engine.baseline, which judges each
series' windows."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from engine.baseline import LevelState, observe


@dataclass(frozen=True, slots=True)
class LevelPlan:
    """A measurement's level rules, each one's place in the catalogue, and where each
    one's features sit in the compiled kernel's level tuple (engine.features_compile:
    the rules' values first, then `names`)."""

    rules: tuple
    places: tuple[int, ...]
    reads: tuple[tuple[tuple[str, int], ...], ...]


def level_plan(rules: tuple, names: tuple[str, ...], place: dict[str, int]) -> LevelPlan:
    at = {name: k for k, name in enumerate(names, len(rules))}
    return LevelPlan(rules, tuple(place[r.id] for r in rules),
                     tuple(tuple((name, at[name]) for name in sorted(r.features)) for r in rules))


def observe_record(plan: LevelPlan, windows: dict, series: str, ts: float, lv: tuple,
                   interval_of: Callable[[str], float]) -> list | None:
    """A record's values (`lv`, the kernel's level tuple) into the windows of its level
    rules (`windows`: (rule id, series) -> LevelState, created here): those whose series
    is off its own level now, as (catalogue place, rule, windows, the dict of the rule's
    features present), or None."""
    off = None
    for j, rule in enumerate(plan.rules):
        v = lv[j]
        if v is None:
            continue
        key = (rule.id, series)
        st = windows.get(key)
        if st is None:
            st = windows[key] = LevelState()
        if observe(st, rule.level, ts, float(v), interval_of, series):
            off = off or []
            off.append((plan.places[j], rule, st, {name: lv[k] for name, k in plan.reads[j] if lv[k] is not None}))
    return off
