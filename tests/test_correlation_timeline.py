"""Correlation timelines (contract section 8): symptoms fed into the correlator in event
time, with the watermark advanced second by second, and what it publishes checked.

Fabric: spine1, spine2; leaf1 (gpu1, gpu2), leaf2 (gpu3, gpu4, stor1); every leaf has an
uplink to each spine (swp51 to spine1, swp52 to spine2). An active symptom is refreshed
every 5 s as the detect stage does (`refresh_s`), so its last sign is known.
"""
from __future__ import annotations

import itertools

import pytest

from engine.attribution import dominant_jobs, host_load
from engine.correlate import CorrelationConfig, Correlator
from engine.credible import Persistence
from engine.jobs import JobBook
from engine.rank import Context
from engine.topology import Topology
from engine.types import Entity, Job, Symptom
from rules.loader import load_rules

T0 = 1764400000.0
RULES = load_rules(None)

ROLES = {"spine1": "spine", "spine2": "spine", "leaf1": "leaf", "leaf2": "leaf",
         "gpu1": "host", "gpu2": "host", "gpu3": "host", "gpu4": "host", "stor1": "storage"}
LINKS = [("leaf1:swp51", "spine1:swp1"), ("leaf1:swp52", "spine2:swp1"),
         ("leaf2:swp51", "spine1:swp2"), ("leaf2:swp52", "spine2:swp2"),
         ("gpu1:eth0", "leaf1:swp1"), ("gpu2:eth0", "leaf1:swp2"),
         ("gpu3:eth0", "leaf2:swp1"), ("gpu4:eth0", "leaf2:swp2"), ("stor1:eth0", "leaf2:swp3")]
TOPO = Topology.from_links(roles=ROLES, links=LINKS)

# rule id, symptom kind, family, entity kind, severity: as the catalogue raises them
KINDS = {
    "nic_pcie_stall": ("nic_pcie_stall", "nic", "interface", 0.6),
    "port_ecn_marking": ("ecn_marking", "congestion", "interface", 0.6),
    "queue_congested": ("queue_congested", "congestion", "interface", 0.6),
    "nic_cnp_sent": ("cnp_receiver", "congestion", "interface", 0.4),
    "port_pfc_tx": ("pfc_pause_tx", "pfc", "interface", 0.6),
    "port_pfc_rx": ("pfc_pause_rx", "pfc", "interface", 0.5),
    "nic_pfc_tx": ("pfc_pause_tx", "pfc", "interface", 0.7),
    "nic_link_down": ("link_down", "link_state", "interface", 0.7),
    "port_oper_down": ("link_down", "link_state", "interface", 0.7),
    "port_carrier_flap": ("link_flap", "link_state", "interface", 0.8),
    "nic_link_flap": ("link_flap", "link_state", "interface", 0.8),
    "switch_silent": ("switch_silent", "silence", "switch", 0.9),
    "storage_latency": ("storage_latency", "storage", "storage", 0.7),
    "nic_tx_busy": ("nic_tx_busy", "load", "interface", 0.1),
    "nic_rx_busy": ("nic_rx_busy", "load", "interface", 0.1),
    "nic_tx_saturated": ("nic_tx_saturated", "job_surge", "interface", 0.4),
}


def episode(rule: str, entity: str, start: float, end: float | None, *, metrics: dict | None = None,
            refresh: float = 5.0) -> list[tuple[float, Symptom]]:
    """(when the correlator hears it, the symptom as sent) for one symptom seen from
    T0+start to T0+end (None: still active at the end of the test): its start, a refresh
    each `refresh` s of its age, and its end."""
    kind, family, ekind, severity = KINDS[rule]
    device = entity.split(":")[0]
    t0 = T0 + start
    key = f"{rule}@{entity}@{t0:.3f}"

    def sent(last: float, ended: bool) -> Symptom:
        return Symptom(key=key, kind=kind, family=family, entity=Entity(ekind, entity), device=device, start=t0,
                       last=last, end=last if ended else None, severity=severity, metrics=dict(metrics or {}),
                       rule=rule)

    out = [(t0, sent(t0, False))]
    stop = T0 + end if end is not None else T0 + 3600
    ages = itertools.takewhile(lambda t: t < stop, (t0 + k * refresh for k in itertools.count(1)))
    out += [(t, sent(t, False)) for t in ages]
    if end is not None:
        out.append((stop, sent(stop, True)))
    return out


