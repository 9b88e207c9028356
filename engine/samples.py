"""A symptom's evidence over time: the values of the metric that drove it, as a bounded
series of (event time, value) samples.

A series never holds more than `CAP` points, however long the symptom lasts and whatever
its sample interval: when it would, `compact` keeps its first and its newest sample and,
of the others, the largest of each stretch of event time between them (the earliest of
equals), the stretches at most CAP // 2, as wide as a power of two of seconds, on a grid
from the first sample. So the peak, the first and the last point always survive, each
compaction leaves between about CAP // 4 and CAP // 2 points evenly spread over the
symptom's life, and a point costs O(1) amortised (a compaction of CAP points every
CAP // 2 or so appends).

The state is the list alone (no width or counter beside it), so a series written to a
checkpoint or a topic and read back continues exactly as the one that was never sent.
Pure: no clock, no I/O.
"""
from __future__ import annotations

import math

CAP = 120  # points per metric series of one symptom

Series = list[tuple[float, float]]


def add(series: Series, ts: float, value: float, cap: int = CAP) -> None:
    """Append the sample (ts, value) in event-time order. A sample at the time of the
    newest keeps the larger value; an older one is ignored (records arrive ordered)."""
    if series:
        last_ts = series[-1][0]
        if ts <= last_ts:
            if ts == last_ts and value > series[-1][1]:
                series[-1] = (ts, value)
            return
    series.append((ts, value))
    if len(series) > cap:
        compact(series, cap)


def compact(series: Series, cap: int = CAP) -> None:
    """Keep the first and last sample and the largest of each stretch of time between
    them, in place (the module's docstring says which stretches)."""
    first, last = series[0], series[-1]
    t0 = first[0]
    # A power of two of seconds, on a grid from the first sample: each compaction's
    # stretches are unions of the last one's, so points merge whole, never straddled.
    width = 2.0 ** math.ceil(math.log2((last[0] - t0) / max(1, cap // 2)))
    kept = [first]
    bucket = None
    for point in series[1:-1]:
        b = int((point[0] - t0) // width)
        if b == bucket:
            if point[1] > kept[-1][1]:
                kept[-1] = point
        else:
            kept.append(point)
            bucket = b
    kept.append(last)
    series[:] = kept


def copied(samples: dict[str, Series]) -> dict[str, Series]:
    """A copy that later samples of the original do not change (points are tuples)."""
    return {name: list(points) for name, points in samples.items()}


def display(samples: dict[str, Series]) -> dict[str, list[list[float]]]:
    """The served form: per metric, [[unix seconds, value], ...], rounded to ms and to the
    metrics' 3 decimals."""
    return {name: [[round(t, 3), round(v, 3)] for t, v in points] for name, points in sorted(samples.items())}


def interval(symptoms) -> float:
    """The sample interval the symptoms' evidence shows: the shortest gap between two
    successive samples of any of their series (a symptom's first samples are never
    compacted away), or 1 s when none has two."""
    gaps = [b[0] - a[0] for s in symptoms for series in s.samples.values() for a, b in zip(series, series[1:])]
    return min(gaps) if gaps else 1.0
