"""The long horizon's mean is robust to a blip (models.windows.Smoother): one wild window
lifts it by a few of its own scales at most, where the plain mean stood a dozen of them
up for a minute, and it still follows a step and a drift, also from a flat zero."""
from __future__ import annotations

import numpy as np

from models.catalogue import EWM_ALPHA, EWM_NOISE
from models.windows import Smoother


def _series(values, *, floor: float = 0.0, smoother: Smoother | None = None) -> list[float]:
    sm = smoother or Smoother()
    return [sm.row("stor1", [float(v)], [floor])[1] for v in values]


def _plain(values) -> list[float]:
    e, out = None, []
    for v in values:
        e = v if e is None else e + EWM_ALPHA * (v - e)
        out.append(e)
    return out


def test_a_storage_pause_in_two_windows_lifts_the_smoothed_mean_a_few_scales_not_a_dozen():
    """A target at 1 ms (window noise 0.05 ms), then a 3 s pause at 6x across two 5 s
    windows (1 + 5 x 1.5 / 5 = 2.5 ms each, 30 window scales): the horizon's scale is
    0.21 of a window's, and the plain mean stood 23 of them up, the robust one 3."""
    rng = np.random.default_rng(4)
    clean = list(1.0 + 0.05 * rng.standard_normal(200))
    values = clean[:100] + [2.5, 2.5] + clean[100:]
    scale = 0.05 * EWM_NOISE
    robust = (max(_series(values, floor=0.01)[100:]) - 1.0) / scale
    plain = (max(_plain(values)[100:]) - 1.0) / scale
    assert plain > 20 and robust < 4


def test_it_follows_a_step_and_a_drift():
    rng = np.random.default_rng(5)
    noise = 0.05 * rng.standard_normal(300)
    step = _series(1.0 + noise + np.where(np.arange(300) >= 100, 0.5, 0.0), floor=0.01)
    assert step[99] < 1.05 and step[125] > 1.25 and step[160] > 1.45  # half in 25 windows, all in 60
    drift = _series(1.0 + noise + np.clip((np.arange(300) - 100) / 200, 0, None), floor=0.01)
    lag = np.asarray(_plain(1.0 + noise + np.clip((np.arange(300) - 100) / 200, 0, None)))
    assert np.max(np.abs(np.asarray(drift[150:]) - lag[150:])) < 0.02  # a slow drift is never clipped


def test_a_flat_zero_series_that_starts_to_move_is_followed_from_its_floor():
    """A NIC whose PCIe stall share sat at exactly 0 has no step of its own to bound a
    window by: the catalogue's floor (0.01 points) does, and the bound widens by a sixth
    a window, so the mean follows a 2-point rise in 40 windows, not 8. The window horizon
    sees such a rise at once (its scale is that floor: z 200)."""
    values = [0.0] * 50 + [2.0] * 100
    got = _series(values, floor=0.01)
    assert got[49] == 0.0 and got[90] > 1.0 and got[149] > 1.9


def test_a_checkpoint_from_before_the_deviations_goes_on_from_its_means():
    """A checkpoint's smoothed state held the means alone: restored, the deviations start
    unknown (the next window is not clipped) and the means go on."""
    from models.windows import SmootherState

    sm = Smoother(alpha=0.5, warmup=1)
    sm.restore(SmootherState({"stor1": [1.0]}, {"stor1": 20}))
    assert sm.row("stor1", [3.0], [0.01]) == [3.0, 2.0]
    assert sm.state["stor1"] == [2.0, 2.0]  # the mean, then the first deviation
    assert sm.row("stor1", [100.0], [0.01])[1] == 2.0 + 0.5 * 3 * 2.0  # now bounded: 3 deviations
