"""The truth of rail-shaped runs follows contract section 6 as the engine can read it.

Job placements name hosts, not NICs (contract section 2), so on rail-optimised hosts a
job holds every NIC of each of its hosts: a fault on any of those NICs, or on a rail leaf
they reach, touches the job. The generator's traffic uses only the NICs the job's
endpoints became, and the jobs that traffic reaches are kept beside, not scored.
Worked by hand on the default fabric (4 leaves of 4 endpoints, so rail hosts gpu001-004
with NICs eth0-eth3, one per leaf).
"""
from __future__ import annotations

import json

import pytest

from sim.fabric import Fabric, FabricSpec
from sim.shapes import host_level_truth, rail_names
from sim.split import TUNE_SEED, SplitEntry, build

T0 = 1764400000.0
FAB = Fabric(FabricSpec())


def _job(job_id: str, hosts: list[str]) -> dict:
    return {"job_id": job_id, "tenant": "t" + job_id, "hosts": hosts, "storage": ["stor01", "stor02"],
            "start": T0 - 3600, "end": None}


# Before renaming: A on leaf01+02 (rail NICs eth0, eth1 of gpu001-004), B on leaf03 (eth2
# of gpu001-004), C on leaf04 slots 0-1 (eth3 of gpu001-002), D on leaf04 slots 2-3
# (eth3 of gpu003-004).
JOBS = [_job("A", [f"gpu{i:03d}" for i in range(1, 9)]), _job("B", [f"gpu{i:03d}" for i in range(9, 13)]),
        _job("C", ["gpu013", "gpu014"]), _job("D", ["gpu015", "gpu016"])]


def _truth(cause: str, kind: str, entity: str, by_nic: list[str]) -> dict:
    fault = {"cause": cause, "entity": {"kind": kind, "id": entity}, "start": T0, "end": T0 + 60,
             "affected_jobs": by_nic}
    return {"faults": [fault], "jobs": [dict(j) for j in JOBS]}


def test_a_rail_nic_fault_touches_every_job_on_its_host():
    assert rail_names(FAB)["gpu010"] == ("gpu002", "eth2")
    out = host_level_truth(FAB, _truth("nic_degraded", "interface", "gpu010:eth0", ["B"]), rail_names(FAB))
    fault = out["faults"][0]
    assert fault["affected_jobs"] == ["A", "B", "C"]  # D's hosts are gpu003-004
    assert fault["affected_jobs_by_nic"] == ["B"]


def test_a_rail_leaf_uplink_is_on_the_paths_of_every_job_spanning_hosts():
    # leaf03 is B's rail only, but A, C and D each have hosts with a NIC on leaf03 talking
    # to their other hosts' NICs on other leaves: the spines between rails.
    out = host_level_truth(FAB, _truth("link_degraded", "link", "leaf03:swp51--spine01:swp3", ["B"]),
                           rail_names(FAB))
    assert out["faults"][0]["affected_jobs"] == ["A", "B", "C", "D"]


@pytest.mark.slow
def test_a_rail_run_scores_the_jobs_on_the_faulty_nics_host(tmp_path, monkeypatch):
    import sim.split as split
    monkeypatch.setitem(split.SHAPES, "tune", ("rails",))
    truth = build(SplitEntry("nic_degraded-x", "nic_degraded", TUNE_SEED + 3, 60.0), out=tmp_path, split="tune")
    written = json.loads((tmp_path / "truth.json").read_text())
    assert written["faults"] == truth["faults"]
    fault = truth["faults"][0]
    host = fault["entity"]["id"].split(":")[0]
    on_host = sorted(j["job_id"] for j in truth["jobs"] if host in j["hosts"])
    assert fault["affected_jobs"] == on_host
    assert set(fault["affected_jobs_by_nic"]) < set(on_host)
