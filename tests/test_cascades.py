"""A fault's consequences belong to its one incident (contract section 8): timelines of
symptoms heard as the detect stage proves them (a rule with `for_s` sends its symptom
about ten seconds after its back-dated start, so the far end of a cascade may be heard
before its root), fed into the correlator second by second.

Fabrics: the two-tier one of tests/test_correlation_timeline.py, and a three-tier one
(`THREE`: two pods, each a leaf and a spine, joined by a superspine) whose pause tree
reaches farther than the correlator's nearness (2 hops).
"""
from __future__ import annotations

import dataclasses

from engine.credible import Persistence
from engine.rank import Context, plausibility, pressed
from engine.topology import Topology
from engine.types import Entity
from tests.test_correlation_timeline import KINDS, RULES, T0, TOPO, episode, run, tops

KINDS.setdefault("nic_pfc_rx", ("pfc_pause_rx", "pfc", "interface", 0.3))

THREE = Topology.from_links(
    roles={"leafA": "leaf", "leafB": "leaf", "spineA": "spine", "spineB": "spine", "ss1": "superspine",
           "gA": "host", "gB": "host", "storB": "storage"},
    links=[("leafA:swp51", "spineA:swp1"), ("spineA:swp51", "ss1:swp1"), ("ss1:swp2", "spineB:swp51"),
           ("spineB:swp1", "leafB:swp51"), ("gA:eth0", "leafA:swp1"), ("gB:eth0", "leafB:swp1"),
           ("storB:eth0", "leafB:swp3")])


def heard(rule: str, entity: str, start: float, end: float | None, *, after: float = 10.0):
    """An episode as the detect stage sends it: first heard `after` s past its start
    (the rule's for_s), its start back-dated."""
    evs = episode(rule, entity, start, end)
    first = T0 + start + after
    out = [(t, s) for t, s in evs[1:] if t > first]
    head = dataclasses.replace(evs[0][1], last=first)
    return [(first, head)] + out


def run_on(topology: Topology, events, *, until: float) -> dict:
    return run(events, until=until, topology=topology)[1]


# --- a flapping fabric link -------------------------------------------------------------

def flap_with_rerouting() -> list:
    """leaf1--spine1 flaps; leaf1's traffic to leaf2 reroutes over spine2 and fills
    leaf1:swp52 and spine2:swp2; spine2 and leaf1 relay pause to their senders."""
    return heard("port_carrier_flap", "leaf1:swp51", 20, 200, after=8) \
        + heard("port_oper_down", "leaf1:swp51", 20, 24, after=1) \
        + heard("queue_congested", "leaf1:swp52", 26, 200) + heard("queue_congested", "spine2:swp2", 27, 200) \
        + heard("port_pfc_tx", "leaf1:swp1", 28, 200) + heard("port_pfc_tx", "spine2:swp1", 28, 200) \
        + heard("port_pfc_rx", "leaf2:swp52", 28, 200) + heard("port_pfc_tx", "leaf2:swp1", 30, 200)


def test_congestion_on_the_other_spine_after_a_fabric_link_flap_joins_the_flap():
    _, published = run(flap_with_rerouting(), until=300)
    assert tops(published) == [("link_flap", "leaf1:swp51--spine1:swp1")]
    inc = next(iter(published.values()))
    assert {s["entity"]["id"] for s in inc["symptoms"] if s["kind"] == "queue_congested"} == \
        {"leaf1:swp52", "spine2:swp2"}


def test_a_host_link_flap_does_not_claim_congestion_on_the_spines():
    """A host has one link: its flap moves no traffic onto another switch's ports."""
    events = heard("port_carrier_flap", "leaf1:swp1", 20, 200, after=8) \
        + heard("queue_congested", "spine2:swp2", 60, 200)
    _, published = run(events, until=300)
    assert tops(published) == [("congestion", "spine2:swp2"), ("link_flap", "gpu1:eth0--leaf1:swp1")]


# --- pause: a relay is never a pfc_storm, whichever candidate its pressure is in --------------

