"""Fast verdicts on unambiguous evidence, and a host link that stays down (contract
section 8; engine/credible.py): timelines fed into the correlator second by second, as
in tests/test_correlation_timeline.py (same fabric and helpers), each fast case beside
the benign case that must still never be published.
"""
from __future__ import annotations

import dataclasses

import pytest

from contract.times import parse_rfc3339
from engine.correlate import CorrelationConfig
from engine.pipeline import CorrelateStage
from test_correlation_timeline import KINDS, RULES, T0, TOPO, episode, run, tops

KINDS.update({
    "nic_out_of_buffer": ("nic_out_of_buffer", "nic", "interface", 0.7),
    "nic_discards": ("nic_discards", "nic", "interface", 0.5),
    "port_rx_errors": ("rx_errors", "errors", "interface", 0.7),
    "link_event_down": ("link_down", "link_state", "interface", 0.7),
    "port_admin_down": ("admin_down", "maintenance", "interface", 0.1),
    "storage_latency_loud": ("storage_latency", "storage", "storage", 0.7),
    "nic_pfc_tx_loud": ("pfc_pause_tx", "pfc", "interface", 0.7),
    "port_congested_lossy": ("wred_drops", "congestion", "interface", 0.6),
})
LOUD = CorrelateStage(topology=TOPO, rules=RULES).correlator.config  # as the stage builds it from the rules


def detected(incident: dict) -> float:
    return parse_rfc3339(incident["detected_at"]) - T0


def only(published: dict) -> dict:
    assert len(published) == 1, published
    return next(iter(published.values()))


# --- corroborated: independent witnesses at once ---------------------------------------------

def test_a_nic_that_stalls_and_drops_for_want_of_buffer_at_once_is_published_within_three_seconds():
    events = episode("nic_pcie_stall", "gpu1:eth0", 10, 60) + episode("nic_out_of_buffer", "gpu1:eth0", 10.5, 60)
    _, published = run(events, until=90)
    assert tops(published) == [("nic_degraded", "gpu1:eth0")]
    assert detected(only(published)) <= 13  # one witness alone waits 10 s (test_correlation_timeline)


def test_blips_of_two_counters_at_different_times_or_on_two_nics_are_never_published():
    apart = episode("nic_pcie_stall", "gpu1:eth0", 10, 13) + episode("nic_out_of_buffer", "gpu1:eth0", 40, 42)
    two_nics = episode("nic_pcie_stall", "gpu1:eth0", 10, 13) + episode("nic_out_of_buffer", "gpu2:eth0", 10, 13)
    for events in (apart, two_nics):
        c, published = run(events, until=200)
        assert published == {} and c.opened == 0


def test_frames_lost_at_both_ends_of_an_uplink_are_published_at_once_at_one_end_they_wait():
    both = episode("port_rx_errors", "leaf1:swp51", 10, 60) + episode("port_rx_errors", "spine1:swp1", 11, 60)
    _, published = run(both, until=90)
    assert tops(published) == [("link_degraded", "leaf1:swp51--spine1:swp1")]
    assert detected(only(published)) <= 14
    _, published = run(episode("port_rx_errors", "leaf1:swp51", 10, 16), until=90)
    assert published == {}  # 6 s at one end, once: a blip


# --- loud rules (at_once): credible once the rule's own for_s is met -------------------------

def test_the_rules_loud_evidence_reaches_the_correlators_persistence():
    assert {"nic_pfc_tx_loud", "storage_latency_loud", "port_congested_lossy"} <= LOUD.persistence.loud_rules
    assert LOUD.persistence.loud_rules == RULES.loud


def test_loud_storage_latency_is_published_at_once_modest_latency_waits_its_30_s():
    _, published = run(episode("storage_latency_loud", "stor1", 10, 80), until=120, config=LOUD)
    assert tops(published) == [("storage_slow", "stor1")]
    assert detected(only(published)) <= 13
    _, published = run(episode("storage_latency", "stor1", 10, 30), until=120, config=LOUD)
    assert published == {}  # 20 s of modest latency (scrubbing, a checkpoint): not a fault


def test_a_nic_pausing_at_line_rate_is_a_storm_at_once():
    _, published = run(episode("nic_pfc_tx_loud", "gpu3:eth0", 10, 80), until=120, config=LOUD)
    assert tops(published) == [("pfc_storm", "gpu3:eth0")]
    assert detected(only(published)) <= 13
    _, published = run(episode("nic_pfc_tx", "gpu3:eth0", 10, 15), until=120, config=LOUD)
    assert published == {}


