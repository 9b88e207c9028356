"""Affected jobs per contract section 6, on tests/data/air.dot.

Paths worked out by hand from the fixture (see test_topology.py's docstring):
  101 acme  gpu001+gpu003, no storage: gpu001/gpu003 cables, leaf01 and leaf02 uplinks
  102 beta  gpu002 + stor01: gpu002 cable, leaf01 uplinks, all three leaf04 uplinks,
            stor01 cable
  103 gamma gpu005+gpu006, no storage: only their two leaf03 cables
  104 delta gpu004, storage unset (= every storage host, stor01): gpu004 cable,
            leaf02 uplinks, leaf04 uplinks, stor01 cable
  105 eps   gpu003+gpu004, no storage: only their two leaf02 cables
"""
from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from engine.impact import affected_jobs
from engine.topology import Topology, load_topology
from engine.types import AffectedJob, Entity, Job

DATA = Path(__file__).parent / "data"


def _job(job_id, tenant, hosts, storage):
    return Job(job_id=job_id, tenant=tenant, user="u", state="RUNNING", hosts=tuple(hosts),
               storage=None if storage is None else tuple(storage), start=0.0, end=None)


JOBS = [
    _job("101", "acme", ["gpu001", "gpu003"], []),
    _job("102", "beta", ["gpu002"], ["stor01"]),
    _job("103", "gamma", ["gpu005", "gpu006"], []),
    _job("104", "delta", ["gpu004"], None),
    _job("105", "eps", ["gpu003", "gpu004"], []),
]


@pytest.fixture(scope="module")
def air() -> Topology:
    return load_topology(DATA / "air.dot")


def _affected(air, cause, kind, ident, jobs=JOBS, **kw):
    shuffled = list(jobs)
    random.Random(7).shuffle(shuffled)
    return affected_jobs(cause=cause, entity=Entity(kind, ident), jobs=shuffled, topology=air, **kw)


def test_link_on_paths(air):
    assert _affected(air, "link_flap", "link", "leaf01:swp51--spine01:swp1") == [
        AffectedJob("101", "acme", "traffic crosses leaf01:swp51--spine01:swp1"),
        AffectedJob("102", "beta", "traffic crosses leaf01:swp51--spine01:swp1"),
    ]
    assert _affected(air, "link_degraded", "link", "gpu005:eth0--leaf03:swp1") == [
        AffectedJob("103", "gamma", "traffic crosses gpu005:eth0--leaf03:swp1"),
    ]
    # the parallel uplink of leaf04 carries both storage jobs
    assert [a.job_id for a in _affected(air, "link_flap", "link", "leaf04:swp53--spine01:swp14")] == ["102", "104"]


def test_link_of_a_host_without_paths(air):
    lonely = _job("106", "zeta", ["gpu006"], [])  # one host, no storage: no traffic path
    assert _affected(air, "link_flap", "link", "gpu006:eth0--leaf03:swp2", jobs=[lonely]) == [
        AffectedJob("106", "zeta", "runs on gpu006"),
    ]


def test_interface(air):
    # spine02:swp2 is the spine end of leaf02's second uplink
    assert _affected(air, "congestion", "interface", "spine02:swp2") == [
        AffectedJob("101", "acme", "traffic crosses spine02:swp2"),
        AffectedJob("104", "delta", "traffic crosses spine02:swp2"),
    ]
    assert _affected(air, "nic_degraded", "interface", "gpu004:eth0") == [
        AffectedJob("104", "delta", "traffic crosses gpu004:eth0"),
        AffectedJob("105", "eps", "traffic crosses gpu004:eth0"),
    ]
    # an interface the topology does not know still touches jobs on its host
    assert _affected(air, "nic_degraded", "interface", "gpu005:eth7") == [AffectedJob("103", "gamma", "runs on gpu005")]


