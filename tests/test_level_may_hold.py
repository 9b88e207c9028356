"""engine.baseline's shortcut: `_may_hold` rejects a comparison from the windows' extremes
before their quantiles are sorted out (`_may_pass`), and a series found calm is not judged
again while the extremes of its buckets since cannot pass either (`LevelState.calm`). It
must reject only what `Level.holds` would: series by series, sample by sample, the
verdicts and the medians a symptom carries are those of the same windows judged without
it, for every shipped level rule and for rules with every kind of bound, at any interval
(and with the interval changing under a calm series)."""
from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import engine.baseline as baseline
from engine.baseline import LevelState, observe
from rules.loader import load_rules
from rules.schema import Level

SHIPPED = [r.level for r in load_rules(None).rules if r.level is not None]
OWN = [Level(feature="x", above=5.0), Level(feature="x", ratio=2.0), Level(feature="x", rise=3.0),
       Level(feature="x", ratio=1.5, rise=1.0, above=2.0, quantile=0.25),
       Level(feature="x", ratio=0.5), Level(feature="x", bucket_s=1.0, recent_s=10, baseline_s=30, ratio=3)]


def run(level: Level, samples: list[tuple[float, float]], interval: float) -> list:
    """(verdict, recent, baseline) after every sample; recent and baseline only where the
    verdict holds (a symptom reads them only then). A calm series' extremes hold every
    bucket kept."""
    st_, out = LevelState(), []
    for ts, v in samples:
        off = observe(st_, level, ts, v, lambda _s: interval, "s")
        out.append((off, st_.recent, st_.baseline) if off else (off,))
        if st_.calm and st_.ranks is None:
            assert st_.lo <= min(st_.values) and max(st_.values) <= st_.hi and len(st_.values) <= st_.cap
    return out


# A level (a healthy floor), noise around it, and a step (times the floor, plus some) at a sample:
# what gray faults and healthy series look like, from all-zero to a high flat floor.
series = st.tuples(st.sampled_from([0.0, 0.5, 3.0, 100.0, 1e5]), st.sampled_from([0.0, 0.1, 1.0, 30.0]),
                   st.sampled_from([0.0, 1.0, 2.0, 5.0, 100.0]), st.floats(0, 8), st.integers(0, 400),
                   st.lists(st.floats(-1, 1), min_size=400, max_size=400))


@pytest.mark.parametrize("level", SHIPPED + OWN, ids=lambda lv: f"{lv.feature}-{lv.ratio}-{lv.rise}-{lv.above}")
@pytest.mark.parametrize("interval", [1.0, 10.0, 30.0])
@settings(max_examples=25, deadline=None)
@given(s=series)
def test_the_shortcut_changes_no_verdict(level, interval, s):
    floor, noise, times, plus, at, draws = s
    samples = [(1764400000 + k * interval, max(0.0, floor + noise * d + (floor * times + plus if k >= at else 0.0)))
               for k, d in enumerate(draws)]
    fast = run(level, samples, interval)
    kept = baseline._may_pass
    baseline._may_pass = lambda *a: True
    try:
        full = run(level, samples, interval)
    finally:
        baseline._may_pass = kept
    assert fast == full


def test_the_shortcut_rejects_a_flat_series_and_keeps_a_step():
    """It does reject (else it buys nothing): a flat zero against every bound kind; and a
    step that passes the bounds is not rejected."""
    lv = Level(feature="x", ratio=2.0, rise=1.0)
    values = [0.0] * 36
    assert not baseline._may_hold(lv, values, 0, 24)
    assert not baseline._may_hold(replace(lv, ratio=0.0), values, 0, 24)
    assert not baseline._may_hold(Level(feature="x", above=1.0), values, 0, 24)
    assert baseline._may_hold(lv, [1.0] * 24 + [5.0] * 12, 0, 24)


