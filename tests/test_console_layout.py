"""The console's drawing plan (api/console_layout.py): Clos layers as rows, rails and leaves as groups."""
from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from api.console_layout import LAYERS, MARGIN, NODE_GAP, around, layout, natural_key


def clos(*, superspines: int, spines: int, leaves: int, hosts: int, storage: int, rails: bool) -> dict:
    """A Clos topology document (engine form): every leaf to every spine, spines to superspines.

    `rails`: host h has NIC eth{k} on leaf k (rail-optimised); else `hosts` hosts per leaf, one NIC.
    """
    devices, links = [], []
    port: dict[str, int] = {}

    def link(a: str, b: str, a_if: str | None = None, b_if: str | None = None) -> None:
        ends = []
        for dev, name in ((a, a_if), (b, b_if)):
            port[dev] = port.get(dev, 0) + 1
            ends.append(f"{dev}:{name or f'swp{port[dev]}'}")
        links.append({"id": "--".join(sorted(ends)), "a": ends[0], "b": ends[1]})

    names = {role: [f"{role}{i + 1:02d}" for i in range(n)] for role, n in
             (("superspine", superspines), ("spine", spines), ("leaf", leaves), ("stor", storage))}
    for role, group in (("superspine", "superspine"), ("spine", "spine"), ("leaf", "leaf"), ("stor", "storage")):
        devices += [{"id": d, "role": group} for d in names[role]]
    for s in names["spine"]:
        for t in names["superspine"]:
            link(s, t)
        for leaf in names["leaf"]:
            link(leaf, s)
    host_names = [f"gpu{i + 1}" for i in range(hosts if rails else hosts * leaves)]
    devices += [{"id": h, "role": "host"} for h in host_names]
    for k, leaf in enumerate(names["leaf"]):
        attached = host_names if rails else host_names[k * hosts:(k + 1) * hosts]
        for h in attached:
            link(leaf, h, b_if=f"eth{k if rails else 0}")
    for i, st_ in enumerate(names["stor"]):
        if names["leaf"]:
            link(names["leaf"][i % leaves], st_, b_if="eth0")
    return {"devices": devices, "links": links}


fabrics = st.builds(
    clos, superspines=st.integers(0, 2), spines=st.integers(1, 4), leaves=st.integers(1, 6),
    hosts=st.integers(0, 5), storage=st.integers(0, 2), rails=st.booleans(),
)

ROW = {"superspine": "superspine", "spine": "spine", "leaf": "leaf", "host": "host", "storage": "host"}


@given(fabrics)
def test_every_device_is_drawn_once_in_the_row_of_its_layer(doc):
    drawn = layout(doc)
    assert sorted(n["id"] for n in drawn["nodes"]) == sorted(d["id"] for d in doc["devices"])
    for node in drawn["nodes"]:
        assert node["layer"] == ROW[node["role"]]
    layers = [r["layer"] for r in drawn["rows"]]
    assert layers == [layer for layer in LAYERS if layer in layers]  # top to bottom, Clos order
    ys = [r["y"] for r in drawn["rows"]]
    assert ys == sorted(set(ys))
    y_of = {r["layer"]: r["y"] for r in drawn["rows"]}
    assert all(n["y"] == y_of[n["layer"]] for n in drawn["nodes"])
    assert {k["id"] for k in drawn["links"]} == {k["id"] for k in doc["links"]}


@given(fabrics)
def test_no_two_devices_of_a_row_overlap_and_groups_stay_apart(doc):
    drawn = layout(doc)
    for row in drawn["rows"]:
        members = [n for n in drawn["nodes"] if n["layer"] == row["layer"]]
        xs = [n["x"] for n in members]
        assert all(b - a >= NODE_GAP for a, b in zip(xs, xs[1:])), row["layer"]
        assert all(MARGIN <= x <= drawn["width"] - MARGIN for x in xs)
        spans = row["groups"]
        assert all(a["x1"] + NODE_GAP <= b["x0"] for a, b in zip(spans, spans[1:]))
        for span in spans:  # a group's members are exactly the devices inside its span
            inside = {n["id"] for n in members if span["x0"] <= n["x"] <= span["x1"]}
            assert inside == {n["id"] for n in members if n["group"] == span["name"]}


@given(fabrics, st.randoms(use_true_random=False))
def test_the_drawing_does_not_depend_on_the_order_of_the_document(doc, rnd: random.Random):
    shuffled = {"devices": rnd.sample(doc["devices"], len(doc["devices"])),
                "links": [dict(reversed(list(k.items()))) for k in rnd.sample(doc["links"], len(doc["links"]))]}
    for k in shuffled["links"]:
        if rnd.random() < 0.5:
            k["a"], k["b"] = k["b"], k["a"]
    assert layout(shuffled) == layout(doc)


