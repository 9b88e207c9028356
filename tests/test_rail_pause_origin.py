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