def run(events: list[tuple[float, Symptom]], *, until: float, jobs: list[Job] = (),
        config: CorrelationConfig = CorrelationConfig(), topology: Topology = TOPO,
        first: dict | None = None) -> tuple[Correlator, dict]:
    """Feed the events in time order, advancing the watermark each second; the latest
    version of each published incident, by id (and into `first`, if given, the first
    version: what paged someone)."""
    book = JobBook()
    for j in jobs:
        book.update(j)
    c = Correlator(topology=topology, jobs=book, opens_incident=RULES.opens_incident, config=config)
    events = sorted(events, key=lambda e: (e[0], e[1].key, e[1].end is not None))
    latest: dict[str, dict] = {}
    i = 0
    for sec in range(0, int(until) + 1):
        now = T0 + sec
        while i < len(events) and events[i][0] <= now:
            c.add(events[i][1])
            i += 1
        c.advance(now)
        for inc in c.drain():
            latest[inc["id"]] = inc
            if first is not None:
                first.setdefault(inc["id"], inc)
    return c, latest


def tops(incidents: dict) -> list[tuple[str, str]]:
    return sorted((i["root_causes"][0]["cause"], i["root_causes"][0]["entity"]["id"]) for i in incidents.values())


# --- persistence --------------------------------------------------------------------------

def test_a_lone_pcie_stall_blip_is_never_published_and_is_forgotten():
    c, published = run(episode("nic_pcie_stall", "gpu1:eth0", 10, 13), until=200)
    assert published == {}
    assert c.open == {} and c.opened == 0


def test_a_sustained_pcie_stall_is_published_once_it_has_lasted_ten_seconds():
    _, published = run(episode("nic_pcie_stall", "gpu1:eth0", 10, 60), until=90)
    assert tops(published) == [("nic_degraded", "gpu1:eth0")]
    inc = next(iter(published.values()))
    from contract.times import parse_rfc3339
    assert parse_rfc3339(inc["detected_at"]) - T0 == pytest.approx(20, abs=2.5)  # 10 s of evidence, then settle
    assert parse_rfc3339(inc["opened_at"]) - T0 == 10


def test_the_same_nic_stalling_again_and_again_is_a_fault():
    events = [e for k in range(3) for e in episode("nic_pcie_stall", "gpu1:eth0", 10 + 15 * k, 13 + 15 * k)]
    _, published = run(events, until=150)
    assert tops(published) == [("nic_degraded", "gpu1:eth0")]


def test_ecn_cnp_bursts_of_collective_phases_open_nothing():
    # a 2 s burst at a host port every minute for ten minutes (an all-to-all phase)
    events = []
    for k in range(10):
        t = 30 + 60 * k
        events += episode("port_ecn_marking", "leaf1:swp1", t, t + 2) + episode("nic_cnp_sent", "gpu1:eth0", t, t + 2)
    _, published = run(events, until=700)
    assert published == {}


def test_sustained_congestion_at_a_host_port_opens_one_incident():
    events = episode("port_ecn_marking", "leaf1:swp1", 30, 90) + episode("queue_congested", "leaf1:swp1", 31, 90) \
        + episode("nic_cnp_sent", "gpu1:eth0", 31, 90)
    _, published = run(events, until=200)
    assert tops(published) == [("congestion", "leaf1:swp1")]


def test_a_host_link_that_goes_down_once_is_not_a_flap_but_repeated_transitions_are():
    once = episode("nic_link_down", "gpu1:eth0", 20, 35) + episode("port_oper_down", "leaf1:swp1", 20, 35)
    _, published = run(once, until=150)
    assert published == {}
    flapping = once + episode("port_carrier_flap", "leaf1:swp1", 20, 80)
    _, published = run(flapping, until=150)
    assert tops(published) == [("link_flap", "gpu1:eth0--leaf1:swp1")]


def test_a_collector_gap_is_not_a_dead_switch_but_a_switch_its_peers_lose_is():
    gap = episode("switch_silent", "spine1", 20, 120)
    _, published = run(gap, until=200)
    assert published == {}
    dead = gap + episode("port_oper_down", "leaf1:swp51", 21, 120) + episode("port_oper_down", "leaf2:swp51", 22, 120)
    _, published = run(dead, until=200)
    assert tops(published) == [("device_down", "spine1")]


