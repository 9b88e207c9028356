"""Origin versus victim for pause on a rail-optimised host (contract section 8): a host's
NICs sit on different leaves and do not forward between each other, so one NIC being
paused (the pause tree of its neighbour's storm reaching it over another leaf) does not
make the NIC beside it a relay."""
from __future__ import annotations

from engine.rank import Context, _pause_origin
from engine.topology import Topology
from engine.types import Entity, Symptom

T0 = 1764400000.0
TOPO = Topology.from_links(
    roles={"leaf1": "leaf", "leaf2": "leaf", "spine1": "spine", "gpu1": "host", "gpu2": "host"},
    links=[("gpu1:eth0", "leaf1:swp1"), ("gpu1:eth1", "leaf2:swp1"), ("gpu2:eth0", "leaf1:swp2"),
           ("gpu2:eth1", "leaf2:swp2"), ("leaf1:swp51", "spine1:swp1"), ("leaf2:swp51", "spine1:swp2")])


def sym(kind: str, entity: str) -> Symptom:
    return Symptom(key=f"{kind}@{entity}", kind=kind, family="pfc", entity=Entity("interface", entity),
                   device=entity.split(":")[0], start=T0, last=T0 + 30, severity=0.5, rule=kind)


def test_a_storming_nic_is_an_origin_though_another_nic_of_its_host_is_paused():
    ctx = Context(topology=TOPO)
    storm = [sym("pfc_pause_tx", "gpu1:eth1"), sym("pause_storm_event", "gpu1:eth1"), sym("pfc_pause_rx", "gpu1:eth0")]
    assert _pause_origin(Entity("interface", "gpu1:eth1"), storm, ctx) == 1.0
    assert _pause_origin(Entity("interface", "gpu1:eth0"), storm, ctx) == 0.35  # that one is paused itself


def test_a_switch_port_is_a_relay_when_any_port_of_its_switch_is_paused():
    ctx = Context(topology=TOPO)
    relay = [sym("pfc_pause_tx", "leaf2:swp51"), sym("pfc_pause_rx", "leaf2:swp1")]
    assert _pause_origin(Entity("interface", "leaf2:swp51"), relay, ctx) == 0.35


def test_pause_a_nics_switch_port_receives_is_pause_the_nic_sends():
    """Seen only at the far end of its link (the NIC polled slower than its leaf), a NIC's
    pause still makes it a sender: its port receives those very frames. Pause the leaf
    port *sends* toward the NIC is no such evidence, nor a neighbour port's, and a switch
    port gains nothing from what its NIC receives."""
    ctx = Context(topology=TOPO)
    nic = Entity("interface", "gpu1:eth0")
    assert _pause_origin(nic, [sym("pfc_pause_rx", "leaf1:swp1")], ctx) == 1.0
    assert _pause_origin(nic, [sym("pfc_pause_tx", "leaf1:swp1")], ctx) == 0.8
    assert _pause_origin(nic, [sym("pfc_pause_rx", "leaf1:swp2")], ctx) == 0.8
    # not the other way: a switch port's pause is judged by what it reports itself (0.6 if sending)
    assert _pause_origin(Entity("interface", "leaf1:swp1"), [sym("pfc_pause_rx", "gpu1:eth0")], ctx) == 0.5


def test_a_nics_pause_reaches_the_fabric_only_through_its_own_leaf():
    """A NIC's pause presses its own link's switch; its host's other NICs, on other rails,
    carry none of it. A queue on leaf2 filling toward gpu1's other NIC is no symptom of
    gpu1:eth0's storm, nor is a spine port toward leaf2; the queues toward the storm are."""
    from engine.rank import explain
    ctx = Context(topology=TOPO)
    storm = Entity("interface", "gpu1:eth0")

    def queue(entity: str) -> Symptom:
        return Symptom(key=f"q@{entity}", kind="queue_congested", family="congestion",
                       entity=Entity("interface", entity), device=entity.split(":")[0], start=T0, last=T0 + 30,
                       severity=0.6, rule="queue_congested")
    assert explain("pfc_storm", storm, queue("leaf1:swp1"), ctx) == 0.8  # toward the storm
    assert explain("pfc_storm", storm, queue("spine1:swp1"), ctx) == 0.7  # up the pause tree, toward leaf1
    assert explain("pfc_storm", storm, queue("leaf2:swp1"), ctx) == 0.0  # toward gpu1:eth1, another rail
    assert explain("pfc_storm", storm, queue("spine1:swp2"), ctx) == 0.0  # toward leaf2
    assert explain("pfc_storm", storm, sym("pfc_pause_rx", "spine1:swp1"), ctx) == 0.9  # the pause tree


def test_a_storm_on_one_rail_and_congestion_toward_another_nic_of_its_host_are_two_incidents():
    """Concurrent faults on one rails host (tune-any probe, concurrent3 at 1 s and 10 s):
    gpu1:eth0 storms on rail 1 while leaf2's port down to gpu1:eth1 is congested. The
    congestion had joined the storm's incident (the host is one hop from every leaf), and
    the second fault was never published."""
    from tests.test_correlation_timeline import episode, run, tops
    storm = episode("nic_pfc_tx", "gpu1:eth0", 20, 200) + episode("port_pfc_rx", "leaf1:swp1", 21, 200)
    congestion = episode("queue_congested", "leaf2:swp1", 50, 200) + episode("port_ecn_marking", "leaf2:swp1", 50, 200)
    _, published = run(storm + congestion, until=300, topology=TOPO)
    assert tops(published) == [("congestion", "leaf2:swp1"), ("pfc_storm", "gpu1:eth0")]
