"""The realism layer's physics constants and its scheduled benign events (contract
section 8: a job ramping up to high but unsaturated load, an idle port). Expectations
come from the definitions: a ramp's hosts reach its peak and no link passes its ceiling,
so no port marks ECN unless the knee is set below the ceiling; an idle host's counters
stand still with its link up; each constant shows in the counters it drives."""
from __future__ import annotations

import gzip
import json
import random
from collections import defaultdict
from pathlib import Path

import pytest

from sim import FabricSpec, simulate
from sim.fabric import BASE_EPOCH, Physics
from sim.faults.benign import Scheduled
from sim.realism import BUFFERS_MIB, SPEEDS_GBPS, _gaps, draw_events, draw_physics

T0 = BASE_EPOCH
SPEC = FabricSpec()


def _series(folder: Path) -> dict[tuple, list[tuple[float, dict]]]:
    out = defaultdict(list)
    with gzip.open(folder / "telemetry.jsonl.gz", "rt") as fh:
        for line in fh:
            rec = json.loads(line)
            for m in rec.get("metrics", [rec]):
                ts = m["timestamp"]
                t = ts / (1e9 if ts > 1e17 else 1e3 if ts > 1e11 else 1)
                out[(m["name"], m["tags"]["host"], m["tags"].get("interface"))].append((t, m["fields"]))
    return {k: sorted(v, key=lambda x: x[0]) for k, v in out.items()}


def _rates(series: list[tuple[float, dict]], name: str, lo: float, hi: float) -> list[float]:
    """Per-second increments of a counter between samples inside [lo, hi]."""
    pts = [(t, f[name]) for t, f in series if lo <= t <= hi and name in f]
    return [(b - a) / (tb - ta) for (ta, a), (tb, b) in zip(pts, pts[1:]) if tb > ta and b >= a]


def _run(tmp_path: Path, name: str, **kw) -> tuple[dict, dict]:
    out = tmp_path / name
    truth = simulate(out=out, scenario="clean", seed=4, fabric=kw.pop("fabric", SPEC),
                     duration=kw.pop("duration", 200.0), **kw)
    return truth, _series(out)


RAMP = Scheduled("job_ramp_up", 20.0, 160.0, 0, rise_s=30.0, peak=0.7, ceiling=0.85)
# Past what the default fabric's uplinks allow (4 of a host's 7 peers on the other leaf,
# 2 spines: a host at 0.95 would put 1.09 of line rate on each uplink): the ceiling binds.
STEEP = Scheduled("job_ramp_up", 20.0, 160.0, 0, rise_s=30.0, peak=0.95, ceiling=0.85)


def _busiest(series: dict, lo: float, hi: float) -> tuple[float, float]:
    """(highest link utilisation, ECN marks) over every switch port and NIC in [lo, hi]."""
    line, util, marks = SPEC.line_bytes, [0.0], 0.0
    for (name, host, iface), s in series.items():
        if name == "switch_port":
            util += [r / line for r in _rates(s, "if_out_octets", lo, hi)]
            marks += sum(_rates(s, "ecn_marked_packets", lo, hi))
        elif name == "nic_port":
            util += [r / line for k in ("tx_bytes", "rx_bytes") for r in _rates(s, k, lo, hi)]
    return max(util), marks


def test_a_job_ramps_to_its_peak_and_no_link_passes_the_ceiling(tmp_path):
    truth, series = _run(tmp_path, "ramp", benign=(RAMP,))
    (ramp,) = truth["benign"]
    assert ramp["kind"] == "job_ramp_up" and ramp["start"] == T0 + 20
    hosts = next(j["hosts"] for j in truth["jobs"] if j["job_id"] == ramp["job_id"])
    line = SPEC.line_bytes
    before = [r / line for h in hosts for r in _rates(series[("nic_port", h, "eth0")], "tx_bytes", T0 + 2, T0 + 19)]
    hold = [r / line for h in hosts for r in _rates(series[("nic_port", h, "eth0")], "tx_bytes", T0 + 55, T0 + 178)]
    assert max(before) < 0.5 and sum(hold) / len(hold) == pytest.approx(0.7, abs=0.03)
    assert _busiest(series, T0 + 20, T0 + 180)[1] == 0  # unsaturated: no queue, no ECN
    _, steep = _run(tmp_path, "steep", benign=(STEEP,))
    util, marks = _busiest(steep, T0 + 20, T0 + 180)
    assert 0.84 < util <= 0.85 + 1e-6 and marks == 0  # held at the ceiling, never past it