def test_a_host_link_flapping_while_its_leafs_collector_is_silent_is_a_flap_not_a_dead_leaf():
    """A collector gap of leaf1 while gpu1's link flaps: gpu1 sees its link go down and
    come back, the leaf says nothing. Its other links are up at their far ends (no
    symptom from gpu2 or the spines): silent, not down (tune-any probe at 5 and 10 s,
    8 of 8 named device_down before)."""
    flap = (episode("switch_silent", "leaf1", 15, 90) + episode("nic_link_down", "gpu1:eth0", 20, 25)
            + episode("nic_link_down", "gpu1:eth0", 40, 45) + episode("nic_link_flap", "gpu1:eth0", 20, 60))
    _, published = run(flap, until=200)
    assert tops(published) == [("link_flap", "gpu1:eth0--leaf1:swp1")]
    dead = flap + episode("nic_link_down", "gpu2:eth0", 16, 90) + episode("port_oper_down", "spine1:swp1", 16, 90) \
        + episode("port_oper_down", "spine2:swp1", 17, 90)
    _, published = run(dead, until=200)
    assert ("device_down", "leaf1") in tops(published)  # every far end sees its link down: dead


def test_a_switch_reporting_its_own_ports_down_is_alive():
    events = episode("port_oper_down", "leaf1:swp51", 20, 120) + episode("port_oper_down", "leaf1:swp52", 20, 120)
    _, published = run(events, until=200)
    assert ("device_down", "leaf1") not in tops(published)


def test_persistence_is_measured_in_event_time_whatever_the_refresh():
    """The same 8 s of evidence is not credible at 1 s or 5 s refreshes; 12 s is."""
    p, ctx = Persistence(), Context(TOPO)
    for refresh in (1.0, 5.0):
        short = [s for _, s in episode("nic_pcie_stall", "gpu1:eth0", 0, 8, refresh=refresh)]
        long = [s for _, s in episode("nic_pcie_stall", "gpu1:eth0", 0, 12, refresh=refresh)]
        nic = Entity("interface", "gpu1:eth0")
        assert not p.credible("nic_degraded", nic, [short[-1]], ctx)
        assert p.credible("nic_degraded", nic, [long[-1]], ctx)


# --- pause: origin versus victim -----------------------------------------------------------

def test_a_host_nic_pause_storm_is_the_root_and_the_relaying_switch_ports_join_it():
    events = episode("nic_pfc_tx", "gpu1:eth0", 20, 100) + episode("port_pfc_rx", "leaf1:swp1", 21, 100) \
        + episode("port_pfc_tx", "leaf1:swp51", 24, 100) + episode("port_pfc_rx", "spine1:swp1", 25, 100) \
        + episode("port_pfc_tx", "spine1:swp2", 27, 100) + episode("port_pfc_rx", "leaf2:swp51", 28, 100)
    _, published = run(events, until=200)
    assert tops(published) == [("pfc_storm", "gpu1:eth0")]
    assert len(next(iter(published.values()))["symptoms"]) == 6


def test_a_nic_polled_slowly_is_seen_storming_by_the_switch_port_it_pauses():
    """The NIC reports every 60 s, its switches every 15 s: the pause its leaf port
    receives is the pause it sends, so the storm is published on the port's evidence,
    named at the NIC, long before the NIC's own rule has its samples; pause the NIC
    receives, seen at its port, is no such evidence (the port sends it)."""
    first: dict = {}
    storm = episode("port_pfc_rx", "leaf1:swp1", 20, 100) + episode("port_pfc_tx", "leaf1:swp51", 22, 100) \
        + episode("port_pfc_rx", "spine1:swp1", 23, 100) + episode("nic_pfc_tx", "gpu1:eth0", 140, 160)
    _, published = run(storm, until=300, first=first)
    assert tops(published) == [("pfc_storm", "gpu1:eth0")]
    from contract.times import parse_rfc3339
    inc = next(iter(first.values()))
    assert inc["root_causes"][0]["entity"]["id"] == "gpu1:eth0"
    assert parse_rfc3339(inc["detected_at"]) - T0 <= 35  # 10 s of the port's evidence, then settle
    relayed = episode("port_pfc_tx", "leaf1:swp1", 20, 100) + episode("port_pfc_rx", "leaf1:swp51", 20, 100)
    _, published = run(relayed, until=300)
    assert ("pfc_storm", "gpu1:eth0") not in tops(published)


