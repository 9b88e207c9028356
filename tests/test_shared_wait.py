"""Congestion on a switch-to-switch link waits for its own pause counters too
(`Persistence._shared_wait`, docs/design.md "Precision by design", origin versus victim),
and so does congestion at any switch port (`Persistence._pause_wait`).

A queue-occupancy gauge proves congestion a sample before the port's pause counters can
prove the port was paused, so at 30-60 s polling a spine's queue toward the leaf of a weak
NIC storm was published as congestion two samples in, before anything was seen paused
(tune probes a27, q27 pfc_storm-0 at 30 and 60 s; tune-retired pfc_storm-9 at 50 s). The
symptoms here carry samples at the polling interval, as the detect stage's do.
"""
from __future__ import annotations

import dataclasses

from contract.times import parse_rfc3339
from test_correlation_timeline import T0, episode, run, tops


def polled(events: list, every: float, heard_from: float | None = None) -> list:
    """The episode's symptoms with a sample each `every` s of their life (what the detect
    stage reads the interval from), heard from `heard_from` s on (a symptom whose rule
    needed more samples is raised later, its start backdated)."""
    out = []
    for t, s in events:
        if heard_from is not None and t < T0 + heard_from:
            continue
        n = int((s.last - s.start) // every) + 1
        samples = {"x": [(s.start + k * every, 1.0) for k in range(n)]}
        out.append((t, dataclasses.replace(s, samples=samples)))
    return out


def first_pages(events: list, until: float = 400) -> tuple[dict, dict]:
    first: dict = {}
    _, published = run(events, until=until, first=first)
    return first, published


def test_a_queue_paused_by_a_weak_storm_waits_for_its_own_pause_counters_at_30_s():
    victim = polled(episode("queue_congested", "spine1:swp2", 22, 250, refresh=30), 30)
    paused = polled(episode("port_pfc_rx", "spine1:swp2", 22, 250, refresh=30), 30, heard_from=82)
    storm = polled(episode("nic_pfc_tx", "gpu3:eth0", 22, 250, refresh=30), 30, heard_from=82)
    first, published = first_pages(victim + paused + storm)
    assert [i["root_causes"][0]["entity"]["id"] for i in first.values()] == ["gpu3:eth0"]
    assert tops(published) == [("pfc_storm", "gpu3:eth0")]


def test_a_queue_no_pause_explains_is_congestion_after_the_pause_counters_samples():
    """Alone, the same queue is congestion: at 30 s polling once it has lasted the pause
    rules' three samples, (ceil(10 / 30) + 2) x 30 = 90 s; at 1 s after 20 s as before."""
    first, published = first_pages(polled(episode("queue_congested", "spine1:swp2", 22, 250, refresh=30), 30))
    assert tops(published) == [("congestion", "spine1:swp2")]
    assert parse_rfc3339(next(iter(first.values()))["detected_at"]) - T0 >= 22 + 90
    first, published = first_pages(polled(episode("queue_congested", "spine1:swp2", 22, 250), 1))
    assert tops(published) == [("congestion", "spine1:swp2")]
    assert parse_rfc3339(next(iter(first.values()))["detected_at"]) - T0 <= 22 + 20 + 5


def test_the_wait_reads_the_pause_rules_persistence_and_the_evidences_interval():
    """`pause_for_s` is the catalogue's pause rules' for_s; the interval is the shortest
    gap between successive samples of the evidence (1 s when no symptom has two)."""
    from engine.credible import Persistence
    from engine.samples import interval
    from rules.loader import load_rules

    rules = {r.id: r for r in load_rules(None).rules}
    assert Persistence().pause_for_s == rules["port_pfc_rx"].for_s == rules["port_pfc_tx"].for_s
    syms = [s for _, s in polled(episode("queue_congested", "spine1:swp2", 0, 100, refresh=15), 15)]
    assert interval(syms) == 15.0
    assert interval([s for _, s in episode("queue_congested", "spine1:swp2", 0, 100)]) == 1.0


def test_a_leaf_queue_toward_a_storming_nic_waits_for_its_pause_counters_at_10_s():
    """Not only switch-to-switch links: at 10 s polling the queue of leaf2:swp1 toward
    gpu3, which stopped draining, proved congestion in two samples (a gauge), a sample
    before the port's pause counters proved it paused, and was published as congestion
    of its own beside gpu3's storm (tune-range pfc_storm-23 at 10 s, `--repeats 24`)."""
    victim = polled(episode("queue_congested", "leaf2:swp1", 22, 250, refresh=10), 10, heard_from=32)
    paused = polled(episode("port_pfc_rx", "leaf2:swp1", 22, 250, refresh=10), 10, heard_from=42)
    storm = polled(episode("nic_pfc_tx", "gpu3:eth0", 22, 250, refresh=10), 10, heard_from=42)
    first, published = first_pages(victim + paused + storm)
    assert [i["root_causes"][0]["entity"]["id"] for i in first.values()] == ["gpu3:eth0"]
    assert tops(published) == [("pfc_storm", "gpu3:eth0")]