def test_a_busy_egress_marking_and_dropping_is_congestion_at_once_marks_alone_wait_their_10_s():
    lossy = episode("port_congested_lossy", "leaf1:swp1", 10, 60) + episode("port_ecn_marking", "leaf1:swp1", 10, 60)
    _, published = run(lossy, until=120, config=LOUD)
    assert tops(published) == [("congestion", "leaf1:swp1")]
    assert detected(only(published)) <= 13
    _, published = run(episode("port_ecn_marking", "leaf1:swp1", 10, 16), until=120, config=LOUD)
    assert published == {}  # 6 s of marks without loss: a collective phase


def test_marks_and_loss_on_a_switch_to_switch_link_still_wait_for_attribution():
    _, published = run(episode("port_congested_lossy", "leaf1:swp51", 10, 25), until=120, config=LOUD)
    assert published == {}  # 15 s: shared_congestion_s is 20


def test_loud_congestion_on_a_shared_link_still_waits_for_attribution():
    p = dataclasses.replace(LOUD.persistence, loud_rules=LOUD.persistence.loud_rules | {"port_ecn_marking"})
    _, published = run(episode("port_ecn_marking", "leaf1:swp51", 10, 25), until=120,
                       config=dataclasses.replace(LOUD, persistence=p))
    assert published == {}  # 15 s on a switch-to-switch link: shared_congestion_s is 20


# --- a host link that stays down ---------------------------------------------------------------

def test_a_host_link_its_host_and_its_switch_port_report_down_for_30_s_is_a_dead_cable():
    events = episode("nic_link_down", "gpu1:eth0", 20, None) + episode("port_oper_down", "leaf1:swp1", 20, None) \
        + episode("link_event_down", "leaf1:swp1", 20, 20.5)
    _, published = run(events, until=120)
    assert tops(published) == [("link_flap", "gpu1:eth0--leaf1:swp1")]
    assert 50 <= detected(only(published)) <= 57


@pytest.mark.parametrize("case", ["admin_down", "admin_down_then_silent", "port_up", "bounce"])
def test_a_host_link_down_that_is_not_a_dead_cable_is_never_published(case):
    """A port taken down for maintenance reports admin-down (never oper-down: rule
    port_oper_down excludes it) while its host sees its link down, the switch's link
    event says down too; the admin-down report may stop with a collector gap; a port that
    reports itself up, or a bounce of 20 s, is no dead cable either."""
    host = episode("nic_link_down", "gpu1:eth0", 20, 300)
    admin = episode("link_event_down", "leaf1:swp1", 20, 20.5) + episode("port_admin_down", "leaf1:swp1", 22, 300)
    events = {
        "admin_down": host + admin,
        "admin_down_then_silent": host + episode("link_event_down", "leaf1:swp1", 20, 20.5)
        + episode("port_admin_down", "leaf1:swp1", 22, 60) + episode("switch_silent", "leaf1", 60, 300),
        "port_up": host,
        "bounce": episode("nic_link_down", "gpu1:eth0", 20, 40) + episode("port_oper_down", "leaf1:swp1", 20, 40),
    }[case]
    _, published = run(events, until=400)
    assert published == {}


def test_an_admin_down_reported_after_the_host_link_went_down_holds_the_candidate_while_it_lasts():
    """The admin-down report comes with the switch's next port sample, after the host's
    link-down: the candidate it concerns is judged again, with the port in ctx.admin_down,
    and waits as long as the port is admin-down (here, as no switch would, the port also
    reports itself oper-down: only the admin-down set holds the candidate back)."""
    events = episode("nic_link_down", "gpu1:eth0", 20, 300) + episode("port_oper_down", "leaf1:swp1", 20, 300)
    c, published = run(events + episode("port_admin_down", "leaf1:swp1", 45, 200), until=190)
    assert published == {}
    assert "leaf1:swp1" in c._context().admin_down
    _, published = run(events + episode("port_admin_down", "leaf1:swp1", 45, 200), until=260)
    assert 200 <= detected(only(published)) <= 205


def test_config_default_keeps_loud_rules_off_until_the_rules_say_so():
    assert CorrelationConfig().persistence.loud_rules == frozenset()