def test_a_port_whose_switch_is_paused_or_congested_is_no_pause_storm_however_long_it_sends():
    p, port = Persistence(), Entity("interface", "spine1:swp1")
    sends = heard("port_pfc_tx", "spine1:swp1", 20, 120)
    pause = [s for _, s in sends][-1:]
    assert p.credible("pfc_storm", port, pause, Context(TOPO))
    congested = [s for _, s in heard("queue_congested", "spine1:swp2", 15, 130)][-1:]
    paused = [s for _, s in heard("port_pfc_rx", "spine1:swp2", 15, 130)][-1:]
    for pressure in (congested, paused):
        assert not p.credible("pfc_storm", port, pause, Context(TOPO, pressed=pressed(pressure, TOPO)))
    later = [s for _, s in heard("queue_congested", "spine1:swp2", 300, 330)][-1:]
    assert p.credible("pfc_storm", port, pause, Context(TOPO, pressed=pressed(later, TOPO)))


def test_a_nic_receiving_no_pause_is_still_a_storm_beside_congested_switches():
    p, nic = Persistence(), Entity("interface", "gpu3:eth0")
    pause = [s for _, s in heard("nic_pfc_tx", "gpu3:eth0", 20, 120)][-1:]
    queue = [s for _, s in heard("queue_congested", "leaf2:swp1", 20, 120)][-1:]
    assert p.credible("pfc_storm", nic, pause, Context(TOPO, pressed=pressed(queue, TOPO)))


def congestion_pause_tree(*, root_after: float) -> list:
    """storB's port leafB:swp3 congests; the pause climbs leafB -> spineB -> ss1 -> spineA
    -> leafA -> gA, each switch's egress toward the root filling as it is paused."""
    return heard("queue_congested", "leafB:swp3", 20, 200, after=root_after) \
        + heard("port_ecn_marking", "leafB:swp3", 20, 200, after=root_after) \
        + heard("port_pfc_tx", "leafB:swp51", 21, 200) + heard("port_pfc_rx", "spineB:swp1", 21, 200) \
        + heard("queue_congested", "spineB:swp1", 21, 200) + heard("port_pfc_tx", "spineB:swp51", 22, 200) \
        + heard("port_pfc_rx", "ss1:swp2", 22, 200) + heard("queue_congested", "ss1:swp2", 22, 200) \
        + heard("port_pfc_tx", "ss1:swp1", 23, 200) + heard("port_pfc_rx", "spineA:swp51", 23, 200) \
        + heard("queue_congested", "spineA:swp51", 23, 200) + heard("port_pfc_tx", "spineA:swp1", 24, 200) \
        + heard("port_pfc_rx", "leafA:swp51", 24, 200) + heard("port_pfc_tx", "leafA:swp1", 25, 200) \
        + heard("nic_pfc_rx", "gA:eth0", 25, 200)


def test_a_pause_tree_beyond_two_hops_names_only_the_congested_root():
    for root_after in (10, 20):  # the root proven with its relays, or well after them
        published = run_on(THREE, congestion_pause_tree(root_after=root_after), until=300)
        named = sorted((i["root_causes"][0]["cause"], i["root_causes"][0]["entity"]["id"]) for i in published.values())
        assert ("congestion", "leafB:swp3") in named
        assert not [n for n in named if n[0] == "pfc_storm"], named


def first_leads(topology: Topology, events, *, until: float) -> list[tuple[str, str]]:
    """The leading cause of each incident as first published (what paged someone)."""
    first: dict = {}
    run(events, until=until, topology=topology, first=first)
    return sorted((i["root_causes"][0]["cause"], i["root_causes"][0]["entity"]["id"]) for i in first.values())


