"""Topology loaders and ECMP paths.

Expectations are read off the fixtures by hand: tests/data/air.dot is a 2-spine /
4-leaf fabric (leaf0N:swp51 -> spine01:swpN, leaf0N:swp52 -> spine02:swpN, plus a
parallel leaf04:swp53 -> spine01:swp14), gpu001-002 on leaf01, gpu003-004 on leaf02,
gpu005-006 on leaf03, gpu007 dual-homed on leaf03:swp3 / leaf04:swp3, stor01 on leaf04.
"""
from __future__ import annotations

import json
import time
from itertools import combinations
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.topology import Topology, TopologyError, load_topology

DATA = Path(__file__).parent / "data"

UPLINKS = {
    "leaf01": {"leaf01:swp51--spine01:swp1", "leaf01:swp52--spine02:swp1"},
    "leaf02": {"leaf02:swp51--spine01:swp2", "leaf02:swp52--spine02:swp2"},
    "leaf03": {"leaf03:swp51--spine01:swp3", "leaf03:swp52--spine02:swp3"},
    "leaf04": {"leaf04:swp51--spine01:swp4", "leaf04:swp52--spine02:swp4", "leaf04:swp53--spine01:swp14"},
}


@pytest.fixture(scope="module")
def air() -> Topology:
    return load_topology(DATA / "air.dot")


# ----------------------------------------------------------------------- DOT


def test_dot_devices_and_roles(air):
    assert air.devices("spine") == ["spine01", "spine02"]
    assert air.devices("leaf") == ["leaf01", "leaf02", "leaf03", "leaf04"]
    # gpu002 is function="server" (alias), gpu005 role="host", gpu006 only in an edge.
    assert air.devices("host") == [f"gpu00{i}" for i in range(1, 8)]
    assert air.devices("storage") == ["stor01"]
    assert air.role("gpu006") == "host"
    assert air.role("nope") is None
    assert air.is_switch("leaf03") and air.is_switch("spine02") and not air.is_switch("stor01")


def test_dot_drops_the_management_network(air):
    assert "oob-mgmt-switch" not in air.graph
    assert not air.has_interface("leaf01:eth0")
    assert not air.has_interface("gpu001:eth1")
    assert len(air.links()) == 18  # 9 uplinks + 9 server links


def test_dot_interfaces_peers_and_parallel_links(air):
    assert air.interfaces("leaf04") == ["leaf04:swp1", "leaf04:swp3", "leaf04:swp51", "leaf04:swp52", "leaf04:swp53"]
    assert air.peer("leaf01:swp51") == "spine01:swp1"
    assert air.peer("spine01:swp1") == "leaf01:swp51"
    assert air.link_of("gpu001:eth0") == "gpu001:eth0--leaf01:swp1"
    assert air.link_of("leaf04:swp1") == "leaf04:swp1--stor01:eth0"
    assert air.link_ends("leaf04:swp1--stor01:eth0") == ("leaf04:swp1", "stor01:eth0")
    assert air.peer("gpu001:eth9") is None and air.link_of("gpu001:eth9") is None
    assert air.graph.edges["leaf04", "spine01"]["links"] == ["leaf04:swp51--spine01:swp4", "leaf04:swp53--spine01:swp14"]
    assert air.graph.nodes["leaf04"]["role"] == "leaf"


def test_dot_minimal_syntax_variants(tmp_path):
    text = """strict digraph {
      rankdir=LR; node [shape=box]
      subgraph cluster_a { "leaf1" [role=leaf]; }
      leaf1:swp1 -> "srv-1":"eth0":n  // bare ids, '->' and a compass point
      "leaf\\"x" [function="leaf"]
      "leaf1":"swp2" -- "leaf\\"x":"swp2"
    }"""
    topo = load_topology(_write(tmp_path, "g.gv", text))
    assert topo.links() == ['leaf"x:swp2--leaf1:swp2', "leaf1:swp1--srv-1:eth0"]
    assert topo.role("srv-1") == "host"