def test_a_switch_port_sending_pause_beside_a_congested_egress_is_a_victim():
    events = episode("queue_congested", "leaf1:swp2", 20, 100) + episode("port_ecn_marking", "leaf1:swp2", 20, 100) \
        + episode("port_pfc_tx", "leaf1:swp1", 22, 100)
    _, published = run(events, until=200)
    assert len(published) == 1
    assert tops(published)[0] == ("congestion", "leaf1:swp2")


def test_a_queue_toward_a_switch_that_sends_pause_is_its_victim_before_its_own_counters_say_so():
    """A weak storm from gpu3 seen at coarse polling (tune-range probe pfc_storm-9 at 7 s):
    spine1's queue toward leaf2 fills from 22 s, leaf2 is seen pausing spine2 from 27 s,
    but spine1:swp2's own pause counters need a sample more (45 s), and the leaf's port
    facing the NIC and the NIC itself come later still. The first page named congestion
    at spine1:swp2; a buffer that pauses one sender into it pauses the others, so the
    queue is the pause's victim from 27 s, and the first page names the storm."""
    first: dict = {}
    events = episode("queue_congested", "spine1:swp2", 22, 120) + episode("port_pfc_rx", "spine2:swp2", 27, 120) \
        + episode("port_pfc_rx", "spine1:swp2", 45, 120) + episode("port_pfc_rx", "leaf2:swp1", 50, 120) \
        + episode("nic_pfc_tx", "gpu3:eth0", 60, 120)
    _, published = run(events, until=240, first=first)
    assert tops(published) == [("pfc_storm", "gpu3:eth0")]
    assert [i["root_causes"][0]["entity"]["id"] for i in first.values()] == ["gpu3:eth0"]
    _, published = run(episode("queue_congested", "spine1:swp2", 22, 120), until=240)
    assert tops(published) == [("congestion", "spine1:swp2")]  # no pause anywhere: a congestion


# --- cascades -------------------------------------------------------------------------------

def test_rerouting_congestion_after_a_fabric_link_flap_joins_the_flap():
    events = episode("port_carrier_flap", "leaf1:swp51", 20, 120) + episode("port_oper_down", "leaf1:swp51", 20, 24) \
        + episode("queue_congested", "leaf1:swp52", 26, 120) + episode("port_ecn_marking", "leaf1:swp52", 26, 120)
    _, published = run(events, until=200)
    assert tops(published) == [("link_flap", "leaf1:swp51--spine1:swp1")]


def test_the_port_of_a_slow_storage_target_joins_its_incident():
    events = episode("storage_latency", "stor1", 20, 150) + episode("port_pfc_rx", "leaf2:swp3", 25, 150)
    _, published = run(events, until=250)
    assert tops(published) == [("storage_slow", "stor1")]
    assert len(next(iter(published.values()))["symptoms"]) == 2


# --- noisy neighbour by attribution ----------------------------------------------------------

NOISY = Job("7", "acme", "u", "RUNNING", ("gpu1", "gpu3"), (), T0 - 3600, None)
VICTIM = Job("8", "globex", "u", "RUNNING", ("gpu2", "gpu4"), (), T0 - 3600, None)


def uplink_congestion(start: float, end: float) -> list[tuple[float, Symptom]]:
    return episode("queue_congested", "leaf1:swp51", start, end) + episode("port_ecn_marking", "leaf1:swp51",
                                                                             start, end) \
        + episode("queue_congested", "spine1:swp2", start + 1, end) + episode("nic_cnp_sent", "gpu2:eth0",
                                                                           start + 2, end)


def test_a_job_whose_unsaturated_hosts_fill_the_uplinks_is_named_noisy_neighbor():
    load = episode("nic_tx_busy", "gpu1:eth0", 20, 120, metrics={"util_tx": 0.75}) \
        + episode("nic_tx_busy", "gpu3:eth0", 20, 120, metrics={"util_tx": 0.7})
    _, published = run(load + uplink_congestion(22, 120), until=220, jobs=[NOISY, VICTIM])
    assert tops(published) == [("noisy_neighbor", "7")]
    inc = next(iter(published.values()))
    assert {j["job_id"] for j in inc["affected_jobs"]} == {"7", "8"}


