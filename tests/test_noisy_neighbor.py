"""Noisy neighbour by attribution (contract section 8), as timelines: NIC load and
congestion on shared links fed into the correlator in event time, and what it publishes.

Fabric of tests/test_correlation_timeline.py: spine1, spine2; leaf1 (gpu1, gpu2), leaf2
(gpu3, gpu4, stor1). A job's load on a congested switch-to-switch link is its hosts'
transmit utilisation (`nic_tx_busy`, reported above half line rate) that crosses it.
"""
from __future__ import annotations

from engine.topology import Topology
from engine.types import Job
from tests.test_correlation_timeline import T0, episode, run, tops, uplink_congestion

NOISY = Job("7", "acme", "u", "RUNNING", ("gpu1", "gpu3"), (), T0 - 3600, None)
VICTIM = Job("8", "globex", "u", "RUNNING", ("gpu2", "gpu4"), (), T0 - 3600, None)
BIG = Job("9", "initech", "u", "RUNNING", ("gpu1", "gpu2", "gpu3", "gpu4"), (), T0 - 3600, None)


def busy(host: str, util: float, start: float, end: float) -> list:
    return episode("nic_tx_busy", f"{host}:eth0", start, end, metrics={"util_tx": util})


def test_of_two_busy_jobs_sharing_the_uplinks_the_one_that_fills_them_is_named():
    # The victim sends too (above half line rate on one host), but the noisy job's two
    # hosts at 80-85 % carry three quarters of what crosses the congested uplink.
    load = busy("gpu1", 0.85, 20, 140) + busy("gpu3", 0.8, 20, 140) + busy("gpu2", 0.55, 0, 140)
    _, published = run(load + uplink_congestion(22, 140), until=240, jobs=[NOISY, VICTIM])
    assert tops(published) == [("noisy_neighbor", "7")]
    inc = next(iter(published.values()))
    assert {j["job_id"] for j in inc["affected_jobs"]} == {"7", "8"}


def test_a_big_jobs_all_to_all_phases_open_nothing():
    # One job on every host; a few seconds of all-to-all every 30 s fill the uplinks with
    # ECN marks and CNPs (section 8: normal workload, and no other tenant on the links).
    events = []
    for k in range(6):
        t = 20 + 30 * k
        events += [e for h in BIG.hosts for e in busy(h, 0.9, t, t + 4)] + uplink_congestion(t, t + 4)
    _, published = run(events, until=300, jobs=[BIG])
    assert published == {}


def test_a_big_job_filling_the_uplinks_alone_is_not_a_noisy_neighbour():
    # Sustained: a long collective of the only job on those links. Whatever it is, it is
    # nobody's noisy neighbour.
    load = [e for h in BIG.hosts for e in busy(h, 0.8, 20, 140)]
    _, published = run(load + uplink_congestion(22, 140), until=240, jobs=[BIG])
    assert all(cause != "noisy_neighbor" for cause, _ in tops(published))


def test_a_noisy_jobs_collective_phases_beside_a_neighbour_open_nothing():
    # Phases of a few seconds, even with another tenant on the links, are normal workload.
    events = []
    for k in range(6):
        t = 20 + 30 * k
        events += busy("gpu1", 0.9, t, t + 4) + busy("gpu3", 0.9, t, t + 4) + uplink_congestion(t, t + 4)
    _, published = run(events, until=300, jobs=[NOISY, VICTIM])
    assert published == {}


def saturated(host: str, start: float, end: float) -> list:
    return episode("nic_tx_saturated", f"{host}:eth0", start, end, metrics={"util_tx": 0.9}) \
        + busy(host, 0.9, start, end)


def test_a_job_ramping_up_to_near_line_rate_that_congests_nothing_is_not_a_noisy_neighbour():
    # Section 8: a job ramping up to high but unsaturated link load, a link at 90 % that
    # drops nothing. Its hosts at 90 % of line rate for minutes, every shared link
    # uncongested: nobody is hurt (seen on tune-wide: a ramp to 0.89 opened noisy_neighbor).
    load = saturated("gpu1", 20, 200) + saturated("gpu3", 25, 200)
    _, published = run(load, until=300, jobs=[NOISY, VICTIM])
    assert published == {}


