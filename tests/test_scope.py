"""api/scope.py on its own: what a tenant's view keeps, hides and renames. Pure, no server."""
from __future__ import annotations

import json
import re

from hypothesis import given
from hypothesis import strategies as st

from api.scope import HIDDEN, Fabric, matches, scope_incident, scope_topology

FABRIC = Fabric(frozenset({"leaf1", "leaf10", "spine1", "stor1"}))


def job(job_id: str, tenant: str, hosts: list[str], impact: str = "runs there") -> dict:
    return {"job_id": job_id, "tenant": tenant, "impact": impact, "hosts": hosts}


def sym(entity: str, kind: str = "interface") -> dict:
    return {"key": entity, "kind": "k", "family": "f", "entity": {"kind": kind, "id": entity},
            "device": entity.split(":")[0], "start": "t", "last": "t", "end": None, "severity": 1.0,
            "metrics": {}, "rule": ""}


def inc(cause: str, entity: dict, jobs: list[dict], symptoms: list[dict], evidence: list[dict] | None = None) -> dict:
    return {"id": "i", "title": "original", "maintenance_reason": None, "affected_jobs": jobs, "symptoms": symptoms,
            "root_causes": [{"rank": 1, "cause": cause, "entity": entity, "score": 1.0, "evidence": evidence or []}]}


def test_a_tenant_without_a_job_in_the_incident_sees_nothing():
    assert scope_incident(inc("congestion", {"kind": "interface", "id": "leaf1:swp1"}, [job("1", "b", ["h2"])], []),
                          tenant="a", fabric=FABRIC) is None


def test_a_name_is_hidden_whole_and_only_whole():
    """gpu1 hidden must not touch gpu10 (the tenant's), nor the leaf of a link it ends on."""
    seen = scope_incident(
        inc("link_flap", {"kind": "link", "id": "gpu1:eth0--leaf10:swp1"},
            [job("7", "a", ["gpu10"], "traffic crosses gpu1:eth0--leaf10:swp1 near gpu10"), job("8", "b", ["gpu1"])],
            [sym("gpu1:eth0"), sym("gpu10:eth0"), sym("leaf10:swp1")],
            [{"entity": "gpu1:eth0", "metrics": {}}, {"entity": "leaf10:swp1", "note": "peer gpu1:eth0"}]),
        tenant="a", fabric=FABRIC)
    assert seen["root_causes"][0]["entity"]["id"] == f"{HIDDEN}:eth0--leaf10:swp1"
    assert seen["affected_jobs"][0]["impact"] == f"traffic crosses {HIDDEN}:eth0--leaf10:swp1 near gpu10"
    assert [s["entity"]["id"] for s in seen["symptoms"]] == ["gpu10:eth0", "leaf10:swp1"]
    assert seen["root_causes"][0]["evidence"] == [{"entity": "leaf10:swp1", "note": f"peer {HIDDEN}:eth0"}]
    assert seen["title"] == f"Link {HIDDEN}:eth0--leaf10:swp1 is flapping (1 job affected)"


def test_a_link_between_a_leaf_and_a_hidden_host_hides_the_host_when_it_is_the_second_end():
    seen = scope_incident(inc("link_flap", {"kind": "link", "id": "leaf1:swp2--gpu2:eth0"},
                              [job("7", "a", ["gpu3"]), job("8", "b", ["gpu2"])], []), tenant="a", fabric=FABRIC)
    assert seen["root_causes"][0]["entity"]["id"] == f"leaf1:swp2--{HIDDEN}:eth0"


def test_a_noisy_job_of_another_tenant_is_hidden_and_ones_own_is_not():
    other = inc("noisy_neighbor", {"kind": "job", "id": "8"},
                [job("7", "a", ["gpu3"], "shares leaf1:swp1 with job 8 (+1 more)"), job("8", "b", ["gpu2"])], [])
    seen = scope_incident(other, tenant="a", fabric=FABRIC)
    assert seen["root_causes"][0]["entity"] == {"kind": "job", "id": HIDDEN}
    assert seen["affected_jobs"] == [job("7", "a", ["gpu3"], f"shares leaf1:swp1 with job {HIDDEN} (+1 more)")]
    assert scope_incident(other, tenant="b", fabric=FABRIC)["root_causes"][0]["entity"]["id"] == "8"