def test_uplink_congestion_shared_evenly_names_no_job():
    load = [e for h in ("gpu1", "gpu2", "gpu3", "gpu4")
            for e in episode("nic_tx_busy", f"{h}:eth0", 20, 120, metrics={"util_tx": 0.7})]
    _, published = run(load + uplink_congestion(22, 120), until=220, jobs=[NOISY, VICTIM])
    assert published and all(cause != "noisy_neighbor" for cause, _ in tops(published))


def test_attribution_splits_a_link_over_the_jobs_that_send_across_it():
    congested = [s for _, s in episode("queue_congested", "leaf1:swp51", 0, 30)[:1]]
    nics = [s for h, u in (("gpu1", 0.8), ("gpu3", 0.6), ("gpu2", 0.2))
            for _, s in episode("nic_tx_busy", f"{h}:eth0", 0, 30, metrics={"util_tx": u})[:1]]
    found = dominant_jobs(congested=congested, load=host_load(nics), jobs=[NOISY, VICTIM], topology=TOPO)
    # leaf1:swp51 is leaf1's egress up: gpu3 (under leaf2) sends nothing through it
    assert set(found) == {"7"} and found["7"].share == pytest.approx(0.8 / 1.0, abs=1e-3)
    assert found["7"].links == ("leaf1:swp51--spine1:swp1",)
    alone = dominant_jobs(congested=congested, load=host_load(nics), jobs=[NOISY], topology=TOPO)
    assert alone == {}  # nobody else on the link: busy, not noisy


# --- the detect stage tells the correlator that an active symptom is still seen -------------

def test_the_detect_stage_refreshes_an_active_symptom_every_refresh_s_of_its_age():
    import orjson

    from engine.pipeline import DetectStage, EngineConfig
    stage = DetectStage(rules=RULES, roles={"leaf1": "leaf", "leaf2": "leaf", "spine1": "spine"},
                        config=EngineConfig(refresh_s=5.0))
    events = []
    for sec in range(60):
        for host in ("leaf1", "leaf2", "spine1"):
            hot = host == "leaf1" and 5 <= sec <= 30
            rec = {"name": "switch_queue", "timestamp": int(T0) + sec,
                   "tags": {"host": host, "interface": "swp1", "queue": "3", "queue_type": "UC"},
                   "fields": {"curr_occupancy_bytes": 3_000_000 if hot else 0}}
            stage.feed(orjson.dumps(rec))
        events += stage.events()
    stage.finish()
    events += stage.events()
    sent = [e.symptom for e in events if e.symptom is not None and e.symptom.kind == "queue_congested"]
    assert len({s.key for s in sent}) == 1 and stage.stats.symptoms == 1
    # sent when it starts (after the rule's for_s), then each time its age crosses 5 s more
    ages = [int((s.last - s.start) // 5) for s in sent if s.end is None]
    assert len(ages) >= 3 and ages == list(range(ages[0], ages[0] + len(ages))) and ages[-1] == 5
    assert sent[-1].end is not None and sent[-1].end - sent[-1].start == 25


def test_a_hit_that_jumps_over_a_refresh_boundary_still_refreshes():
    """Microbursts come and go: the hits of an active symptom may skip whole seconds."""
    import orjson

    from engine.pipeline import DetectStage, EngineConfig
    stage = DetectStage(rules=RULES, roles={"leaf1": "leaf", "leaf2": "leaf", "spine1": "spine"},
                        config=EngineConfig(refresh_s=5.0))
    hot = {5, 6, 7, 12, 13, 19, 26, 33}  # bursts 6-7 s apart
    events = []
    for sec in range(70):
        for host in ("leaf1", "leaf2", "spine1"):
            drops = host == "leaf1" and sec in hot
            rec = {"name": "switch_port", "timestamp": int(T0) + sec, "tags": {"host": host, "interface": "swp1"},
                   "fields": {"if_out_discards": 1000 * sum(1 for h in hot if h <= sec) if host == "leaf1" else 0,
                              "if_out_octets": 1000 * sec, "speed_mbps": 400000}}
            stage.feed(orjson.dumps(rec))
        events += stage.events()
    stage.finish()
    events += stage.events()
    sent = [e.symptom for e in events if e.symptom is not None and e.symptom.kind == "microburst"]
    ages = [s.last - s.start for s in sent if s.end is None]
    assert len({s.key for s in sent}) == 1 and len(ages) >= 3
    assert all(int(b // 5) > int(a // 5) for a, b in zip(ages, ages[1:]))