def test_a_job_saturating_its_hosts_and_the_uplinks_it_shares_is_a_noisy_neighbour():
    load = saturated("gpu1", 20, 140) + saturated("gpu3", 20, 140) + busy("gpu2", 0.55, 0, 140)
    _, published = run(load + uplink_congestion(24, 140), until=240, jobs=[NOISY, VICTIM])
    assert tops(published) == [("noisy_neighbor", "7")]


# --- a congested port carries only what is sent through it ----------------------------------
# Three leaves: leaf1 (gpu1, gpu2), leaf2 (gpu3, gpu4), leaf3 (gpu5, gpu6), each with an
# uplink to both spines.
ROLES3 = {"spine1": "spine", "spine2": "spine"} | {f"leaf{k}": "leaf" for k in (1, 2, 3)} \
    | {f"gpu{k}": "host" for k in range(1, 7)}
LINKS3 = [(f"leaf{k}:swp5{s}", f"spine{s}:swp{k}") for k in (1, 2, 3) for s in (1, 2)] \
    + [(f"gpu{h}:eth0", f"leaf{(h + 1) // 2}:swp{2 - h % 2}") for h in range(1, 7)]
TOPO3 = Topology.from_links(roles=ROLES3, links=LINKS3)
PAIR = Job("21", "acme", "u", "RUNNING", ("gpu1", "gpu3"), (), T0 - 3600, None)
WIDE = Job("22", "globex", "u", "RUNNING", ("gpu2", "gpu4", "gpu5", "gpu6"), (), T0 - 3600, None)


def test_a_wide_jobs_traffic_elsewhere_does_not_fill_one_leafs_uplinks():
    # leaf1's uplinks are congested going up. Of what leaf1's hosts send, the pair's gpu1
    # at 95 % carries more than the wide job's gpu2 at 55 %; the wide job's three other
    # busy hosts are under leaf2 and leaf3, and none of their traffic leaves leaf1 upward.
    # Summing every host of each job would make the wide job the noisy one.
    load = busy("gpu1", 0.95, 20, 140) + busy("gpu3", 0.95, 20, 140) + busy("gpu2", 0.55, 20, 140) \
        + [e for h in ("gpu4", "gpu5", "gpu6") for e in busy(h, 0.9, 20, 140)]
    congestion = [e for up in ("leaf1:swp51", "leaf1:swp52") for rule in ("queue_congested", "port_ecn_marking")
                  for e in episode(rule, up, 22, 140)] + episode("nic_cnp_sent", "gpu4:eth0", 24, 140)
    _, published = run(load + congestion, until=240, jobs=[PAIR, WIDE], topology=TOPO3)
    assert tops(published) == [("noisy_neighbor", "21")]
    inc = next(iter(published.values()))
    assert {j["job_id"] for j in inc["affected_jobs"]} == {"21", "22"}


def test_egress_shares_count_what_a_host_sends_through_the_port():
    assert TOPO3.egress_shares(hosts=WIDE.hosts, interface="leaf1:swp51") == {
        "gpu2": 1.0, "gpu4": 0.0, "gpu5": 0.0, "gpu6": 0.0}
    # spine1's port down to leaf3: what the others send to gpu5 and gpu6 (2 of 3 peers)
    shares = TOPO3.egress_shares(hosts=WIDE.hosts, interface="spine1:swp3")
    assert shares == {"gpu2": 2 / 3, "gpu4": 2 / 3, "gpu5": 0.0, "gpu6": 0.0}


# --- jobs placed on the same hosts (pods of several tenants on one node) -------------------
PODS = [Job("23", "umbrella", "u", "RUNNING", ("gpu1", "gpu3", "gpu5"), (), T0 - 3600, None),
        Job("24", "hooli", "u", "RUNNING", ("gpu1", "gpu2", "gpu3", "gpu4"), (), T0 - 3600, None)]


