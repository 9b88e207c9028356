"""Level rules at coarse polling: a clean NIC's noisy PCIe stall share, sampled every
30 s for hours, opens nothing; a real rise on one NIC is found, named right.

The windows a level rule compares hold samples, not seconds, at long intervals
(engine.baseline.windows): two medians of a few samples of a noisy gauge differ by
chance, and across a fabric of NICs over hours chance becomes incidents.
"""
from __future__ import annotations

import json
import random

import pytest

from engine.baseline import windows
from engine.pipeline import Pipeline
from engine.topology import Topology
from rules.loader import load_rules

T0 = 1764400000
RULES = load_rules(None)
NICS = [f"gpu{k}:eth0" for k in range(1, 41)]
TOPO = Topology.from_links(roles={}, links=[(nic, f"leaf{1 + k % 2}:swp{k}") for k, nic in enumerate(NICS, 1)]
                           + [("leaf1:swp51", "spine1:swp1"), ("leaf2:swp51", "spine1:swp2")])


def telemetry(interval: int, hours: float, *, rise_at: float | None = None, seed: int = 3) -> list[str]:
    rng = random.Random(seed)
    lines = []
    for k in range(int(hours * 3600 / interval)):
        t = k * interval
        for nic in NICS:
            extra = 3.0 if rise_at is not None and nic == "gpu1:eth0" and t >= rise_at else 0.0
            host, iface = nic.split(":")
            lines.append(json.dumps({"name": "nic_port", "tags": {"host": host, "interface": iface},
                                     "fields": {"link": "up", "tx_bytes": 10**9 * k,
                                                "outbound_pci_stalled_rd": round(rng.uniform(0, 2) + extra, 2),
                                                "outbound_pci_stalled_wr": round(rng.uniform(0, 2) + extra, 2)},
                                     "timestamp": (T0 + t) * 1000}))
    return lines


def incidents(lines: list[str]) -> list[tuple[str, str]]:
    pipe = Pipeline(rules=RULES, topology=TOPO)
    seen: dict[str, tuple[str, str]] = {}
    for line in lines:
        pipe.feed(line)
        for inc in pipe.changes():
            top = min(inc["root_causes"], key=lambda rc: rc["rank"])
            seen.setdefault(inc["id"], (top["cause"], top["entity"]["id"]))
    pipe.finish()
    for inc in pipe.changes():
        top = min(inc["root_causes"], key=lambda rc: rc["rank"])
        seen.setdefault(inc["id"], (top["cause"], top["entity"]["id"]))
    return sorted(seen.values())


@pytest.mark.parametrize("interval", [30, 60])
def test_clean_nics_polled_every_30_or_60_s_open_nothing_for_hours(interval):
    assert incidents(telemetry(interval, 6)) == []


@pytest.mark.parametrize("interval", [10, 30])
def test_a_stall_that_rises_and_stays_is_found_at_coarse_polling(interval):
    assert incidents(telemetry(interval, 2, rise_at=3600)) == [("nic_degraded", "gpu1:eth0")]


def test_a_comparison_holds_enough_samples_whatever_the_interval():
    level = next(r.level for r in RULES.rules if r.id == "nic_pcie_stall_rising")
    assert windows(level, 1) == (level.recent_s, level.baseline_s)  # nothing changes at 1 s
    for interval in (5, 10, 15, 30, 60):
        recent, baseline = windows(level, interval)
        assert recent / interval >= level.compare_samples and baseline / interval >= 2 * level.compare_samples
    pause = next(r.level for r in RULES.rules if r.id == "nic_pfc_tx_sustained")  # no baseline: only min_samples
    assert windows(pause, 30) == (max(pause.recent_s, pause.min_samples * 30), max(pause.baseline_s, pause.min_samples * 30))