def test_a_calm_series_is_judged_only_when_its_extremes_could_pass(monkeypatch):
    """At 10 s polling every sample closes a bucket. A series far from its rule's bounds
    is judged once, then stays calm (its buckets only widen extremes that still cannot
    pass) until `cap` buckets are kept; buckets that could pass are judged, each one."""
    judged = []
    full = baseline._judge
    monkeypatch.setattr(baseline, "_judge", lambda st_, level, now, interval: (judged.append(now),
                                                                               full(st_, level, now, interval)))
    level = Level(feature="x", recent_s=60, above=2000.0)
    t0 = 1764400000
    quiet = [(t0 + 10 * k, 100.0 + (k * 37) % 50) for k in range(300)]
    run(level, quiet, 10.0)
    assert 0 < len(judged) <= 300 / 4  # (a full judgement when `cap` buckets are kept)
    judged.clear()
    out = run(level, quiet[:200] + [(t0 + 10 * k, 5000.0) for k in range(200, 210)], 10.0)
    # (its first bucket breaks the calm; its second cannot move the median of six: skipped by the
    # order statistics of the judgement before; from the third on the median may pass)
    assert [t for t in judged if t > t0 + 10 * 200] == [t0 + 10 * k for k in (201, *range(203, 210))]
    assert [o[0] for o in out[-8:]] == [False] + [True] * 7  # (off from its third bucket on)


@pytest.mark.parametrize(("interval", "first_off"), [(10.0, 509), (30.0, 503)])
def test_a_noisy_series_far_from_its_bounds_is_judged_now_and_then(monkeypatch, interval, first_off):
    """A NIC's PCIe stall share spreads over more than the rule's 0.9-point rise in eight
    minutes, so its extremes never leave it calm; its medians stand far apart from passing,
    and the order statistics of one judgement rule out the next several buckets'. At 30 s
    polling the rule's own windows hold 6 buckets against 10, whose order statistics
    loosen by a rank with every bucket: there the windows' own quantiles, sorted without
    a judgement, rule them out (`_sorted_calm`; without it, 586 of 600 judged), and the
    windows so sorted are where the next buckets' bounds start (without that, 678 sorts
    of 600 buckets at 30 s and 224 at 10 s; 202 and 38 with it)."""
    judged, sorts = [], []
    full, sort = baseline._judge, baseline._sorted_calm
    monkeypatch.setattr(baseline, "_judge", lambda st_, level, now, interval: (judged.append(now),
                                                                               full(st_, level, now, interval)))
    monkeypatch.setattr(baseline, "_sorted_calm", lambda *a: (sorts.append(1), sort(*a))[1])
    level = next(lv for lv in SHIPPED if lv.feature == "pci_stall")
    t0, spread = 1764400000, [((k * 7919) % 101) / 100 for k in range(600)]  # (0-1: wider than the rise)
    out = run(level, [(t0 + interval * k, 1.0 + spread[k]) for k in range(600)], interval)
    assert max(spread) - min(spread) > level.rise and not any(o[0] for o in out)
    assert 0 < len(judged) <= 600 / 3 and len(sorts) <= 600 / 2
    judged.clear()  # a step of 3 points at bucket 500: off once half the recent window is up, as ever
    out = run(level, [(t0 + interval * k, 1.0 + spread[k] + (3.0 if k >= 500 else 0.0)) for k in range(600)],
              interval)
    assert [k for k, o in enumerate(out) if o[0]][0] == first_off


@pytest.mark.parametrize("level", SHIPPED + OWN[:3], ids=lambda lv: f"{lv.feature}-{lv.ratio}-{lv.rise}-{lv.above}")
@settings(max_examples=60, deadline=None)  # (800 each found nothing more)
@given(s=series, first=st.sampled_from([1.0, 5.0, 10.0, 30.0]), then=st.sampled_from([1.0, 5.0, 10.0, 30.0]),
       change=st.integers(0, 400), gaps=st.lists(st.integers(0, 399), max_size=8))
def test_the_shortcut_changes_no_verdict_when_the_interval_changes(level, s, first, then, change, gaps):
    """The same, with the series' interval changing at a sample (a collector set to poll
    slower or faster: the windows grow or shrink under a calm series) and missed samples."""
    floor, noise, times, plus, at, draws = s
    samples, ts = [], 1764400000.0
    for k, d in enumerate(draws):
        ts += first if k < change else then
        if k not in gaps:
            samples.append((ts, max(0.0, floor + noise * d + (floor * times + plus if k >= at else 0.0))))
    switch = 1764400000.0 + first * change

    def run_(level):
        st_, out = LevelState(), []
        for t, v in samples:
            off = observe(st_, level, t, v, lambda _s: first if t <= switch else then, "s")
            out.append((off, st_.recent, st_.baseline) if off else (off,))
        return out

    fast = run_(level)
    kept = baseline._may_pass
    baseline._may_pass = lambda *a: True
    try:
        full = run_(level)
    finally:
        baseline._may_pass = kept
    assert fast == full