def test_a_noisy_job_whose_hosts_other_tenants_share_is_still_named():
    # gpu1 and gpu3 at 95 % are the pair's; two other tenants have pods on gpu1 and gpu3
    # too, beside hosts of theirs that are idle. A NIC sends its bytes once: summing the
    # jobs' loads counted gpu1's traffic once per job placed on it, so no job held 60 % of
    # the congested uplink (split-wide3 noisy_neighbor-4 on rails: congestion named). Of
    # the jobs that carry the same load, the one whose hosts are all busy explains it (the
    # umbrella job's gpu5 sends nothing; its load through leaf1's uplink ties the pair's).
    load = busy("gpu1", 0.95, 20, 140) + busy("gpu3", 0.95, 20, 140)
    congestion = [e for up in ("leaf1:swp51", "leaf1:swp52") for rule in ("queue_congested", "port_ecn_marking")
                  for e in episode(rule, up, 22, 140)] + episode("nic_cnp_sent", "gpu4:eth0", 24, 140)
    _, published = run(load + congestion, until=240, jobs=[PAIR, WIDE, *PODS], topology=TOPO3)
    assert tops(published) == [("noisy_neighbor", "21")]


def test_a_collector_gap_beside_the_first_congestion_keeps_no_incident_of_its_own():
    # spine2's telemetry stops (a collector gap: its silence opens nothing by itself); the
    # noisy job's first congested port, spine1's down to leaf2, lands beside the silence
    # before the job's surge is derived, and the surge founds a candidate of its own. The
    # surge explains that congestion, the silence explains nothing of the job's: the
    # silence kept the group apart, published as congestion (tune-big noisy_neighbor-2).
    gap = episode("switch_silent", "spine2", 10, 160)
    load = busy("gpu1", 0.9, 21, 140) + busy("gpu3", 0.9, 21, 140) + busy("gpu2", 0.55, 0, 140)
    congestion = episode("queue_congested", "spine1:swp2", 22, 140) + uplink_congestion(23, 140)
    _, published = run(gap + load + congestion, until=260, jobs=[NOISY, VICTIM])
    assert tops(published) == [("noisy_neighbor", "7")]


# --- a job reading its storage: seen from the receiving end ---------------------------------
READER = Job("10", "acme", "u", "RUNNING", ("gpu1", "gpu2"), ("stor1",), T0 - 3600, None)
NEIGHBOUR = Job("11", "globex", "u", "RUNNING", ("gpu1", "gpu2"), ("stor1",), T0 - 3600, None)
SMALL = Job("12", "globex", "u", "RUNNING", ("gpu2",), ("stor1",), T0 - 3600, None)


def reading(host: str, util: float, start: float, end: float) -> list:
    return episode("nic_rx_busy", f"{host}:eth0", start, end, metrics={"util_rx": util})


def downlink_congestion(start: float, end: float) -> list:
    """spine1's port down to leaf1 (and spine2's) congested: what storage under leaf2
    sends to leaf1's hosts."""
    return episode("queue_congested", "spine1:swp1", start, end) + episode("queue_congested", "spine2:swp1",
                                                                            start, end) \
        + episode("nic_cnp_sent", "gpu2:eth0", start + 2, end)


def test_a_job_on_one_leaf_reading_its_storage_hard_is_named_by_what_its_hosts_receive():
    # Its hosts share leaf1: nothing they send each other crosses a spine, so by what
    # they transmit no job loads the spines' ports down to leaf1. What they receive from
    # stor1 (under leaf2) does, and the other tenant reading the same storage is hurt.
    load = reading("gpu1", 0.95, 20, 140) + reading("gpu2", 0.9, 20, 140)
    _, published = run(load + downlink_congestion(22, 140), until=240, jobs=[READER, SMALL])
    assert tops(published) == [("noisy_neighbor", "10")]


def test_without_the_receive_load_nobody_is_named_and_a_lone_reader_is_nobodys_neighbour():
    _, published = run(downlink_congestion(22, 140), until=240, jobs=[READER, SMALL])
    assert all(cause != "noisy_neighbor" for cause, _ in tops(published))
    load = reading("gpu1", 0.95, 20, 140) + reading("gpu2", 0.9, 20, 140)
    _, published = run(load + downlink_congestion(22, 140), until=240, jobs=[READER])
    assert all(cause != "noisy_neighbor" for cause, _ in tops(published))


