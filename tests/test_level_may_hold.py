"""engine.baseline's shortcut: `_may_hold` rejects a comparison from the windows' extremes
before their quantiles are sorted out. It must reject only what `Level.holds` would:
series by series, sample by sample, the verdicts and the medians a symptom carries are
those of the same windows judged without it, for every shipped level rule and for rules
with every kind of bound, at any interval."""
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
    verdict holds (a symptom reads them only then)."""
    st_, out = LevelState(), []
    for ts, v in samples:
        off = observe(st_, level, ts, v, lambda _s: interval, "s")
        out.append((off, st_.recent, st_.baseline) if off else (off,))
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
    kept = baseline._may_hold
    baseline._may_hold = lambda *a: True
    try:
        full = run(level, samples, interval)
    finally:
        baseline._may_hold = kept
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