def test_switch(air):
    assert _affected(air, "device_down", "switch", "leaf04") == [
        AffectedJob("102", "beta", "traffic crosses leaf04"),
        AffectedJob("104", "delta", "traffic crosses leaf04"),
    ]
    assert [a.job_id for a in _affected(air, "device_down", "switch", "spine01")] == ["101", "102", "104"]
    assert [a.job_id for a in _affected(air, "device_down", "switch", "leaf02")] == ["101", "104", "105"]
    assert [a.job_id for a in _affected(air, "device_down", "switch", "leaf03")] == ["103"]
    lonely = _job("106", "zeta", ["gpu006"], [])  # one host, no storage: no traffic path
    assert _affected(air, "device_down", "switch", "leaf03", jobs=[lonely]) == [
        AffectedJob("106", "zeta", "runs on gpu006 behind leaf03"),
    ]
    assert _affected(air, "device_down", "switch", "spine01", jobs=[lonely]) == []


def test_host(air):
    assert _affected(air, "nic_degraded", "host", "gpu003") == [
        AffectedJob("101", "acme", "runs on gpu003"),
        AffectedJob("105", "eps", "runs on gpu003"),
    ]


def test_storage(air):
    assert _affected(air, "storage_slow", "storage", "stor01") == [
        AffectedJob("102", "beta", "reads/writes storage stor01"),
        AffectedJob("104", "delta", "reads/writes storage stor01"),
    ]
    # with the storage hosts given, 104 (no list of its own) talks to stor02 only
    assert [a.job_id for a in _affected(air, "storage_slow", "storage", "stor01", storage_hosts=["stor02"])] == ["102"]


def test_noisy_neighbour(air):
    # 101 uses leaf01 and leaf02 uplinks: 102 shares leaf01's two, 104 leaf02's two;
    # 105 shares only gpu003's cable (a host link), 103 nothing.
    assert _affected(air, "noisy_neighbor", "job", "101") == [
        AffectedJob("101", "acme", "source of the traffic surge"),
        AffectedJob("102", "beta", "shares leaf01:swp51--spine01:swp1 with job 101 (+1 more)"),
        AffectedJob("104", "delta", "shares leaf02:swp51--spine01:swp2 with job 101 (+1 more)"),
    ]
    # 103 runs under one leaf: no fabric link to share
    assert _affected(air, "noisy_neighbor", "job", "103") == [AffectedJob("103", "gamma", "source of the traffic surge")]
    assert _affected(air, "noisy_neighbor", "job", "999") == []


def test_unknown_kind(air):
    with pytest.raises(ValueError, match="unknown entity kind 'rack'"):
        _affected(air, "device_down", "rack", "r1")


def test_fast_for_a_hundred_jobs_on_512_hosts():
    roles = {f"spine{s}": "spine" for s in range(4)} | {"stor01": "storage", "stor02": "storage"}
    links = []
    for leaf in range(32):
        roles[f"leaf{leaf:02d}"] = "leaf"
        links += [(f"leaf{leaf:02d}:swp{50 + s}", f"spine{s}:swp{leaf}") for s in range(4)]
        for h in range(16):
            roles[f"gpu{leaf * 16 + h:03d}"] = "host"
            links.append((f"gpu{leaf * 16 + h:03d}:eth0", f"leaf{leaf:02d}:swp{h}"))
    links += [("stor01:eth0", "leaf00:swp20"), ("stor02:eth0", "leaf31:swp20")]
    topo = Topology.from_links(roles=roles, links=links)
    rng = random.Random(1)
    hosts = topo.devices("host")
    jobs = [_job(str(i), f"t{i % 7}", rng.sample(hosts, rng.choice([2, 8, 64, 512])), None) for i in range(100)]
    started = time.perf_counter()
    for _ in range(3):  # an incident updated three times
        found = affected_jobs(cause="device_down", entity=Entity("switch", "spine1"), jobs=jobs, topology=topo)
        noisy = affected_jobs(cause="noisy_neighbor", entity=Entity("job", "0"), jobs=jobs, topology=topo)
    assert time.perf_counter() - started < 2.0
    # Every job reads both storage hosts, on leaf00 and leaf31, so each crosses every
    # spine. Each job has a host off leaf00 (gpu000-gpu015), so each reaches stor01
    # over leaf00's uplinks, which job 0 crosses too.
    assert all(any(int(h[3:]) >= 16 for h in job.hosts) for job in jobs)
    assert len(found) == 100 and len(noisy) == 100