def test_ingress_shares_count_what_arrives_through_the_port_from_the_jobs_sources():
    from tests.test_correlation_timeline import TOPO
    # From stor1 (leaf2) to gpu1 (leaf1): down through spine1:swp1 or spine2:swp1
    assert TOPO.ingress_shares(hosts=("gpu1", "gpu2"), storage=("stor1",), interface="spine1:swp1") \
        == {"gpu1": 0.5, "gpu2": 0.5}  # half of each host's sources (stor1; not its leaf-mate)
    assert TOPO.ingress_shares(hosts=("gpu1", "gpu2"), storage=("stor1",), interface="leaf1:swp51") \
        == {"gpu1": 0.0, "gpu2": 0.0}  # leaf1's uplink carries what leaves leaf1, not what reaches it
    assert TOPO.ingress_shares(hosts=("gpu3",), storage=("stor1",), interface="spine1:swp2") == {"gpu3": 0.0}


def test_surges_of_jobs_sharing_hosts_are_one_incident_and_of_jobs_apart_two():
    """Attribution reads hosts' NIC rates, which jobs on one host share: two noisy-neighbour
    candidates naming jobs that share a host are one fault (a rails fabric of three hosts
    ran every job on two or three of them and its surge was published twice); jobs on
    hosts apart stay two."""
    from engine.correlate import Correlator
    from engine.incidents import Incident
    from engine.jobs import JobBook
    from engine.types import Entity, RootCause
    from tests.test_correlation_timeline import RULES, TOPO

    shares = Job("10", "hooli", "u", "RUNNING", ("gpu3", "gpu4"), (), T0 - 3600, None)  # gpu3 is NOISY's too
    apart = Job("11", "hooli", "u", "RUNNING", ("gpu2",), (), T0 - 3600, None)  # none of NOISY's
    book = JobBook()
    for j in (NOISY, shares, apart):
        book.update(j)
    c = Correlator(topology=TOPO, jobs=book, opens_incident=RULES.opens_incident)
    c.watermark = T0

    def led_by(job: str) -> Incident:
        (_, surge), *_ = episode("nic_tx_saturated", "gpu4:eth0", 20, 60)  # what NOISY does not explain
        return Incident(id=job, opened_at=T0, updated_at=T0, symptoms={surge.key: surge},
                        root_causes=[RootCause(1, "noisy_neighbor", Entity("job", job), 0.6)])
    ctx = c._context()
    assert c._same_fault(led_by("7"), led_by("10"), ctx)
    assert not c._same_fault(led_by("7"), led_by("11"), ctx)


def test_the_models_evidence_at_a_noisy_jobs_host_port_beside_a_link_bounce_is_the_jobs():
    """A host's link bounce (it opens nothing by itself) founded a candidate. The models'
    evidence of congestion at the port down to one of the noisy job's own hosts then
    joined that candidate and leads it. That lead is the job's traffic: its host link,
    explained 0.5. So the candidate belongs to the job's incident, even though none of its
    symptoms that can open an incident are the job's. (A 1-2 s probe had published it as
    congestion beside the job's incident.) The same evidence at the port of a host the job
    does not run on stays apart."""
    import dataclasses

    from engine.correlate import Correlator
    from engine.incidents import Incident
    from engine.jobs import JobBook
    from engine.types import Entity, RootCause
    from models.scorer import RULE_PREFIX
    from models.scorer import opens_incident as model_opens
    from tests.test_correlation_timeline import RULES, TOPO

    book = JobBook()
    for j in (NOISY, VICTIM):
        book.update(j)
    opens = lambda rule: model_opens(rule) if rule.startswith(RULE_PREFIX) else RULES.opens_incident(rule)  # noqa: E731
    c = Correlator(topology=TOPO, jobs=book, opens_incident=opens)
    c.watermark = T0 + 30
    ctx = c._context()

    def first(rule: str, entity: str, name: str | None = None):
        (_, s), *_ = episode(rule, entity, 5, 60)
        return dataclasses.replace(s, rule=name, key=f"{name}@{entity}") if name else s

    def led_by(cause: str, entity: str, symptoms: list) -> Incident:
        kind = "job" if cause == "noisy_neighbor" else "interface"
        return Incident(id=entity, opened_at=T0, updated_at=T0, symptoms={s.key: s for s in symptoms},
                        root_causes=[RootCause(1, cause, Entity(kind, entity), 0.6)])

    job = led_by("noisy_neighbor", "7", [first("nic_tx_saturated", "gpu1:eth0")])
    bounce = [first("nic_link_down", "gpu2:eth0"), first("port_oper_down", "leaf1:swp2")]
    for port, theirs in (("leaf1:swp1", True), ("leaf2:swp2", False)):  # gpu1's (the job's), gpu4's (not)
        models = [first("port_ecn_marking", port, f"{RULE_PREFIX}switch_port:ecn_marking"),
                  first("queue_congested", port, f"{RULE_PREFIX}queue:queue_congested")]
        assert not any(opens(s.rule) for s in models) and all(opens(s.rule) for s in bounce)
        assert c._same_fault(job, led_by("congestion", port, bounce + models), ctx) is theirs