MALFORMED_DOT = [
    ("unterminated quote", 'graph g {\n "leaf01" [function="leaf"]\n "spine01 [function="spine"]\n}\n', 3, "unterminated"),
    ("edge without port", 'graph g {\n "leaf01" [function="leaf"]\n\n "leaf01" -- "spine01":"swp1"\n}\n', 4, "edge without port"),
    ("attr without =", 'graph g {\n "leaf01" [function "leaf"]\n}\n', 2, "expected '='"),
    ("attr without value", 'graph g {\n "leaf01" [function=]\n}\n', 2, "value for attribute 'function'"),
    ("unknown function", 'graph g {\n "leaf01" [function="leaf"]\n "r1" [function="router"]\n}\n', 3, "unknown function 'router'"),
    ("no closing brace", 'graph g {\n "leaf01" [function="leaf"]\n', 2, "expected a closing '}'"),
    ("block comment", 'graph g {\n /* open\n\n "leaf01" [function="leaf"]\n}\n', 2, "unterminated /* comment"),
    ("not a graph", '\n\nnode g {\n}\n', 3, "expected 'graph' or 'digraph'"),
    ("stray char", 'graph g {\n "a":"x" -- "b":"y" @\n}\n', 2, "unexpected character '@'"),
    ("port on node", 'graph g {\n "leaf01":"swp1" [function="leaf"]\n}\n', 2, "has a port"),
    ("edge chain", 'graph g {\n "a":"1" -- "b":"2" -- "c":"3"\n}\n', 2, "one link per edge"),
    ("dangling edge", 'graph g {\n "leaf01" [function="leaf"]\n "leaf01":"swp1" -- \n}\n', 3, "edge operator without a node"),
]


@pytest.mark.parametrize(("case", "text", "line", "words"), MALFORMED_DOT, ids=[c[0] for c in MALFORMED_DOT])
def test_dot_errors_name_file_and_line(tmp_path, case, text, line, words):
    path = _write(tmp_path, "bad.dot", text)
    with pytest.raises(TopologyError) as err:
        load_topology(path)
    assert f"bad.dot, line {line}:" in str(err.value)
    assert words in str(err.value)


def test_dot_interface_cabled_twice_names_both_lines(tmp_path):
    text = 'graph g {\n "leaf01":"swp1" -- "spine01":"swp1"\n\n "leaf01":"swp1" -- "spine02":"swp1"\n}\n'
    with pytest.raises(TopologyError) as err:
        load_topology(_write(tmp_path, "twice.dot", text))
    assert "twice.dot, line 4:" in str(err.value) and "at " in str(err.value) and "twice.dot, line 2" in str(err.value) and "leaf01:swp1" in str(err.value)


# --------------------------------------------------------------- containerlab


def test_containerlab_roles_and_links():
    topo = load_topology(DATA / "clab.yaml")
    # spine1: labels.role; leaf1: group; leaf2: graph-role; srv1: group server (alias);
    # srv2: free-form group -> by name; nas1: role inherited from its group's labels.
    assert {d: topo.role(d) for d in topo.devices()} == {
        "spine1": "spine", "leaf1": "leaf", "leaf2": "leaf", "srv1": "host", "srv2": "host", "nas1": "storage",
    }
    # The links to the container host and the management network are not fabric links.
    assert topo.links() == [
        "leaf1:swp1--srv1:eth1",
        "leaf1:swp51--spine1:swp1",
        "leaf2:swp1--srv2:eth1",
        "leaf2:swp2--nas1:eth1",
        "leaf2:swp51--spine1:swp2",
    ]


def _clab(nodes: dict, links: list) -> str:
    return yaml.safe_dump({"name": "x", "topology": {"nodes": nodes, "links": links}})


