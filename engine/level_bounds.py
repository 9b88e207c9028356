"""How far a level rule's quantiles can have moved since its windows were last sorted.

engine.baseline judges a level rule's windows at every closed bucket: at 10 s polling and
slower, every sample. A quiet series is skipped from its extremes alone (`LevelState.calm`);
a noisy one (a NIC's PCIe stall share, whose buckets spread over more than the rule's
0.9-point rise in eight minutes) was compared in full each time, its two windows sliced
and sorted, though its medians stood far apart from passing.

From the last comparison's sorted windows, the quantiles of the windows a later bucket's
comparison would take are bounded by order statistics, without sorting. The kept buckets
are not dropped between (a skipped series keeps them, as a calm one does), so a bucket's
index is its identity: the judged recent window is indices [split_j, n_j) and its
baseline [lo_j, split_j), and everything from n_j on closed since. A later window:

- recent, indices [split, n): its old buckets [split, n_j) are the judged recent window
  less the `removed` oldest; removing r values raises the j-th smallest to at most the
  (j + r)-th, and adding values (the new buckets) only lowers it, so the recent quantile
  is at most the judged window's order statistic `ceil(q (n_w - 1)) + r` (none past the
  judged window's end: unbounded);
- baseline, indices [lo, split): the judged baseline's buckets that remain, plus `moved`
  buckets that crossed from the judged recent window and `new` ones; its
  `floor(q (n_v - 1))`-th smallest is at least the judged baseline's
  `(floor(q (n_v - 1)) - moved - new)`-th (removing values only raises a rank's value;
  each value added lowers the ranks above it by one at most).

An interpolated quantile lies between its two order statistics, and `Level.holds` only
gets stricter with `strict`, so when no pair of bounds passes `_may_pass` no comparison
can (`tests/test_level_may_hold.py` binds the skip to the full comparison). Pure.
"""
from __future__ import annotations

import math
from bisect import bisect_right

INF = float("inf")


def bounds(windows: tuple, times: list, now: float, interval: float, floor: float, min_samples: int, past_min: int,
           q: float, baseline: bool) -> list | None:
    """(highest recent quantile, lowest baseline quantile, the windows' first indices (the
    baseline's, the recent one's), and the place of its pair in `windows`) of each
    comparison a judgement at `now` would make
    (`windows`: its (recent_s, baseline_s, ranks), `ranks` = (n_j, lo_j, split_j, recent
    sorted, baseline sorted) of the last judgement's comparison of those
    windows, or of wider ones; `floor`: where the judgement would drop old buckets up to);
    None when a window reaches past what was sorted (the interval grew, a missed sample
    stretched a window back), and the series must be judged. A comparison
    `engine.baseline._compare` would not make is left out."""
    n = len(times)
    out = []
    for k, (recent_s, baseline_s, (n_j, lo_j, split_j, recent, past)) in enumerate(windows):
        cut = now - recent_s
        split = bisect_right(times, cut)
        if n - split < min_samples:  # (as `_compare`: one bucket before the edge, or none)
            if n - split + 1 < min_samples or split == 0 or times[split - 1] <= cut - interval:
                continue
            split -= 1
        edge = cut - baseline_s
        lo = bisect_right(times, edge if edge > floor else floor)
        if baseline and split - lo < past_min:
            continue
        if split < split_j or lo < lo_j:
            return None
        old = n_j - split if n_j > split else 0  # the judged recent window's buckets still in this one
        j = math.ceil(q * (n - split - 1))
        top = recent[j + (n_j - split_j - old)] if j < old else INF
        bottom = 0.0
        if baseline:  # (split - split_j: buckets moved from the judged recent window, or new)
            i = int(q * (split - lo - 1)) - (split - split_j)
            bottom = past[i] if i >= 0 else -INF
        out.append((top, bottom, lo, split, k))
    return out