def test_of_jobs_surging_on_shared_hosts_the_one_attribution_names_leads():
    """Jobs placed on the same saturated hosts all surge (most of their hosts saturated,
    a shared link congested), but only one holds the dominant share of the congested
    uplink. Before, a co-tenant on the noisy job's gpu3 and on the victim's gpu2 (whose
    host port is congested too) explained more of the incident and led it (tune-any probe at 2 s,
    noisy_neighbor-4, a rails fabric of four hosts and six jobs): attribution is what tells
    them apart (contract section 8), so an unattributed surge ranks below it."""
    cotenant = Job("12", "hooli", "u", "RUNNING", ("gpu2", "gpu3"), (), T0 - 3600, None)
    load = saturated("gpu1", 20, 140) + saturated("gpu3", 20, 140) + busy("gpu2", 0.55, 0, 140)
    # the victim's incast at its own host port: on the co-tenant's paths, not on the noisy job's
    victims = [e for rule in ("queue_congested", "port_ecn_marking") for e in episode(rule, "leaf1:swp2", 23, 140)]
    victims += [e for h in ("gpu4", "gpu2") for e in episode("nic_cnp_sent", f"{h}:eth0", 23, 140)]
    first: dict = {}
    _, published = run(load + uplink_congestion(24, 140) + victims, until=240, jobs=[NOISY, VICTIM, cotenant],
                       first=first)
    assert tops(published) == [("noisy_neighbor", "7")]
    assert tops(first) == [("noisy_neighbor", "7")]
    (inc,) = published.values()
    ranked = [(r["cause"], r["entity"]["id"]) for r in inc["root_causes"]]
    assert ("noisy_neighbor", "12") in ranked  # ranked below it, in the same incident


def test_a_surge_by_saturation_that_attribution_names_later_carries_its_share():
    # The noisy job's hosts saturate from 20 s and the uplink is congested from 24 s, so it
    # surges by saturation; their load (`nic_tx_busy`) is read only from 40 s, when
    # attribution names it. Its surge then carries its share, which ranks it (above).
    load = [e for h in ("gpu1", "gpu3") for e in episode("nic_tx_saturated", f"{h}:eth0", 20, 140,
                                                          metrics={"util_tx": 0.9})]
    load += busy("gpu1", 0.9, 40, 140) + busy("gpu3", 0.9, 40, 140) + busy("gpu2", 0.55, 0, 140)
    first: dict = {}
    _, published = run(load + uplink_congestion(24, 140), until=240, jobs=[NOISY, VICTIM], first=first)
    assert tops(published) == [("noisy_neighbor", "7")]

    def surge(inc: dict) -> dict:
        (ev,) = [e for e in inc["root_causes"][0]["evidence"] if e["symptom"] == "job_traffic_surge"]
        return ev["metrics"]
    assert "share" not in surge(next(iter(first.values())))
    assert surge(next(iter(published.values())))["share"] >= 0.6


