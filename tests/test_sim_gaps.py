"""A collector gap never hides a fault's own device while the fault lasts (`sim.realism`
`_gap_switch`, `sim.split.fault_devices`): a fault the telemetry never shows tests no
engine. Tune-range microburst-19 at 1 s (seed 700251) had leaf01's telemetry stop from
3 s into its bursts to 48 s after them, and nothing could be seen."""
from __future__ import annotations

import random

from sim.fabric import Fabric
from sim.realism import _gap_switch, draw
from sim.scenarios import make_plan
from sim.split import fault_devices
from tests.test_sim_realism import SPEC, T0


def test_a_gap_moves_to_the_next_switch_only_when_it_would_hide_a_fault():
    switches = ["leaf01", "leaf02", "spine01"]
    clear = (("leaf02", 100.0, 200.0),)
    assert _gap_switch(switches, "leaf02", 150.0, 300.0, clear) == "spine01"
    assert _gap_switch(switches, "leaf02", 210.0, 300.0, clear) == "leaf02"  # after the fault
    assert _gap_switch(switches, "leaf01", 150.0, 300.0, clear) == "leaf01"
    every = tuple((s, 0.0, 1e9) for s in switches)
    assert _gap_switch(switches, "leaf02", 1.0, 2.0, every) == "leaf02"  # nowhere else: as drawn


def test_a_faults_devices_are_the_ends_of_its_entity_widened_as_busy_is():
    plan = make_plan("link_degraded", seed=1, fabric=SPEC)
    (f,) = plan.faults
    got = fault_devices(plan, plan.start)
    assert {d for d, _, _ in got} == {p.split(":")[0] for p in f.entity.split("--")} and len(got) == 2
    assert all(lo == f.start - 30 and hi == f.end + 60 for _, lo, hi in got)


def test_no_gap_covers_a_faulted_device_and_every_other_draw_is_unchanged():
    fab, moved = Fabric(SPEC), 0
    for seed in range(150):
        plan = make_plan(("microburst", "congestion", "link_degraded", "pfc_storm")[seed % 4], seed=seed, fabric=SPEC)
        clear = fault_devices(plan, plan.start)
        kw = dict(split="tune-range", fabric=fab, start=T0, duration=plan.duration)
        plain = draw(random.Random(seed), **kw)
        spared = draw(random.Random(seed), **kw, clear=clear)
        assert len(plain.phenomena) == len(spared.phenomena) and plain.intervals == spared.intervals
        for a, b in zip(plain.phenomena, spared.phenomena):
            if a.kind != "collector_gap":
                assert a == b
                continue
            assert (a.start, a.end) == (b.start, b.end)
            assert not any(d == b.host and b.start < hi and b.end > lo for d, lo, hi in clear)
            moved += a.host != b.host
    assert moved  # the draw without `clear` did hide faults: the check above can fail
