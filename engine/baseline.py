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
- The recent window stretches to at least `min_samples` (5) closed buckets, the
  baseline to `BASELINE_MIN` (3) samples (55 s at 1-10 s polling: a window of n x I
  holds n - 1, the n-th falls on its edge; at polling slower than every 20 s three
  samples, (3 + 1/2) x 30 s = 105 s at 30 s: `recent_min`). A blip of
  a few seconds lands in two buckets at most, the one it starts in and the next, and
  lifts both: a median of three buckets was the blip's (a 3 s storage pause at 23x
  across two 10 s samples opened `storage_slow`), a median of five ignores it. One
  missed sample does not shorten the windows: a window it leaves one bucket short reaches
  back to the bucket before its edge; the
  recent window is judged only once the series' data covers it (a median of a series'
  first few buckets is a burst's). A comparison with a baseline holds its bounds when
  the windows hold `compare_samples` (12) buckets and twice that, the baseline at least
  half covered (6 min and 12 min at 30 s polling; nothing changes at 1 s), because two
  medians of a few noisy samples differ by chance. With fewer (a series' first minutes,
  or the rule's own windows where the stretch made them longer) it is judged too, down
  to `min_samples` buckets in each, with bounds raised as the spread of a difference of
  medians grows, sqrt(1/n + 1/m) against sqrt(1/12 + 1/24) (`strictness`): a shift
  far beyond the noise is found in minutes at 30 s polling, a marginal one waits for
  the full windows, and the chance that noise passes stays that of the full windows.
  A series whose own noise (read bucket to bucket) is a small part of the shift shows
  it is not that noisy, and is judged with the rule's bounds as they are (`beyond_noise`).
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
from statistics import NormalDist
from typing import Callable

import msgspec

from engine import level_bounds
from rules.schema import Level

# Seconds of event time of data back within bounds that end a verdict (module docstring).
SETTLE_S = 20.0
# A shift this many times the spread its quantiles' difference has under the series' own
# noise is no chance (`beyond_noise`): a one-sided normal tail of 1e-9 per judgement, so
# that a robust spread taken from a dozen samples and tails heavier than normal leave room.
NOISE_Z = 6.0
# Buckets a baseline holds at least (a recent window: the rule's `min_samples`, five: a
# blip touches two buckets at most, and a median of three was the blip's). A blip in a
# baseline only lowers what a comparison finds.
BASELINE_MIN = 3
# A fault that matters lasts a minute or more: the recent window asks for `min_samples`
# buckets only while three of them span no more (`recent_min`).
FAULT_S = 60.0
_NORMAL = NormalDist()


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
    # The windows at the interval last judged at (`_windows_at`): (interval, windows(),
    # nominal()); derived, so neither checkpointed nor forgotten on restart.
    spans: tuple | None = None
    # `calm`: the last judgement found that no window could pass the rule's bounds from
    # the extremes of every bucket kept, `hi` and `lo` (`_may_pass`). A bucket that
    # closes then widens them (when it lies outside), and while they still cannot pass
    # the series stays calm, unjudged and its old buckets kept (up to `cap`): the windows
    # judged would only have lost buckets, which narrows their extremes; `floor` is the
    # time up to which they would have lost them (its windows at each bucket's interval).
    # Derived, so not checkpointed (a restored series is judged in full at its next bucket).
    calm: bool = False
    hi: float = 0.0
    lo: float = 0.0
    cap: int = 0
    floor: float = 0.0
    # `ranks`: a calm series skipped by the order statistics of its last comparisons' sorted
    # windows (engine.level_bounds), not by its extremes: (n, lo, split, recent, baseline) of
    # the windows, and of the rule's own where they were stretched (or None); each as its
    # last judgement sorted it, or a later bucket's check that sorted it (`_sorted_calm`).
    ranks: tuple | None = None

    def restart(self) -> None:
        """Forget the windows (in place: the compiled kernel holds this object). The
        series' past was measured while its link was down (no frames, no codewords, no
        stalls): it is no level for the link that comes back to leave."""
        self.bucket, self.total, self.count, self.last = -1, 0.0, 0, float("-inf")
        self.times, self.values = [], []
        self.verdict, self.recent, self.baseline = False, None, None
        self.calm, self.ranks = False, None

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
    recent, baseline = nominal(level, interval)
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
            v = st.total / st.count
            st.times.append(st.last)
            st.values.append(v)
            interval = interval_of(series)
            if not (st.calm and len(st.values) < st.cap and _still_calm(st, level, v, ts, interval)):
                _judge(st, level, ts, interval)
        st.bucket, st.total, st.count = b, 0.0, 0
    st.total += value
    st.count += 1
    st.last = ts
    return st.verdict


def _still_calm(st: LevelState, level: Level, v: float, now: float, interval: float) -> bool:
    """Whether a calm series' verdict is still off without judging it: from the extremes
    of its buckets (`v` the newest), or from its last comparisons' order statistics, or
    from its windows' own quantiles where those may pass. If so, `floor` moves to where
    the judgement skipped would have dropped old buckets."""
    _, wins, short = _windows_at(st, level, interval)
    if st.ranks is not None:
        wide, own = st.ranks
        pairs = ((*wins, wide), (*short, own or wide)) if _stretched(level, wins, short) else ((*wins, wide),)
        found = level_bounds.bounds(pairs, st.times, now, interval, st.floor, recent_min(level, interval), BASELINE_MIN, level.quantile,
                                    level.needs_baseline)
        if found is None:
            return False
        for top, bottom, lo, split, k in found:
            if _may_pass(level, top, bottom):
                ranks = _sorted_calm(level, st.values, lo, split)
                if ranks is None:
                    return False
                if k:
                    own = ranks
                else:
                    wide = ranks
        st.ranks = (wide, own)
    else:
        hi, lo = (v if v > st.hi else st.hi), (v if v < st.lo else st.lo)
        if _may_pass(level, hi, lo):
            return False
        st.hi, st.lo = hi, lo
    edge = now - wins[0] - wins[1]
    if edge > st.floor:
        st.floor = edge
    return True


def _sorted_calm(level: Level, values: list, lo: int, split: int) -> tuple | None:
    """Where the order statistics' bounds of a comparison may pass: its windows sorted
    (values[split:] the recent one, values[lo:split] its baseline) and their quantiles
    put to `_may_pass`. None when they may pass (the bucket is judged); else the sorted
    windows, as `_compare` keeps them (`LevelState.ranks`), so that the next buckets'
    bounds start from them. A noisy series at 30 s polling compares its rule's own
    windows, 6 buckets against 10, whose bounds loosen by a rank with every bucket;
    `Level.holds` passes no quantiles `_may_pass` refuses."""
    ranks = _sorted_windows(level, values, lo, split)
    _, _, _, recent, past = ranks
    q = level.quantile
    if _may_pass(level, quantile(recent, q), quantile(past, q) if past is not None else 0.0):
        return None
    return ranks


def _sorted_windows(level: Level, values: list, lo: int, split: int) -> tuple:
    """A comparison's windows sorted, as `LevelState.ranks` keeps them: (n, lo, split,
    the recent window values[split:], its baseline values[lo:split] or None without one)."""
    return len(values), lo, split, sorted(values[split:]), sorted(values[lo:split]) if level.needs_baseline else None


def _windows_at(st: LevelState, level: Level, interval: float) -> tuple:
    """(windows(), nominal()) at `interval`, computed once per series and interval (a
    series' interval changes rarely; a bucket closes on every sample at 10 s polling)."""
    spans = st.spans
    if spans is None or spans[0] != interval:
        spans = st.spans = (interval, windows(level, interval), nominal(level, interval))
    return spans


def _judge(st: LevelState, level: Level, now: float, interval: float) -> None:
    _, (recent_s, baseline_s), short = _windows_at(st, level, interval)
    cut, oldest = now - recent_s, now - recent_s - baseline_s
    if st.calm and st.floor > oldest:  # (the buckets a calm series kept that judgements would
        oldest = st.floor  # have dropped: its windows may have grown since, with its interval)
    times, values = st.times, st.values
    drop = bisect_right(times, oldest)
    if drop:
        del times[:drop], values[:drop]
    st.verdict, st.baseline, st.recent, st.calm, st.ranks = False, None, None, False, None
    if not times:
        return
    hi, lo = max(values), min(values)
    if not _may_pass(level, hi, lo):  # (no window the comparisons below take can pass: all inside these)
        st.hi, st.lo = hi, lo
        _calm(st, oldest)
        return
    _compare(st, level, now, recent_s, baseline_s, interval, True)
    if not st.verdict and _stretched(level, (recent_s, baseline_s), short):
        _compare(st, level, now, short[0], short[1], interval, False)  # (a large shift need not wait)
    if not st.verdict and st.ranks is not None:  # (calm by the order statistics the comparison sorted)
        _calm(st, oldest)


def _stretched(level: Level, wins: tuple, short: tuple) -> bool:
    """Whether a judgement compares the rule's own windows too (`nominal`), beside the
    windows stretched to `compare_samples` (`windows`)."""
    return level.needs_baseline and short != wins


def _calm(st: LevelState, oldest: float) -> None:
    """The series is calm from this judgement on; it keeps at most a quarter more buckets
    than its windows hold (memory, checkpoints)."""
    st.calm, st.floor, st.cap = True, oldest, len(st.values) + 4 + len(st.values) // 4


def recent_min(level: Level, interval: float) -> int:
    """Buckets the recent window holds at least: the rule's `min_samples` (five: a blip
    of a few seconds lifts two buckets at most, and a median of three was the blip's),
    but three where three buckets span more than `FAULT_S` (polling slower than every
    20 s). There the median of five waited for a third sample of a fault: a 78 s storage
    slowdown at 30 s polling filled two and a half and was missed (tune-wide
    storage_slow-20, `--intervals 5,30`), where a 3 s blip is a tenth of each sample it
    touches and doubles neither unless the storage was 21 times slower."""
    b = max(interval, level.bucket_s)
    return level.min_samples if BASELINE_MIN * b <= FAULT_S else min(level.min_samples, BASELINE_MIN)


def nominal(level: Level, interval: float) -> tuple[float, float]:
    """The rule's own windows, stretched only to hold `min_samples` buckets (recent; a
    bucket is one sample at polling slower than `bucket_s`) and `BASELINE_MIN` samples."""
    return (max(level.recent_s, span(recent_min(level, interval), max(interval, level.bucket_s))),
            max(level.baseline_s, span(BASELINE_MIN, interval)))


def span(samples: int, interval: float) -> float:
    """Seconds a window needs to hold `samples` closed buckets of a series sampled every
    `interval` s: a window (now - w, now] judged as a sample arrives holds the buckets
    closed before it, so w = n x I holds n - 1 of them (the n-th falls on its edge), and
    jitter moves the edge by up to half an interval."""
    return (samples + 0.5) * interval


def strictness(level: Level, n: float, m: float) -> float:
    """How much a comparison of the medians of n recent and m baseline samples must
    exceed the rule's bounds to be as unlikely by chance as one of `compare_samples`
    against twice as many: the spread of a difference of two medians goes with
    sqrt(1/n + 1/m). Never below 1: more samples than that do not loosen a bound."""
    c = level.compare_samples
    return max(1.0, math.sqrt((1 / n + 1 / m) / (1 / c + 1 / (2 * c))))


def _compare(st: LevelState, level: Level, now: float, recent_s: float, baseline_s: float, interval: float,
             half: bool) -> None:
    """One comparison of the recent window with the baseline before it. Its bounds are
    the rule's when the windows hold `compare_samples` and twice that (`half`: a
    baseline half covered is enough); with fewer samples (a series' first minutes at
    long intervals, or the rule's own windows where they hold fewer) they scale with
    what the windows hold (`strictness`), down to `min_samples` in each."""
    times, values = st.times, st.values
    cut = now - recent_s
    lo = bisect_right(times, cut - baseline_s)
    split = bisect_right(times, cut)  # values[lo:split] the baseline, values[split:] the recent window
    if lo == len(times) or times[lo] > cut + max(level.bucket_s, interval):
        return  # a series younger than its recent window: a median of its first seconds is a
        # burst's (a checkpoint at the start of a replay), not a level
    least = recent_min(level, interval)
    if len(values) - split < least:
        # One missed sample (contract section 1) leaves a window stretched to
        # `min_samples` one bucket short: it then reaches back to the bucket before its
        # edge, closed within an interval of it, instead of breaking a verdict's run.
        if len(values) - split + 1 < least or split == 0 or times[split - 1] <= cut - interval:
            return
        split -= 1
    if level.needs_baseline and split - lo < BASELINE_MIN:
        return  # no past yet (or too little of it) to leave
    if not _may_hold(level, values, lo, split):
        return
    sorted_ = _sorted_windows(level, values, lo, split)
    _, _, _, ordered, past = sorted_
    recent, baseline, strict = quantile(ordered, level.quantile), None, 1.0
    if past is not None:
        baseline = quantile(past, level.quantile)
        if not (half and times[lo] <= cut - baseline_s / 2):
            strict = strictness(level, len(values) - split, split - lo)  # in buckets: at 1 s a
            # bucket's ten samples are not ten independent ones
    st.ranks = (sorted_, None) if half else (st.ranks[0], sorted_) if st.ranks is not None else None
    if st.recent is None:
        st.recent, st.baseline = recent, baseline
    if strict > 1.0 and beyond_noise(level, values[lo:split], values[split:], recent, baseline):
        strict = 1.0  # the shift is far beyond the series' own noise: the rule's bounds as they are
    if level.holds(recent, baseline, strict) and not _settled(level, times[lo:], values[lo:], baseline, strict):
        st.verdict, st.recent, st.baseline = True, recent, baseline


def _may_hold(level: Level, values: list, lo: int, split: int) -> bool:
    """False when no quantile of the windows can pass the rule's bounds, from the recent
    window's (`values[split:]`) largest bucket and the baseline's (`values[lo:split]`)
    smallest alone (a quantile lies between them; `strictness` only raises the bounds);
    lo = split = 0 asks it of every bucket kept, which holds every window compared.
    Most series of a healthy fabric sit far from every bound: this spares them the
    comparisons, and sorting their windows, on every closed bucket (a third of a replay
    at 10 s polling before); with `LevelState.calm`, most of their closed buckets are not
    even judged. Exact: it only rejects what `Level.holds` would."""
    if level.above is None and not level.needs_baseline:
        return True
    return _may_pass(level, max(values[split:]), min(values[lo:split] if split > lo else values))


def _may_pass(level: Level, top: float, floor: float) -> bool:
    """`_may_hold` from the recent window's largest bucket and the baseline's smallest."""
    if level.above is not None and top < level.above:
        return False
    if level.needs_baseline:
        if level.rise > 0 and top - floor < level.rise:
            return False
        if level.ratio >= 1 and floor >= 0 and top < level.ratio * floor:
            return False
    return True


def beyond_noise(level: Level, past: list, now: list, recent: float, baseline: float | None) -> bool:
    """Whether the recent window's level stands above the baseline's by `NOISE_Z` times
    the spread the difference of the two quantiles has under the series' own noise.
    `strictness` raises a rule's bounds for short windows as if every series were as noisy
    as the noisiest the rule allows for; a series whose noise is a small part of its shift
    (corrected FEC averaged over 30 s samples) shows that it is not, and its rule's own
    bounds then hold as they are. The noise is read from one bucket to the next (1.4826 x
    the median absolute deviation of successive differences, over sqrt 2): a slow creep
    moves each step by its slope, which the median takes out, where the spread of the
    windows' values would count the creep itself as noise. A q-quantile of n samples
    spreads by sqrt(q (1 - q)) / pdf(q) / sqrt(n) of it (1.25 for the median).
    The spread is read from `compare_samples` steps at least (NOISE_Z leaves room for a
    dozen): from fewer, chance makes it small too often (docs/design.md, "Gray faults")."""
    series = past + now  # in time order
    if baseline is None or len(past) < 2 or len(now) < 2 or len(series) <= level.compare_samples:
        return False
    steps = [b - a for a, b in zip(series, series[1:])]
    q = level.quantile
    width = math.sqrt(q * (1 - q)) / _NORMAL.pdf(_NORMAL.inv_cdf(q))
    noise = 1.4826 * _mad(steps) / math.sqrt(2)
    return recent - baseline >= NOISE_Z * width * noise * math.sqrt(1 / len(now) + 1 / len(past))


def _mad(values: list) -> float:
    """The median absolute deviation from the median."""
    mid = quantile(sorted(values), 0.5)
    return quantile(sorted(abs(v - mid) for v in values), 0.5)


def _settled(level: Level, times: list, values: list, baseline: float | None, strict: float = 1.0) -> bool:
    """Whether the newest buckets covering SETTLE_S of event time (a bucket covers the
    time since the one before it closed) are all within the rule's bounds."""
    edge = times[-1] - SETTLE_S
    for k in range(len(times) - 1, -1, -1):
        if level.holds(values[k], baseline, strict):
            return False
        if k and times[k - 1] <= edge:
            return True
    return True


def level_seeds(level: Level, st: LevelState, now: float) -> list[float]:
    """The times of the closed buckets, newest back, that are off on their own (each
    bucket's mean holds the rule's bounds against the verdict's baseline), stopping at the
    first that is not: at a verdict's start, the samples that already showed the shift.
    A median of a recent window turns only once most of it moved, which at 30 s polling is
    two or three samples after the first off one; counting those as hits is what keeps a
    for_s rule from waiting that long again (a 75 s slow storage target polled every 30 s
    was never found: its median turned one sample before the fault ended)."""
    out: list[float] = []
    times, values = st.times, st.values
    # One bucket judged alone is a comparison of one recent sample: held to the bounds
    # that make it as unlikely by chance as the full windows (`strictness`), against a
    # baseline of the windows' size (a noisy gauge's single high reading is no seed).
    strict = strictness(level, 1, 2 * level.compare_samples) if level.needs_baseline else 1.0
    for k in range(len(times) - 1, -1, -1):
        if times[k] >= now or not level.holds(values[k], st.baseline, strict):
            break
        out.append(times[k])
    out.reverse()
    return out