def test_ecn_marks_start_at_the_drawn_knee(tmp_path):
    """The ramp held at 0.85 with the knee below it: the busiest ports now mark."""
    _, series = _run(tmp_path, "knee", benign=(STEEP,), physics=Physics(ecn_knee=0.8))
    marks = sum(sum(_rates(s, "ecn_marked_packets", T0 + 60, T0 + 180))
                for k, s in series.items() if k[0] == "switch_port")
    assert marks > 0


def test_an_idle_port_moves_no_bytes_with_its_link_up(tmp_path):
    idle = Scheduled("idle_port", 40.0, 60.0, 5)
    truth, series = _run(tmp_path, "idle", benign=(idle,))
    host = truth["benign"][0]["host"]
    nic = series[("nic_port", host, "eth0")]
    for name in ("tx_bytes", "rx_bytes"):
        assert max(_rates(nic, name, T0 + 42, T0 + 99)) == 0
        assert min(_rates(nic, name, T0 + 102, T0 + 199)) > 0.05 * SPEC.line_bytes
    assert {f["link"] for t, f in nic if T0 + 40 <= t <= T0 + 100} == {"up"}


def test_each_physics_constant_shows_in_its_counters(tmp_path):
    phys = Physics(buffer_bytes=128 * 1024 * 1024, mtu_bytes=1024, burst_every_s=10.0, fec_noise=300)
    spec = FabricSpec(speed_gbps=100)
    truth, series = _run(tmp_path, "phys", physics=phys, fabric=spec, duration=60.0)
    assert truth["physics"]["mtu_bytes"] == 1024 and truth["fabric"]["speed_gbps"] == 100
    _, plain = _run(tmp_path, "plain", duration=60.0)
    assert "physics" not in _
    nic = series[("nic_port", "gpu001", "eth0")]
    assert nic[-1][1]["speed"] == 100_000
    packets, octets = (sum(_rates(nic, k, T0, T0 + 60)) for k in ("tx_packets", "tx_bytes"))
    assert packets == pytest.approx(octets / 1024, rel=0.01)

    def most(s, field, key=lambda v: v):
        return max(key(x) for k, v in s.items() if k[0] == "switch_port" or k[0] == "switch_queue"
                   for x in ([fl[field] for _, fl in v if field in fl] or [0]))

    assert most(series, "shared_watermark_bytes") > 0.2 * 128 * 1024 * 1024 > most(plain, "shared_watermark_bytes")
    fec = [r for k, s in series.items() if k[0] == "switch_port"
           for r in _rates(s, "if_in_fec_correctable_frames", T0, T0 + 60)]
    fec0 = [r for k, s in plain.items() if k[0] == "switch_port"
            for r in _rates(s, "if_in_fec_correctable_frames", T0, T0 + 60)]
    assert 20 < max(fec) <= 300 * 1.05 and max(fec0) <= 20 * 1.05  # (timestamps jitter by ms)


def test_physics_is_drawn_per_seed_with_wider_ranges_in_test():
    drawn = {s: [draw_physics(random.Random(k), s) for k in range(200)] for s in ("tune", "test")}
    for split, runs in drawn.items():
        assert {speed for speed, _ in runs} == set(SPEEDS_GBPS[split])
        assert {p.buffer_bytes >> 20 for _, p in runs} == set(BUFFERS_MIB[split])
    knees = {s: [p.ecn_knee for _, p in runs] for s, runs in drawn.items()}
    assert min(knees["test"]) < min(knees["tune"]) and max(knees["test"]) > max(knees["tune"])
    assert set(SPEEDS_GBPS["tune"]) < set(SPEEDS_GBPS["test"])
    assert draw_physics(random.Random(7), "test") == draw_physics(random.Random(7), "test")


@pytest.mark.parametrize("seed", range(30))
def test_scheduled_events_never_overlap_a_fault_or_each_other(seed):
    rng = random.Random(seed)
    busy = [(90.0, 330.0)] if seed % 2 else []
    events = draw_events(rng, split="test", busy=busy, duration=900.0 if not busy else 420.0)
    windows = sorted([(e.at, e.at + e.length) for e in events] + busy)
    assert all(a1 <= b0 for (_, a1), (b0, _) in zip(windows, windows[1:]))
    assert all(10 <= e.at and e.at + e.length <= (890 if not busy else 410) for e in events)
    if not busy:
        assert any(e.kind == "job_ramp_up" for e in events)
    assert _gaps([(0, 50), (40, 100)], 200) == [(100, 190)]