@pytest.mark.parametrize(
    ("doc", "words"),
    [
        (_clab({"a": {}, "b": {}}, [{"endpoints": ["a:e1", "b:e1"]}, {"endpoints": ["a:e2", "zz:e1"]}]), "links[1]: endpoint node 'zz'"),
        (_clab({"a": {}, "b": {}}, [{"endpoints": ["a-e1", "b:e1"]}]), "links[0]: endpoint 'a-e1'"),
        (_clab({"a": {}, "b": {}}, [{"endpoints": ["a:e1"]}]), "links[0]: 'endpoints' must list exactly two"),
        (_clab({"leaf9": {"labels": {"role": "router"}}}, []), "node leaf9: unknown role label 'router'"),
        ("topology: [1, 2]\n", "'topology' must be a mapping"),
    ],
)
def test_containerlab_errors_name_link_or_node(tmp_path, doc, words):
    with pytest.raises(TopologyError) as err:
        load_topology(_write(tmp_path, "lab.clab.yml", doc))
    assert "lab.clab.yml" in str(err.value) and words in str(err.value)


# --------------------------------------------------------------- own form, files


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_own_form_round_trip(air, tmp_path, suffix):
    doc = air.to_dict()
    text = json.dumps(doc) if suffix == ".json" else yaml.safe_dump(doc)
    again = load_topology(_write(tmp_path, "topo" + suffix, text))
    assert again.to_dict() == doc
    assert again.ecmp_links("gpu001", "stor01") == air.ecmp_links("gpu001", "stor01")


def test_own_form_shape():
    topo = Topology.from_links(roles={"leaf1": "leaf"}, links=[("srv1:eth0", "leaf1:swp1")])
    assert topo.to_dict() == {
        "devices": [{"id": "leaf1", "role": "leaf"}, {"id": "srv1", "role": "host"}],
        "links": [{"id": "leaf1:swp1--srv1:eth0", "a": "leaf1:swp1", "b": "srv1:eth0"}],
    }


@pytest.mark.parametrize(
    ("doc", "words"),
    [
        ({"devices": [{"id": "a", "role": "leaf"}, {"id": "b", "role": "router"}], "links": []}, "devices[1] (b): unknown role 'router'"),
        ({"devices": [], "links": [{"id": "b:1--a:1", "a": "a:1", "b": "b:1"}]}, "links[0]: id 'b:1--a:1' does not match"),
        ({"devices": [], "links": [{"a": "a:1"}]}, "links[0]: needs string interface ids"),
        ({"devices": [], "links": [{"a": "a:1", "b": "b"}]}, "links[0]: 'b' is not an interface id"),
        ({"nodes": []}, "not a topology"),
    ],
)
def test_own_form_errors(tmp_path, doc, words):
    with pytest.raises(TopologyError) as err:
        load_topology(_write(tmp_path, "own.json", json.dumps(doc)))
    assert "own.json" in str(err.value) and words in str(err.value)


def test_file_errors(tmp_path):
    with pytest.raises(TopologyError, match="nowhere.dot: no such topology file"):
        load_topology(tmp_path / "nowhere.dot")
    with pytest.raises(TopologyError, match=r"broken.yaml, line 3: bad YAML: mapping values are not allowed"):
        load_topology(_write(tmp_path, "broken.yaml", "topology:\n  nodes:\n    a: b: c\n"))
    with pytest.raises(TopologyError, match=r"broken.json, line 2: bad JSON"):
        load_topology(_write(tmp_path, "broken.json", '{"devices": [],\n "links": [}\n'))


def test_content_sniffing_without_suffix(tmp_path):
    dot = load_topology(_write(tmp_path, "fabric.topo", '// Air\ngraph x { "a":"1" -- "leaf1":"2" }\n'))
    assert dot.links() == ["a:1--leaf1:2"]
    own = load_topology(_write(tmp_path, "fabric.txt", json.dumps(dot.to_dict())))
    assert own.to_dict() == dot.to_dict()


