"""A level rule's symptom ends when its series' newest data are back within bounds, not
when the recent median lets go of the fault (half its window later), and a fault that
eases for a few seconds keeps one symptom: a timeline at 1 s and at 10 s sampling."""
from __future__ import annotations

import random

import pytest

from engine.baseline import SETTLE_S
from engine.detect import Detector
from engine.types import Metric
from rules.loader import load_rules

T0 = 1764400000
RULES = load_rules(None)
RULE = "nic_pfc_tx_sustained"
BUCKET = next(r for r in RULES.rules if r.id == RULE).level.bucket_s
START, END, LENGTH = 120.0, 307.0, 500.0


def storm(interval: int, gap: tuple[float, float] = (0.0, 0.0)) -> list[Metric]:
    """A NIC paused 30 % of the time from START to END (but for `gap`), 40 us/s besides."""
    rng, dur, frames, out = random.Random(5), 0, 0, []
    for k in range(int(LENGTH) + 1):
        on = START <= k < END and not gap[0] <= k < gap[1]
        dur += int(300_000 * rng.uniform(0.9, 1.1)) if on else 40
        frames += 600 if on else 2
        if k % interval == 0:
            out.append(Metric("nic_port", {"host": "gpu1", "interface": "eth0"},
                              {"tx_prio3_pause": frames, "tx_prio3_pause_duration": dur, "tx_bytes": k * 10**9,
                               "link": "up"}, T0 + k, "nic_port|gpu1|eth0"))
    return out


def symptoms(metrics: list[Metric], interval: int) -> list[tuple[float, float]]:
    det = Detector(RULES, interval_of=lambda series: float(interval))
    out = []
    for m in metrics:
        det.process(m)
        det.advance(m.ts)
        out += [(s.start - T0, s.end - T0) for s in det.drain() if s.rule == RULE and s.end is not None]
    det.finish()
    return out + [(s.start - T0, s.end - T0) for s in det.drain() if s.rule == RULE and s.end is not None]


@pytest.mark.parametrize("interval", (1, 10))
def test_the_symptom_ends_within_a_bucket_and_the_settle_time_of_the_faults_end(interval):
    [(start, end)] = symptoms(storm(interval), interval)
    assert START <= start < START + 60  # it starts at the first off bucket (baseline.level_seeds)
    assert END - interval <= end <= END + BUCKET + SETTLE_S  # the median would have held ~30 s more


@pytest.mark.parametrize("interval", (1, 10))
def test_a_storm_easing_for_less_than_the_settle_time_keeps_one_symptom(interval):
    [(start, end)] = symptoms(storm(interval, gap=(200.0, 200.0 + SETTLE_S / 2)), interval)
    assert start < 200 and end >= END - interval
