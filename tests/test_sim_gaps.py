"""Operations that silence telemetry (a collector gap, a host link bounce, a port's
maintenance) never fall on a fault's own device or interface while the fault lasts
(`sim.realism._spared`, `sim.split.fault_devices`): a fault the telemetry never shows
tests no engine, and a link down restarts the levels a gray fault is measured against.
Tune-range microburst-19 at 1 s (seed 700251) had leaf01's telemetry stop from 3 s into
its bursts to 48 s after them; tune-any pcie_stall-24 at 2/5 s had the stalling NIC's
switch port admin-down for 126 s in the middle of its ramp."""
from __future__ import annotations

import random

from sim.fabric import Fabric
from sim.realism import _host_port, _spared, draw
from sim.scenarios import make_plan
from sim.split import fault_devices
from tests.test_sim_realism import SPEC, T0


def test_an_operation_moves_to_the_next_item_only_when_it_would_hide_a_fault():
    switches = ["leaf01", "leaf02", "spine01"]
    clear = (("leaf02", 100.0, 200.0),)

    def own(x):
        return (x,)
    assert _spared(switches, "leaf02", 150.0, 300.0, clear, own) == "spine01"
    assert _spared(switches, "leaf02", 210.0, 300.0, clear, own) == "leaf02"  # after the fault
    assert _spared(switches, "leaf01", 150.0, 300.0, clear, own) == "leaf01"
    every = tuple((s, 0.0, 1e9) for s in switches)
    assert _spared(switches, "leaf02", 1.0, 2.0, every, own) == "leaf02"  # nowhere else: as drawn


def test_a_faults_names_are_its_ends_and_their_devices_widened_as_busy_is():
    plan = make_plan("link_degraded", seed=1, fabric=SPEC)
    (f,) = plan.faults
    got = fault_devices(plan, plan.start)
    ends = f.entity.split("--")
    assert {n for n, _, _ in got} == set(ends) | {p.split(":")[0] for p in ends} and len(got) == 4
    assert all(lo == f.start - 30 and hi == f.end + 60 for _, lo, hi in got)


def _silenced(fab: Fabric, p) -> set[str]:
    """The names an operation silences: a gap its switch, a bounce its host, a port its
    port and the host behind it."""
    if p.kind == "collector_gap":
        return {p.host}
    if p.kind == "host_link_bounce":
        return {p.host}
    ports = {k: _host_port(fab, k) for k in range(len(fab.endpoints))}
    hosts = [fab.endpoints[k].name for k, q in ports.items() if (q.device, q.iface) == (p.host, p.interface)]
    return {f"{p.host}:{p.interface}"} | set(hosts)


def test_no_operation_silences_a_faulted_device_and_every_other_draw_is_unchanged():
    fab, moved = Fabric(SPEC), {}
    ops = ("collector_gap", "host_link_bounce", "admin_down")
    for seed in range(200):
        plan = make_plan(("microburst", "congestion", "link_degraded", "pfc_storm", "pcie_stall")[seed % 5],
                         seed=seed, fabric=SPEC)
        clear = fault_devices(plan, plan.start)
        kw = dict(split="tune-range", fabric=fab, start=T0, duration=plan.duration)
        plain = draw(random.Random(seed), **kw)
        spared = draw(random.Random(seed), **kw, clear=clear)
        assert len(plain.phenomena) == len(spared.phenomena) and plain.intervals == spared.intervals
        for a, b in zip(plain.phenomena, spared.phenomena):
            if a.kind not in ops:
                assert a == b
                continue
            assert (a.kind, a.start, a.end) == (b.kind, b.start, b.end)
            hit = _silenced(fab, b)
            assert not any(n in hit and b.start < hi and b.end > lo for n, lo, hi in clear)
            moved[a.kind] = moved.get(a.kind, 0) + ((a.host, a.interface) != (b.host, b.interface))
    assert all(moved.get(k) for k in ops), moved  # unspared draws did hide faults: the check can fail