@given(st.integers(2, 6), st.integers(1, 5))
def test_a_rail_optimised_fabric_groups_leaves_by_rail(leaves, hosts):
    drawn = layout(clos(superspines=0, spines=2, leaves=leaves, hosts=hosts, storage=0, rails=True))
    (leaf_row,) = [r for r in drawn["rows"] if r["layer"] == "leaf"]
    assert [g["name"] for g in leaf_row["groups"]] == [f"rail eth{k}" for k in range(leaves)]
    host_groups = {n["group"] for n in drawn["nodes"] if n["layer"] == "host"}
    assert host_groups == {"hosts (rails)"}


@given(st.integers(1, 6), st.integers(1, 5), st.integers(0, 2))
def test_in_a_classic_fabric_each_host_sits_under_its_leaf(leaves, hosts, storage):
    doc = clos(superspines=0, spines=2, leaves=leaves, hosts=hosts, storage=storage, rails=False)
    drawn = layout(doc)
    at = {n["id"]: n for n in drawn["nodes"]}
    for link in doc["links"]:
        leaf, host = sorted((link["a"].split(":")[0], link["b"].split(":")[0]), key=lambda d: at[d]["y"])
        if at[host]["role"] == "host":
            assert at[host]["group"] == leaf
    leaf_groups = [g["name"] for r in drawn["rows"] if r["layer"] == "leaf" for g in r["groups"]]
    assert leaf_groups == [""]  # one rail: no rail names
    host_spans = {g["name"]: g for r in drawn["rows"] if r["layer"] == "host" for g in r["groups"]}
    for leaf in (n for n in drawn["nodes"] if n["role"] == "leaf"):  # each leaf over its hosts
        span = host_spans[leaf["id"]]
        assert leaf["x"] == (span["x0"] + span["x1"]) / 2


def test_names_sort_naturally():
    assert sorted(["gpu10", "gpu2", "gpu1", "leaf01"], key=natural_key) == ["gpu1", "gpu2", "gpu10", "leaf01"]


def test_around_a_pause_storm_draws_the_cause_the_pause_tree_and_the_hosts():
    doc = clos(superspines=0, spines=2, leaves=3, hosts=2, storage=0, rails=False)
    incident = {
        "root_causes": [
            {"rank": 1, "cause": "pfc_storm", "entity": {"kind": "interface", "id": "gpu3:eth0"}, "score": 0.9},
            {"rank": 2, "cause": "congestion", "entity": {"kind": "interface", "id": "leaf02:swp1"}, "score": 0.4},
        ],
        "symptoms": [
            {"kind": "pfc_pause_tx", "family": "pfc", "entity": {"kind": "interface", "id": "gpu3:eth0"}, "device": "gpu3"},
            {"kind": "pfc_pause_tx", "family": "pfc", "entity": {"kind": "interface", "id": "spine01:swp1"},
             "device": "spine01"},
            {"kind": "pfc_pause_rx", "family": "pfc", "entity": {"kind": "interface", "id": "gpu1:eth0"}, "device": "gpu1"},
            {"kind": "queue_congested", "family": "congestion", "entity": {"kind": "interface", "id": "leaf02:swp1"},
             "device": "leaf02"},
        ],
    }
    drawn = around(doc, incident)
    marks = {n["id"]: n["marks"] for n in drawn["nodes"]}
    links = {k["id"]: k for k in drawn["links"]}
    assert "cause" in marks["gpu3"] and "affected" in marks["gpu3"]
    assert "affected" in marks["gpu1"] and "candidate" in marks["leaf02"]
    assert "gpu5" not in marks  # a host of the third leaf: not touched, not drawn
    assert {"leaf03", "gpu5", "gpu6"}.isdisjoint(marks)
    cause_link = links["gpu3:eth0--leaf02:swp3"]
    assert {"cause", "pause"} <= set(cause_link["marks"]) and cause_link["pause_from"] == ["gpu3"]
    spine_link = links["leaf01:swp1--spine01:swp1"]
    assert spine_link["marks"] == ["pause"] and spine_link["pause_from"] == ["spine01"]
    assert links["gpu1:eth0--leaf01:swp3"]["pause_from"] == []  # it receives pause, it does not send it
    assert "congested" in links["leaf02:swp1--spine01:swp2"]["marks"]


def test_around_an_incident_on_an_unknown_entity_draws_what_it_knows():
    doc = clos(superspines=0, spines=1, leaves=1, hosts=1, storage=0, rails=False)
    incident = {"root_causes": [{"rank": 1, "cause": "noisy_neighbor", "entity": {"kind": "job", "id": "42"}}],
                "symptoms": [{"kind": "x", "family": "nic", "entity": {"kind": "interface", "id": "nohost:eth9"},
                              "device": "nohost"}]}
    drawn = around(doc, incident)
    assert drawn["nodes"] == [] and drawn["links"] == []
