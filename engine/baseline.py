"""A series' level against its own past: the windowed test of a `level` rule.

Gray faults stay under every absolute threshold a healthy fabric also crosses (an optic
ageing from 10 to 300 corrected FEC frames/s, where a healthy one may sit flat at
100,000; a PCIe stall share one or two points above a NIC's usual one; a storage target
at twice its own latency). What marks them is a series leaving its own level and
staying away, so a `level` rule (rules.schema.Level) compares the median of the last
`recent_s` with the median of the `baseline_s` before that (or the same lower quantile
of both windows), in seconds of event time:

- Samples are averaged into buckets of `bucket_s` (a counter's rate already averages
  its interval), and the medians are over buckets: one sample at 10 s or 30 s polling,
  ten 1 s samples at 1 s polling. A median ignores a blip (a 1-3 s stall, one bad
  sample): it moves only when most of the window moved, which is what "persists" means
  in contract section 8, at any interval.
- The windows stretch to at least `min_samples` samples of the series' interval (30 s
  polling needs 90 s for three); the recent window is judged only once the series' data
  covers it (a median of a series' first few buckets is a burst's), and the baseline
  only once half of it is covered: a series must have a past before it can leave it. A
  comparison with a baseline needs more: `compare_samples` (12) in the recent window
  and twice that in the baseline, whatever the interval (6 min and 12 min at 30 s
  polling; nothing changes at 1 s), because two medians of a few noisy samples differ
  by chance.
- The verdict is taken when a bucket closes and holds for the records until the next.
- Opening needs the sustained level; clearing needs only the newest data back within
  bounds: a verdict ends once every bucket covering the last `SETTLE_S` seconds of
  event time is (two buckets at 1-10 s polling, the newest sample at 30-60 s), not
  when the recent median has let go of the fault (half its window later). The settle
  time is the hysteresis: a fault that eases for less than it keeps its verdict.

Pure: no clock, no I/O; its state is a checkpointable `LevelWire`.
"""
from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Callable

import msgspec

from rules.schema import Level

# Seconds of event time of data back within bounds that end a verdict (module docstring).
SETTLE_S = 20.0


def quantile(s: list[float], q: float) -> float:
    """The q-quantile of the sorted list s, linear between order statistics (q 0.5: the
    median)."""
    at = q * (len(s) - 1)
    lo = math.floor(at)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (at - lo)


class LevelWire(msgspec.Struct, frozen=True, array_like=True):
    bucket: int
    total: float
    count: int
    last: float
    times: list[float]
    values: list[float]
    verdict: bool
    recent: float | None
    baseline: float | None


@dataclass(slots=True)
class LevelState:
    """One series under one level rule: the open bucket, the closed ones still inside the
    windows (`times`: each one's last sample's time, ascending; `values`: its mean), and
    the last verdict."""

    bucket: int = -1
    total: float = 0.0
    count: int = 0
    last: float = float("-inf")
    times: list = field(default_factory=list)
    values: list = field(default_factory=list)
    verdict: bool = False
    recent: float | None = None
    baseline: float | None = None

    def to_wire(self) -> LevelWire:
        return LevelWire(self.bucket, self.total, self.count, self.last, list(self.times),
                         list(self.values), self.verdict, self.recent, self.baseline)

    @classmethod
    def from_wire(cls, w: LevelWire) -> "LevelState":
        if len(w.times) != len(w.values):
            raise ValueError("a level rule's checkpointed windows have times and values of different lengths")
        return cls(w.bucket, w.total, w.count, w.last, list(w.times), list(w.values),
                   w.verdict, w.recent, w.baseline)


def windows(level: Level, interval: float) -> tuple[float, float]:
    """The recent and baseline windows (s) at sample interval `interval`. A window
    compared with a baseline also holds `compare_samples` samples (the baseline twice
    as many): at 30 s polling a median of 6 samples of a clean NIC's PCIe stall share
    against one of 10 rose by the rule's 0.9 points about once in 10,000 judgements
    (33 incidents in 9 h of a clean 260-NIC fabric), of 12 against 24 never in 300,000."""
    floor = level.min_samples * interval
    recent, baseline = max(level.recent_s, floor), max(level.baseline_s, floor)
    if level.needs_baseline:
        recent = max(recent, level.compare_samples * interval)
        baseline = max(baseline, 2 * level.compare_samples * interval)
    return recent, baseline


def observe(st: LevelState, level: Level, ts: float, value: float, interval_of: Callable[[str], float],
            series: str) -> bool:
    """One sample of `series` (event-time order): whether its level is off now. O(1) but
    when a bucket closes, which is the only time the series' interval (`interval_of`) is
    read and the windows' medians are taken; the verdict does not depend on `value`
    (it goes into the bucket just opened)."""
    b = math.floor(ts / level.bucket_s)
    if b != st.bucket:
        if st.count:
            st.times.append(st.last)
            st.values.append(st.total / st.count)
            _judge(st, level, ts, interval_of(series))
        st.bucket, st.total, st.count = b, 0.0, 0
    st.total += value
    st.count += 1
    st.last = ts
    return st.verdict


def _judge(st: LevelState, level: Level, now: float, interval: float) -> None:
    recent_s, baseline_s = windows(level, interval)
    cut, oldest = now - recent_s, now - recent_s - baseline_s
    times, values = st.times, st.values
    drop = bisect_right(times, oldest)
    if drop:
        del times[:drop], values[:drop]
    split = bisect_right(times, cut)  # values[:split] the baseline, values[split:] the recent window
    st.verdict, st.baseline = False, None
    if not times or times[0] > cut + max(level.bucket_s, interval):
        st.recent = None  # a series younger than its recent window: a median of its first
        return  # seconds is a burst's (a checkpoint at the start of a replay), not a level
    st.recent = quantile(sorted(values[split:]), level.quantile) if len(values) - split >= level.min_samples else None
    if st.recent is None:
        return
    if level.needs_baseline:
        if split < level.min_samples or times[0] > cut - baseline_s / 2:
            return  # no past yet (or too little of it) to leave
        st.baseline = quantile(sorted(values[:split]), level.quantile)
    st.verdict = level.holds(st.recent, st.baseline) and not _settled(level, times, values, st.baseline)


def _settled(level: Level, times: list, values: list, baseline: float | None) -> bool:
    """Whether the newest buckets covering SETTLE_S of event time (a bucket covers the
    time since the one before it closed) are all within the rule's bounds."""
    edge = times[-1] - SETTLE_S
    for k in range(len(times) - 1, -1, -1):
        if level.holds(values[k], baseline):
            return False
        if k and times[k - 1] <= edge:
            return True
    return True


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