def test_a_pause_trees_paused_uplinks_make_no_job_a_noisy_neighbour():
    """gpu2:eth0 storms; the pause tree stops spine1's port down to leaf1, whose queue
    fills behind it, while the pair's gpu3 sends to gpu1 across that very port. The queue
    holds pause, not load (contract section 8: a victim of the tree), so no job is its
    noisy neighbour. Before, attribution gave the pair all of the paused port's load and a
    noisy_neighbor incident stood beside the storm's (tune-range probe of concurrent faults
    on rails, concurrent3 at 5 s, which also hid the real congestion under that incident)."""
    storm = episode("nic_pfc_tx", "gpu2:eth0", 20, 200) + episode("port_pfc_rx", "leaf1:swp2", 21, 200) \
        + episode("port_pfc_tx", "leaf1:swp51", 23, 200) + episode("port_pfc_rx", "spine1:swp1", 24, 200)
    tree = [e for rule in ("queue_congested", "port_ecn_marking") for e in episode(rule, "spine1:swp1", 25, 200)]
    load = busy("gpu3", 0.9, 0, 200) + busy("gpu1", 0.6, 0, 200)
    _, published = run(storm + tree + load, until=320, jobs=[NOISY, VICTIM])
    assert tops(published) == [("pfc_storm", "gpu2:eth0")]


def test_a_pause_trees_queue_proven_a_tick_before_its_pause_names_no_job():
    """Pause flows backwards: under the storm's tree spine1 stops draining what leaf2
    sends it and pauses leaf2's uplink. That uplink's queue is proven a tick before its
    pause (a gauge in two samples, pause counters in three), and for that tick the job
    sending across it held all of its "load": the surge began with the queue, 11 s
    earlier, and was credible at once (tune-range confounder probe: a pfc_storm at 1 s,
    a job ramping up). Once the port is known paused, the surge that stood on it alone
    spans nothing, and a paused port's queue is no evidence of any job's load."""
    storm = episode("nic_pfc_tx", "gpu2:eth0", 20, 200) + episode("port_pfc_rx", "leaf1:swp2", 21, 200) \
        + episode("port_pfc_tx", "leaf1:swp51", 23, 200) + episode("port_pfc_rx", "spine1:swp1", 24, 200)
    # leaf2's uplink to spine1, from 25 s: its queue heard at 36 s, its pause at 37 s
    queue = [(max(t, T0 + 36), s) for t, s in episode("queue_congested", "leaf2:swp51", 25, 200)]
    pause = [(max(t, T0 + 37), s) for t, s in episode("port_pfc_rx", "leaf2:swp51", 25, 200)]
    load = busy("gpu3", 0.9, 0, 200) + busy("gpu1", 0.6, 0, 200)
    _, published = run(storm + queue + pause + load, until=320, jobs=[NOISY, VICTIM])
    assert tops(published) == [("pfc_storm", "gpu2:eth0")]


def stale(events: list, until: float) -> list:
    """An episode as a coarse-polled series shows it: its last sample stays its last
    evidence, and its end is told only `until` s in (the series quiet a few intervals)."""
    *live, (_, end) = events
    return live + [(T0 + until, end)]


def test_a_congestion_seen_no_more_gives_no_later_load_to_the_job_that_fills_nothing():
    """At 45 s polling a spine queue last seen congested at 59 s stayed active to 190 s.
    As the noisy job's NICs went quiet, its co-tenant's NICs and then a job ramping up at
    138 s took the "load" of that congestion, and the incident of the noisy job that had
    filled it (tune-range probe at 3/20/45 s, noisy_neighbor-6). Attribution is taken
    again only when the congestion's evidence moves."""
    load = busy("gpu1", 0.85, 20, 60) + busy("gpu3", 0.8, 20, 60)
    congestion = [e for rule, port, t in (("queue_congested", "leaf1:swp51", 22), ("port_ecn_marking", "leaf1:swp51", 22),
                                          ("queue_congested", "spine1:swp2", 23))
                  for e in stale(episode(rule, port, t, 60), 190)]
    ramp = busy("gpu2", 0.9, 100, 230) + busy("gpu4", 0.9, 100, 230)
    first: dict = {}
    c, published = run(load + congestion + ramp, until=300, jobs=[NOISY, VICTIM], first=first)
    assert tops(first) == [("noisy_neighbor", "7")]
    assert tops(published) == [("noisy_neighbor", "7")]
    (inc,) = published.values()
    assert ("noisy_neighbor", "8") not in [(r["cause"], r["entity"]["id"]) for r in inc["root_causes"]]