def test_a_queue_behind_a_paused_egress_is_no_congestion_even_heard_before_the_storm():
    """gpu3 storms; spine1's port toward leaf2 is paused and its queue fills. The NIC is
    polled slower, so the spine's queue and pause are heard first."""
    events = heard("nic_pfc_tx", "gpu3:eth0", 20, 150, after=16) + heard("port_pfc_rx", "leaf2:swp1", 20, 150) \
        + heard("port_pfc_tx", "leaf2:swp51", 21, 150) + heard("port_pfc_rx", "spine1:swp2", 21, 150) \
        + heard("queue_congested", "spine1:swp2", 21, 150) + heard("port_ecn_marking", "spine1:swp2", 21, 150)
    assert first_leads(TOPO, events, until=300) == [("pfc_storm", "gpu3:eth0")]
    p, port = Persistence(), Entity("interface", "spine1:swp2")
    queue = [s for _, s in heard("queue_congested", "spine1:swp2", 21, 150)][-1:]
    paused = [s for _, s in heard("port_pfc_rx", "spine1:swp2", 21, 150)][-1:]
    assert p.credible("congestion", port, queue, Context(TOPO))
    assert not p.credible("congestion", port, queue, Context(TOPO, pressed=pressed(paused, TOPO)))


RAILS = Topology.from_links(
    roles={"leaf1": "leaf", "leaf2": "leaf", "spine1": "spine", "g1": "host", "g2": "host"},
    links=[("leaf1:swp51", "spine1:swp1"), ("leaf2:swp51", "spine1:swp2"), ("g1:eth0", "leaf1:swp1"),
           ("g1:eth1", "leaf2:swp1"), ("g2:eth0", "leaf1:swp2"), ("g2:eth1", "leaf2:swp2")])


def test_on_rails_a_nic_storms_while_its_hosts_other_nic_is_paused_by_the_tree():
    """g1:eth1 storms into rail 2; the tree pauses g1's rail-1 NIC (g1 is in the job): a
    host has a buffer per NIC, so eth0's pause does not make eth1 a relay."""
    events = heard("nic_pfc_tx", "g1:eth1", 20, 150) + heard("port_pfc_rx", "leaf2:swp1", 20, 150) \
        + heard("port_pfc_tx", "leaf2:swp51", 21, 150) + heard("port_pfc_rx", "spine1:swp2", 21, 150) \
        + heard("port_pfc_tx", "spine1:swp1", 22, 150) + heard("port_pfc_rx", "leaf1:swp51", 22, 150) \
        + heard("port_pfc_tx", "leaf1:swp1", 23, 150) + heard("nic_pfc_rx", "g1:eth0", 23, 150) \
        + heard("port_pfc_tx", "leaf1:swp2", 23, 150) + heard("nic_pfc_rx", "g2:eth0", 23, 150)
    published = run_on(RAILS, events, until=300)
    named = sorted((i["root_causes"][0]["cause"], i["root_causes"][0]["entity"]["id"]) for i in published.values())
    assert named == [("pfc_storm", "g1:eth1")]
    symptoms = [s for _, s in events]
    ctx = Context(RAILS)
    assert plausibility("pfc_storm", Entity("interface", "g1:eth1"), symptoms, ctx) == 1.0
    assert plausibility("pfc_storm", Entity("interface", "leaf1:swp1"), symptoms, ctx) < 0.5


def test_a_switch_port_whose_pause_frames_pause_next_to_nothing_is_no_pause_storm():
    """leaf1:swp1 sends 60 pause frames/s for 50 s with nothing congested or paused in
    sight. With its pause-time counter flat (all-reduce phases relayed: frames, no time
    paused) it is no storm; holding gpu1 paused 40 % of the time it is one; with no pause
    time reported, the frames are all there is and it is one too (as before)."""
    def storm(metrics):
        return run(episode("port_pfc_tx", "leaf1:swp1", 10, 60, metrics=metrics), until=120)[1]
    assert storm({"pfc_tx_pkts_rate": 60.0, "pfc_tx_pause_us_rate": 0.0}) == {}
    assert tops(storm({"pfc_tx_pkts_rate": 60.0, "pfc_tx_pause_us_rate": 400_000.0})) == [("pfc_storm", "leaf1:swp1")]
    assert tops(storm({"pfc_tx_pkts_rate": 60.0})) == [("pfc_storm", "leaf1:swp1")]
    # a NIC's pause is judged as before, whatever its pause time
    nic = run(episode("nic_pfc_tx", "gpu1:eth0", 10, 60, metrics={"tx_pause_rate": 60.0, "tx_pause_us_rate": 0.0}),
              until=120)[1]
    assert tops(nic) == [("pfc_storm", "gpu1:eth0")]