def test_from_links_rejects_bad_input():
    with pytest.raises(TopologyError, match="unknown role 'router'"):
        Topology.from_links(roles={"r": "router"}, links=[])
    with pytest.raises(TopologyError, match="links\\[1\\]: interface a:1 is already cabled at links\\[0\\]"):
        Topology.from_links(roles={}, links=[("a:1", "b:1"), ("a:1", "c:1")])
    with pytest.raises(TopologyError, match="to itself"):
        Topology.from_links(roles={}, links=[("a:1", "a:1")])


# ----------------------------------------------------------------------- ECMP


def test_distance(air):
    assert air.distance("gpu001", "gpu001") == 0
    assert air.distance("gpu001", "leaf01") == 1
    assert air.distance("gpu001", "gpu002") == 2
    assert air.distance("gpu001", "gpu003") == 4
    assert air.distance("leaf01", "leaf04") == 2
    assert air.distance("gpu001", "ghost") is None


def test_job_across_two_leaves_touches_every_uplink_and_spine(air):
    links = air.job_links(hosts=["gpu001", "gpu003"], storage=[])
    assert links == {"gpu001:eth0--leaf01:swp1", "gpu003:eth0--leaf02:swp1"} | UPLINKS["leaf01"] | UPLINKS["leaf02"]
    assert air.job_devices(hosts=["gpu001", "gpu003"], storage=[]) == {
        "gpu001", "gpu003", "leaf01", "leaf02", "spine01", "spine02",
    }
    assert air.ecmp_links("gpu001", "gpu003") == links


def test_job_on_one_leaf_touches_no_spine(air):
    links = air.job_links(hosts=["gpu001", "gpu002"], storage=[])
    assert links == {"gpu001:eth0--leaf01:swp1", "gpu002:eth0--leaf01:swp2"}
    assert air.job_devices(hosts=["gpu001", "gpu002"], storage=[]) == {"gpu001", "gpu002", "leaf01"}


def test_storage_paths_use_parallel_links_and_no_server_transit(air):
    # gpu005 -> stor01: leaf03 -> both spines -> leaf04 (all three uplinks). The path
    # gpu005-leaf03-gpu007-leaf04-stor01 is as short, but servers do not forward.
    links = air.job_links(hosts=["gpu005"], storage=["stor01"])
    assert links == {"gpu005:eth0--leaf03:swp1", "leaf04:swp1--stor01:eth0"} | UPLINKS["leaf03"] | UPLINKS["leaf04"]


def test_dual_homed_host_uses_its_shortest_attachment(air):
    assert air.job_links(hosts=["gpu007", "gpu005"], storage=[]) == {"gpu005:eth0--leaf03:swp1", "gpu007:eth0--leaf03:swp3"}
    # From gpu007 to stor01 only its leaf04 cable is on a shortest path.
    assert air.job_links(hosts=["gpu007"], storage=["stor01"]) == {"gpu007:eth1--leaf04:swp3", "leaf04:swp1--stor01:eth0"}


def test_job_ignores_unknown_hosts_and_single_host_jobs(air):
    assert air.job_links(hosts=["gpu001", "ghost"], storage=["nas-x"]) == frozenset()
    assert air.job_devices(hosts=["gpu001", "ghost"], storage=[]) == {"gpu001"}
    assert air.job_links(hosts=[], storage=["stor01"]) == frozenset()


def test_ecmp_is_cached_and_fast_for_512_hosts():
    topo = _leaf_spine(spines=4, leaves=32, hosts_per_leaf=16)
    hosts = topo.devices("host")
    assert len(hosts) == 512
    started = time.perf_counter()
    links = topo.job_links(hosts=hosts, storage=["stor01"])
    elapsed = time.perf_counter() - started
    # every host link, every leaf uplink (32 x 4) and the storage link
    assert len(links) == 512 + 128 + 1
    assert elapsed < 1.0
    started = time.perf_counter()
    assert topo.job_links(hosts=list(reversed(hosts)), storage=["stor01"]) is links
    assert time.perf_counter() - started < 0.05