def test_without_a_topology_every_device_but_the_tenants_hosts_is_hidden():
    seen = scope_incident(inc("congestion", {"kind": "interface", "id": "leaf1:swp1"}, [job("7", "a", ["gpu3"])],
                              [sym("leaf1:swp1"), sym("gpu3:eth0")]), tenant="a", fabric=Fabric.of(None))
    assert seen["root_causes"][0]["entity"]["id"] == f"{HIDDEN}:swp1"
    assert [s["device"] for s in seen["symptoms"]] == ["gpu3"]


def test_filters_match_the_scoped_view():
    seen = scope_incident(inc("pfc_storm", {"kind": "interface", "id": "gpu2:eth0"},
                              [job("7", "a", ["gpu3"]), job("8", "b", ["gpu2"])], [sym("gpu2:eth0"), sym("leaf1:swp1")]),
                          tenant="a", fabric=FABRIC)
    assert matches(seen, entity="leaf1") and matches(seen, job="7") and matches(seen, tenant="a")
    assert not matches(seen, entity="gpu2") and not matches(seen, entity="gpu2:eth0")
    assert not matches(seen, job="8") and not matches(seen, tenant="b")


def test_a_tenants_topology_keeps_the_fabric_and_its_hosts():
    doc = {"devices": [{"id": "leaf1", "role": "leaf"}, {"id": "gpu2", "role": "host"}, {"id": "gpu3", "role": "host"}],
           "links": [{"id": "gpu2:eth0--leaf1:swp2", "a": "gpu2:eth0", "b": "leaf1:swp2"},
                     {"id": "gpu3:eth0--leaf1:swp3", "a": "gpu3:eth0", "b": "leaf1:swp3"}]}
    seen = scope_topology(doc, visible_hosts={"gpu3"})
    assert [d["id"] for d in seen["devices"]] == ["leaf1", "gpu3"]
    assert [k["id"] for k in seen["links"]] == ["gpu3:eth0--leaf1:swp3"]


HOSTS = [f"gpu{i}" for i in range(1, 13)]


@given(mine=st.sets(st.sampled_from(HOSTS), max_size=4), theirs=st.sets(st.sampled_from(HOSTS), min_size=1, max_size=4),
       touched=st.lists(st.sampled_from(HOSTS + ["leaf1", "leaf10", "spine1"]), min_size=1, max_size=6))
def test_no_host_of_another_tenants_job_survives_scoping(mine, theirs, touched):
    """Invariant: a host only the other tenant's job runs on is named nowhere in the view."""
    private = theirs - mine
    incident = inc("pfc_storm", {"kind": "interface", "id": f"{touched[0]}:eth0"},
                   [job("7", "a", sorted(mine), f"crosses {touched[-1]}:eth0"), job("8", "b", sorted(theirs))],
                   [sym(f"{d}:eth0") for d in touched], [{"entity": f"{d}:eth0", "m": d} for d in touched])
    seen = json.dumps(scope_incident(incident, tenant="a", fabric=FABRIC))
    for host in private:
        assert not re.search(rf"(?<!\w){host}(?!\w)", seen), host
    assert '"8"' not in seen and '"b"' not in seen


def sampled(entity: str) -> dict:
    return {**sym(entity), "samples": {"tx_pause_rate": [[1.0, 5.0], [2.0, 9.0]]}}


def test_samples_of_another_tenants_host_are_not_in_the_view():
    """The plots' samples travel inside their symptom: a private host's go with it, the
    fabric's and the tenant's own hosts' stay, as stored."""
    incident = inc("pfc_storm", {"kind": "interface", "id": "gpu2:eth0"},
                   [job("7", "a", ["gpu3"]), job("8", "b", ["gpu2"])],
                   [sampled("gpu2:eth0"), sampled("leaf1:swp1"), sampled("gpu3:eth0"),
                    sampled("gpu2:eth0--leaf1:swp2")])
    seen = scope_incident(incident, tenant="a", fabric=FABRIC)
    assert [(s["entity"]["id"], s["samples"]) for s in seen["symptoms"]] == [
        ("leaf1:swp1", {"tx_pause_rate": [[1.0, 5.0], [2.0, 9.0]]}),
        ("gpu3:eth0", {"tx_pause_rate": [[1.0, 5.0], [2.0, 9.0]]})]
    theirs = scope_incident(incident, tenant="b", fabric=FABRIC)
    assert [s["entity"]["id"] for s in theirs["symptoms"]] == ["gpu2:eth0", "leaf1:swp1", "gpu2:eth0--leaf1:swp2"]
