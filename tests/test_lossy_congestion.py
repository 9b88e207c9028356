"""Loud congestion (rule port_congested_lossy, engine/credible.py "loud"): a busy egress
that marks ECN and drops (WRED) for 3 s on end is a fault at once; marks without loss
(collective phases), one drop, drops at a low load (a microburst's) and a short lossy
burst are not loud. Through the detect stage with the built-in catalogue, at 1, 5 and
10 s polling: the truth is a timeline whose counters are exact integrals, as in
tests/test_interval_invariance.py."""
from __future__ import annotations

import json

import pytest

from test_interval_invariance import T0, verdict

SPEED_MBPS = 100_000
LINE_RATE = SPEED_MBPS * 1e6 / 8  # bytes/s
LOUD = ("port_congested_lossy", "leaf01:swp1")


def _integral(t: float, episode: tuple[float, float] | None, rate: float) -> float:
    if episode is None:
        return 0.0
    a, d = episode
    return rate * max(0.0, min(t, a + d) - a)


def port_timeline(interval: float, *, marks: tuple[float, float] | None, drops: tuple[float, float] | None,
                  load: float = 1.0, drop_rate: float = 5.0, length: float = 300.0) -> list[str]:
    """leaf01:swp1 sending at `load` of line rate (0.3 of it outside the episodes),
    marking 100,000 packets/s during `marks` and dropping `drop_rate`/s during `drops`
    ((start, seconds) each)."""
    lines = []
    for k in range(int(length // interval) + 1):
        t = k * interval
        busy = _integral(t, marks, (load - 0.3) * LINE_RATE) + 0.3 * LINE_RATE * t
        fields = {"if_out_octets": int(busy), "ecn_marked_packets": int(_integral(t, marks, 100_000)),
                  "wred_dropped_packets": int(round(_integral(t, drops, drop_rate))), "speed_mbps": SPEED_MBPS,
                  "oper_status": "up", "admin_status": "up"}
        lines.append(json.dumps({"name": "switch_port", "tags": {"host": "leaf01", "interface": "swp1"},
                                 "fields": fields, "timestamp": int(round((T0 + t) * 1000))}))
    return lines


@pytest.mark.parametrize("interval", [1, 5, 10])
def test_marks_and_loss_at_a_busy_egress_for_a_minute_are_loud(interval):
    assert LOUD in verdict(port_timeline(interval, marks=(100.0, 60.0), drops=(100.0, 60.0))), interval


@pytest.mark.parametrize("interval", [1, 5, 10])
def test_marks_without_loss_one_drop_or_loss_at_a_low_load_are_not_loud(interval):
    no_loss = verdict(port_timeline(interval, marks=(100.0, 60.0), drops=None))
    one_drop = verdict(port_timeline(interval, marks=(100.0, 60.0), drops=(130.2, 0.2), drop_rate=5.0))
    low_load = verdict(port_timeline(interval, marks=(100.0, 60.0), drops=(100.0, 60.0), load=0.5))
    for found in (no_loss, one_drop, low_load):
        assert LOUD not in found, (interval, found)
    assert ("port_ecn_marking", "leaf01:swp1") in no_loss  # (the marks are seen: they wait their 10 s)


def test_a_two_second_lossy_burst_at_1_s_polling_is_not_loud():
    for a in (100.0, 100.4):
        assert LOUD not in verdict(port_timeline(1, marks=(a, 2.0), drops=(a, 2.0))), a