# ------------------------------------------------------------------ properties


@st.composite
def fabrics(draw):
    """Random 2- or 3-tier fabrics with single-, dual-homed and stray hosts."""
    spines = draw(st.integers(1, 3))
    leaves = draw(st.integers(1, 5))
    roles = {f"spine{s}": "spine" for s in range(spines)} | {f"leaf{i}": "leaf" for i in range(leaves)}
    links, port = [], iter(range(10_000))
    for i in range(leaves):
        for s in draw(st.sets(st.integers(0, spines - 1), min_size=1)):
            links.append((f"leaf{i}:p{next(port)}", f"spine{s}:p{next(port)}"))
    for h in range(draw(st.integers(2, 9))):
        name = f"h{h}"
        roles[name] = draw(st.sampled_from(["host", "host", "storage"]))
        for i in draw(st.sets(st.integers(0, leaves - 1), max_size=2)):
            links.append((f"{name}:p{next(port)}", f"leaf{i}:p{next(port)}"))
    if draw(st.booleans()):  # a back-to-back cable between two servers
        links.append(("h0:x", "h1:x"))
    return Topology.from_links(roles=roles, links=links)


@settings(max_examples=60, deadline=None)
@given(fabrics(), st.data())
def test_job_links_equal_union_of_pairwise_ecmp(topo, data):
    """Invariant: the grouped job computation is exactly the union, over the job's host
    pairs and host-storage pairs, of the pairwise ECMP link sets."""
    servers = topo.devices("host") + topo.devices("storage")
    hosts = data.draw(st.sets(st.sampled_from(servers), max_size=6))
    storage = data.draw(st.sets(st.sampled_from(servers), max_size=3))
    expected = set()
    for a, b in combinations(sorted(hosts), 2):
        expected |= topo.ecmp_links(a, b)
    for a in hosts:
        for b in storage:
            if a != b:
                expected |= topo.ecmp_links(a, b)
    assert topo.job_links(hosts=hosts, storage=storage) == expected


@settings(max_examples=60, deadline=None)
@given(fabrics(), st.data())
def test_ecmp_links_lie_on_shortest_paths(topo, data):
    """Invariant: ECMP is symmetric, and every ECMP link joins devices whose distances
    from the two ends add up to the path length minus one."""
    a, b = data.draw(st.lists(st.sampled_from(topo.devices()), min_size=2, max_size=2, unique=True))
    links = topo.ecmp_links(a, b)
    assert links == topo.ecmp_links(b, a)
    total = topo.distance(a, b)
    if total is None:
        assert links == frozenset()
    for link in links:
        x, y = (end.split(":", 1)[0] for end in topo.link_ends(link))
        assert {topo.distance(a, x) + topo.distance(y, b), topo.distance(a, y) + topo.distance(x, b)} & {total - 1}


# --------------------------------------------------------------------- helpers


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _leaf_spine(*, spines: int, leaves: int, hosts_per_leaf: int) -> Topology:
    roles = {f"spine{s:02d}": "spine" for s in range(1, spines + 1)} | {"stor01": "storage"}
    links = []
    for leaf in range(1, leaves + 1):
        roles[f"leaf{leaf:02d}"] = "leaf"
        for s in range(1, spines + 1):
            links.append((f"leaf{leaf:02d}:swp{50 + s}", f"spine{s:02d}:swp{leaf}"))
        for h in range(1, hosts_per_leaf + 1):
            host = f"gpu{(leaf - 1) * hosts_per_leaf + h:03d}"
            roles[host] = "host"
            links.append((f"{host}:eth0", f"leaf{leaf:02d}:swp{h}"))
    links.append(("stor01:eth0", f"leaf{leaves:02d}:swp{hosts_per_leaf + 1}"))
    return Topology.from_links(roles=roles, links=links)
