"""Job paths, affected jobs and noisy-neighbour attribution on an 8-rail fabric and on a
three-tier fabric with superspines.

Rails (the shape of sim/shapes.py): 8 leaves under 2 spines, hosts gpu001-004 with NIC
eth{k} cabled to leaf0{k}, stor01 on leaf01. A host NIC reaches only its own rail leaf,
so NIC i of one host and NIC j of another meet over leaf i - spine - leaf j.
Three tiers: pods A (leafa1, leafa2 under spinea1, spinea2) and B (leafb1, leafb2 under
spineb1, spineb2), every spine cabled to superspine01 and superspine02; one host per leaf.
"""
from __future__ import annotations

from dataclasses import replace

import pytest

from engine.attribution import dominant_jobs
from engine.impact import affected_jobs
from engine.topology import Topology
from engine.types import Entity, Job, Symptom

RAILS = 8


def _job(job_id: str, hosts: list[str], storage: list[str] | None = ()) -> Job:
    return Job(job_id=job_id, tenant=f"t{job_id}", user="u", state="RUNNING", hosts=tuple(hosts),
               storage=None if storage is None else tuple(storage), start=0.0, end=None)


def _rails() -> Topology:
    links = []
    for k in range(1, RAILS + 1):
        for s in (1, 2):
            links.append((f"leaf0{k}:swp5{s}", f"spine0{s}:swp{k}"))
        for h in range(1, 5):
            links.append((f"gpu00{h}:eth{k}", f"leaf0{k}:swp{h}"))
    links.append(("stor01:eth0", "leaf01:swp9"))
    return Topology.from_links(roles={}, links=links)


def _three_tier() -> Topology:
    roles = {"superspine01": "superspine", "superspine02": "superspine"}
    links = []
    for pod in "ab":
        for n in (1, 2):
            links.append((f"host{pod}{n}:eth0", f"leaf{pod}{n}:swp1"))
            for s in (1, 2):
                links.append((f"leaf{pod}{n}:swp5{s}", f"spine{pod}{s}:swp{n}"))
        for s in (1, 2):
            for x in (1, 2):
                links.append((f"spine{pod}{s}:swp6{x}", f"superspine0{x}:swp{pod}{s}"))
    return Topology.from_links(roles=roles, links=links)


def _uplink(topo: Topology, leaf: str, spine: str) -> str:
    return next(link for link in topo.graph.edges[leaf, spine]["links"])


def test_rail_hosts_cross_the_spines_between_rails():
    topo = _rails()
    links = topo.job_links(hosts=["gpu001", "gpu002"], storage=[])
    uplinks = {_uplink(topo, f"leaf0{k}", f"spine0{s}") for k in range(1, RAILS + 1) for s in (1, 2)}
    nics = {topo.link_of(f"gpu00{h}:eth{k}") for h in (1, 2) for k in range(1, RAILS + 1)}
    assert links == uplinks | nics
    # one host alone has no partner, so no path
    assert topo.job_links(hosts=["gpu003"], storage=[]) == frozenset()


def test_rail_host_reaches_storage_from_every_rail():
    topo = _rails()
    links = topo.job_links(hosts=["gpu003"], storage=["stor01"])
    # NIC k (k > 1) goes up leaf0k, over a spine, down leaf01; NIC 1 is on stor01's leaf
    assert _uplink(topo, "leaf05", "spine01") in links
    assert _uplink(topo, "leaf01", "spine02") in links
    assert topo.link_of("gpu003:eth5") in links and topo.link_of("stor01:eth0") in links


def test_rail_noisy_neighbour_names_the_tenants_of_the_uplinks():
    topo = _rails()
    jobs = [_job("1", ["gpu001", "gpu002"]), _job("2", ["gpu003", "gpu004"]), _job("3", ["gpu004"])]
    got = affected_jobs(cause="noisy_neighbor", entity=Entity("job", "1"), jobs=jobs, topology=topo)
    # job 3 (one host, no storage) sends nothing over the fabric
    assert [a.job_id for a in got] == ["1", "2"]
    assert got[1].impact.startswith("shares leaf0") and "with job 1" in got[1].impact


def _congested(topo: Topology, interface: str) -> Symptom:
    return Symptom(key=f"c@{interface}", kind="egress_congestion", family="congestion",
                   entity=Entity("interface", interface), device=interface.split(":")[0], start=100.0, last=110.0)


def _nic(host: str, util: float) -> Symptom:
    return Symptom(key=f"n@{host}", kind="nic_busy", family="load", entity=Entity("interface", f"{host}:eth1"),
                   device=host, start=100.0, last=110.0, metrics={"util_tx": util})


def test_rail_attribution_finds_the_job_filling_the_uplinks():
    topo = _rails()
    jobs = [_job("1", ["gpu001", "gpu002"]), _job("2", ["gpu003", "gpu004"])]
    load = {"gpu001": 0.7 * RAILS, "gpu002": 0.7 * RAILS, "gpu003": 0.05, "gpu004": 0.05}
    found = dominant_jobs(congested=[_congested(topo, "leaf03:swp51")], load=load, jobs=jobs, topology=topo)
    assert list(found) == ["1"]
    assert found["1"].links == (topo.link_of("leaf03:swp51"),)
    # before the rail paths, no job crossed a spine link, so none could be named
    assert dominant_jobs(congested=[_congested(topo, "leaf03:swp51")], load={"gpu001": 0.1, "gpu002": 0.1,
                         "gpu003": 0.1, "gpu004": 0.1}, jobs=jobs, topology=topo) == {}


