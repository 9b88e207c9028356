"""Typed rule objects. YAML is validated once into these (see `rules.loader`)."""
from __future__ import annotations

import operator
from dataclasses import dataclass, field

from contract.entities import ENTITY_KINDS  # noqa: F401  (what a rule may name as its entity_kind)
from contract.measurements import MEASUREMENTS

OPS = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
}


@dataclass(frozen=True, slots=True)
class Condition:
    feature: str
    op: str
    value: float | str

    def holds(self, features: dict) -> bool:
        v = features.get(self.feature)
        if v is None:
            return False
        if isinstance(self.value, str) != isinstance(v, str):
            return False
        if v.__class__ is bool:  # a boolean is not a number (as the compiled kernel reads it)
            return False
        return OPS[self.op](v, self.value)

    def __str__(self) -> str:
        value = f'"{self.value}"' if isinstance(self.value, str) else f"{self.value:g}"
        return f"{self.feature} {self.op} {value}"


@dataclass(frozen=True, slots=True)
class Level:
    """A `level` rule's test (engine.baseline): the `quantile` (default the median) of
    `feature` over the last `recent_s` seconds of event time against the same quantile
    of the `baseline_s` before it. It holds when every bound given holds: recent >= `above`, recent >= `ratio` x
    baseline, recent - baseline >= `rise` (0 or None: not asked)."""

    feature: str
    recent_s: float = 60.0
    baseline_s: float = 300.0
    bucket_s: float = 10.0
    quantile: float = 0.5  # of both windows: lower is the level before a slow drift began,
    # and the same quantile of the recent window keeps a wide but flat noise from passing
    # for a shift (the median of a recent window against a past's lower quartile is a
    # ratio of the noise's width)
    # The recent window holds at least this many buckets (one sample at polling slower than
    # bucket_s; it stretches at long intervals): a blip of a few seconds touches two
    # buckets at most, and only a median of five or more ignores it; three where three
    # buckets span more than a minute (engine.baseline.recent_min: 30 s polling).
    min_samples: int = 5
    # Against a baseline, the recent window holds at least this many samples and the
    # baseline twice as many: two medians of a few samples of a noisy gauge differ by
    # chance (engine.baseline.windows).
    compare_samples: int = 12
    above: float | None = None
    ratio: float = 0.0
    rise: float = 0.0
    # Whether the rule compares with a baseline (a ratio or a rise): derived, kept as a field
    # because engine.baseline reads it at every closed bucket.
    needs_baseline: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "needs_baseline", self.ratio > 0 or self.rise > 0)

    def holds(self, recent: float, baseline: float | None, strict: float = 1.0) -> bool:
        """`strict` > 1 (engine.baseline.strictness: a comparison of fewer samples) raises
        the comparison's bounds: the rise and the ratio's excess over 1 times it (both
        bound the shift, whose spread it measures); `above` is no comparison and stays."""
        if self.above is not None and recent < self.above:
            return False
        if self.needs_baseline:
            ratio, rise = (self.ratio, self.rise) if strict == 1.0 else (1 + (self.ratio - 1) * strict, self.rise * strict)
            if baseline is None or recent < ratio * baseline or recent - baseline < rise:
                return False
        return True


@dataclass(frozen=True, slots=True)
class Rule:
    """A threshold rule on one measurement, judged in the sample interval `I` of the
    series it reads (engine.detect): raises a symptom when its condition is true in at
    least `need = max(hits, ceil(for_s / I) + 2)` samples (for_s > 0; one fewer for an `instant` rule) within max(within_s, (need + 1) x I)
    seconds, in a row for a for_s rule (a run breaks once the samples its condition
    misses pass a quarter of it); the symptom ends after max(clear_s, clear_samples x I) seconds without a
    hit. At 1 s sampling and `for_s` 0 that is `hits` within `within_s`, ending after
    `clear_s`. A rule with `count` (a counter's increase, `x_delta`) counts what the
    counter counts, not samples: its symptom starts once the increases of the samples its
    condition holds in add up to `hits` within max(within_s, 2 x I), one sample being
    enough (three carrier transitions are a flap whether one sample or three saw them)."""

    id: str
    symptom: str
    family: str
    measurement: str
    all: tuple[Condition, ...] = ()
    any: tuple[Condition, ...] = ()
    hits: int = 1
    within_s: float = 1.0
    clear_s: float = 5.0
    severity: float = 0.5
    opens_incident: bool = True
    # Loud evidence: the cause its symptom points at is credible as soon as it is raised
    # (engine/credible.py), the rule's own persistence (hits, for_s) being the wait.
    at_once: bool = False
    for_s: float = 0.0  # the condition must hold this long (event seconds), whatever the interval
    # The condition reads gauges, the state at the sample's instant (a queue's occupancy),
    # not a count over the interval: n samples then span (n - 1) x I of it, so one sample
    # fewer proves `for_s` (engine.detect.needed), once their times span `for_s`.
    instant: bool = False
    clear_samples: float = 3.0  # ... and the symptom lasts at least this many intervals past its last hit
    entity_kind: str = "interface"
    entity: str = ""  # template over tags and fields, e.g. "{host}:{interface}"
    source: str = ""  # file it came from, for messages
    report: tuple[str, ...] = ()  # extra features whose peaks the symptom carries as evidence
    # A level rule: its condition is only that `level.feature` is present; whether the
    # series left its own level is engine.baseline's (see Level).
    level: Level | None = None
    count: str = ""  # a counter's increase (`x_delta`): `hits` are counted in it, not in samples

    def matches(self, features: dict) -> bool:
        for c in self.all:
            if not c.holds(features):
                return False
        if self.any:
            for c in self.any:
                if c.holds(features):
                    return True
            return False
        return True

    @property
    def features(self) -> frozenset[str]:
        """Features the rule reads: its conditions' and those it reports."""
        return frozenset(c.feature for c in (*self.all, *self.any)) | frozenset(self.report) | frozenset(
            [self.count] if self.count else [])


@dataclass(frozen=True, slots=True)
class SilenceRule:
    """Raises a symptom on a device of the given roles that has sent no telemetry for
    max(after_s, after_intervals x its sample interval) seconds of event time while
    others did."""

    id: str
    symptom: str
    family: str
    roles: tuple[str, ...]
    after_s: float = 5.0
    after_intervals: float = 3.0
    severity: float = 0.8
    opens_incident: bool = True
    source: str = ""


@dataclass(frozen=True)
class RuleSet:
    rules: tuple[Rule, ...] = ()
    silence: tuple[SilenceRule, ...] = ()
    by_measurement: dict[str, tuple[Rule, ...]] = field(default_factory=dict)
    opening: dict[str, bool] = field(default_factory=dict)  # rule id -> may open an incident
    loud: frozenset[str] = frozenset()  # ids of the rules whose symptoms are credible at once (`at_once`)
    # ids of the rules that read an event measurement (wjh_drop, link_event: no counters, a
    # record is one event): their symptoms are evidence at their events' instants, not over
    # the time between two events (engine/credible.py)
    events: frozenset[str] = frozenset()

    @classmethod
    def of(cls, rules: list[Rule], silence: list[SilenceRule]) -> "RuleSet":
        by: dict[str, list[Rule]] = {}
        for r in rules:
            by.setdefault(r.measurement, []).append(r)
        opening = {r.id: r.opens_incident for r in (*rules, *silence)}
        events = frozenset(r.id for r in rules if r.measurement in MEASUREMENTS and not MEASUREMENTS[r.measurement].counters)
        return cls(tuple(rules), tuple(silence), {k: tuple(v) for k, v in by.items()}, opening,
                   frozenset(r.id for r in rules if r.at_once), events)

    def features_needed(self, measurement: str) -> frozenset[str]:
        out: set[str] = set()
        for r in self.by_measurement.get(measurement, ()):
            out |= r.features
        return frozenset(out)

    def opens_incident(self, rule_id: str) -> bool:
        """Derived symptoms (no rule of this set) may open incidents."""
        return self.opening.get(rule_id, True)