def test_three_tier_jobs_across_pods_cross_the_superspines():
    topo = _three_tier()
    links = topo.job_links(hosts=["hosta1", "hostb1"], storage=[])
    assert _uplink(topo, "spinea1", "superspine01") in links
    assert _uplink(topo, "spineb2", "superspine02") in links
    # inside one pod the superspines are not on a shortest path
    inside = topo.job_links(hosts=["hosta1", "hosta2"], storage=[])
    assert not any("superspine" in link for link in inside)
    assert _uplink(topo, "leafa1", "spinea1") in inside


def test_three_tier_noisy_neighbour_victims_share_its_superspine_links():
    topo = _three_tier()
    jobs = [_job("1", ["hosta1", "hostb1"]), _job("2", ["hosta2", "hostb2"]), _job("3", ["hostb1", "hostb2"])]
    got = affected_jobs(cause="noisy_neighbor", entity=Entity("job", "1"), jobs=jobs, topology=topo)
    # 2 crosses the same superspine links; 3 stays in pod B but shares spine b's links
    # to leafb1 and leafb2 with job 1's path down to hostb1
    assert [a.job_id for a in got] == ["1", "2", "3"]
    assert "superspine" in got[1].impact or "spine" in got[1].impact
    congested = [_congested(topo, "spinea1:swp61")]
    load = {"hosta1": 0.8, "hostb1": 0.8, "hosta2": 0.1, "hostb2": 0.1}
    assert list(dominant_jobs(congested=congested, load=load, jobs=jobs, topology=topo)) == ["1"]


# --- timelines: the correlator names the noisy job on rails and three tiers, at 1 s and 10 s ---

def _timeline(topo: Topology, events, jobs, *, until: float) -> dict:
    from engine.correlate import Correlator
    from engine.jobs import JobBook
    from rules.loader import load_rules

    book = JobBook()
    for j in jobs:
        book.update(j)
    c = Correlator(topology=topo, jobs=book, opens_incident=load_rules(None).opens_incident)
    events = sorted(events, key=lambda e: (e[0], e[1].key, e[1].end is not None))
    latest, i = {}, 0
    for sec in range(int(until) + 1):
        now = T0 + sec
        while i < len(events) and events[i][0] <= now:
            c.add(events[i][1])
            i += 1
        c.advance(now)
        latest.update({inc["id"]: inc for inc in c.drain()})
    return latest


def _episode(rule: str, entity: str, start: float, end: float, every: float, **metrics) -> list:
    from test_correlation_timeline import episode
    return episode(rule, entity, start, end, metrics=metrics or None, refresh=every)


T0 = 1764400000.0
SAMPLE_INTERVALS = (1.0, 10.0)


@pytest.mark.parametrize("every", SAMPLE_INTERVALS)
def test_rails_timeline_names_the_noisy_job_and_its_victim(every):
    topo = _rails()
    noisy, victim = _job("1", ["gpu001", "gpu002"]), _job("2", ["gpu003", "gpu004"])
    noisy, victim = (replace(j, start=T0 - 3600) for j in (noisy, victim))
    load = [e for h in ("gpu001", "gpu002") for k in (3, 4)
            for e in _episode("nic_tx_busy", f"gpu00{h[-1]}:eth{k}", 20, 140, every, util_tx=0.75)]
    load += _episode("nic_tx_busy", "gpu003:eth3", 20, 140, every, util_tx=0.1)
    congestion = (_episode("queue_congested", "leaf03:swp51", 20 + every, 140, every)
                  + _episode("port_ecn_marking", "leaf03:swp51", 20 + every, 140, every)
                  + _episode("queue_congested", "spine01:swp4", 20 + every, 140, every)
                  + _episode("nic_cnp_sent", "gpu003:eth4", 20 + 2 * every, 140, every))
    published = _timeline(topo, load + congestion, [noisy, victim], until=260)
    assert [(i["root_causes"][0]["cause"], i["root_causes"][0]["entity"]["id"]) for i in published.values()] \
        == [("noisy_neighbor", "1")]
    assert {j["job_id"] for j in next(iter(published.values()))["affected_jobs"]} == {"1", "2"}


@pytest.mark.parametrize("every", SAMPLE_INTERVALS)
def test_three_tier_timeline_names_the_job_filling_the_superspine_links(every):
    topo = _three_tier()
    noisy = replace(_job("1", ["hosta1", "hostb1"]), start=T0 - 3600)
    victim = replace(_job("2", ["hosta2", "hostb2"]), start=T0 - 3600)
    load = [e for h in ("hosta1", "hostb1") for e in _episode("nic_tx_busy", f"{h}:eth0", 20, 140, every,
                                                              util_tx=0.7)]
    congestion = (_episode("queue_congested", "spinea1:swp61", 20 + every, 140, every)
                  + _episode("port_ecn_marking", "spinea1:swp61", 20 + every, 140, every)
                  + _episode("nic_cnp_sent", "hostb2:eth0", 20 + 2 * every, 140, every))
    published = _timeline(topo, load + congestion, [noisy, victim], until=260)
    assert [(i["root_causes"][0]["cause"], i["root_causes"][0]["entity"]["id"]) for i in published.values()] \
        == [("noisy_neighbor", "1")]
    assert {j["job_id"] for j in next(iter(published.values()))["affected_jobs"]} == {"1", "2"}
