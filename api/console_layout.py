"""Where the console draws each device: the Clos layers as rows, rails and leaves as groups.

Pure functions of the topology document (`engine.topology.Topology.to_dict`: devices
with roles, links between interface ids) and of an incident; the console's JavaScript
only draws what these return.

- Rows, top to bottom: superspine, spine, leaf, then hosts and storage; a device of
  another role gets a last row of its own.
- Leaves are grouped by rail: the host interface most of a leaf's host links land on
  (`eth3` on a rail-optimised fabric, where leaf k serves NIC k of every host). One rail
  (a classic fabric) is one unnamed group.
- A host attached to one leaf sits in that leaf's group, under it; hosts with NICs on
  several leaves (rails) form one group; storage hosts a group of their own.
- Names sort naturally (`gpu2` before `gpu10`). The result depends on the set of devices
  and links, never on their order in the document.
"""
from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable

LAYERS = ("superspine", "spine", "leaf", "host", "other")
_ROW_OF_ROLE = {"superspine": "superspine", "spine": "spine", "leaf": "leaf", "host": "host", "storage": "host"}
NODE_GAP = 64  # px between two device centres in a row
GROUP_GAP = 32  # px added between two groups of a row
ROW_GAP = 120  # px between two rows
MARGIN = 48  # px around the drawing


def natural_key(name: str) -> tuple:
    """`gpu2` < `gpu10`: digit runs compare as numbers, the rest as text."""
    return tuple((0, int(part), part) if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", name))


def device_of(interface: str) -> str:
    """`leaf01:swp1` -> `leaf01` (a device name holds no colon)."""
    return interface.partition(":")[0]


def layout(document: dict) -> dict:
    """Rows, groups and (x, y) of every device of `document`, and its links by device.

    Returns `{"width", "height", "rows": [{"layer", "y", "groups": [{"name", "x0", "x1"}]}],
    "nodes": [{"id", "role", "layer", "group", "x", "y"}], "links": [{"id", "a", "b",
    "ends": [iface, iface]}]}`, links with `a`/`b` the devices (sorted by link id).
    """
    roles = {str(d["id"]): str(d.get("role") or "") for d in document.get("devices") or []}
    links = sorted(
        ({"id": str(k["id"]), "ends": sorted([str(k["a"]), str(k["b"])])} for k in document.get("links") or []),
        key=lambda k: k["id"],
    )
    for link in links:
        link["a"], link["b"] = (device_of(end) for end in link["ends"])
    links = [k for k in links if k["a"] in roles and k["b"] in roles]
    rows = _grouped_rows(roles, links)
    return _place(rows, roles, links)


def _grouped_rows(roles: dict[str, str], links: list[dict]) -> dict[str, list[tuple[str, list[str]]]]:
    """layer -> [(group name, devices in order)], groups in drawing order."""
    by_layer: dict[str, list[str]] = defaultdict(list)
    for device, role in roles.items():
        by_layer[_ROW_OF_ROLE.get(role, "other")].append(device)
    leaves_of: dict[str, set[str]] = defaultdict(set)  # host -> leaves it is attached to
    ports: dict[str, Counter] = defaultdict(Counter)  # leaf -> host interface names
    for link in links:
        for (dev, _), (peer, peer_end) in _both_ways(link):
            if roles.get(dev) == "leaf" and roles.get(peer) in ("host", "storage"):
                leaves_of[peer].add(dev)
                ports[dev][peer_end.partition(":")[2]] += 1
    rail = {leaf: min(c.items(), key=lambda kv: (-kv[1], natural_key(kv[0])))[0] for leaf, c in ports.items()}
    rows: dict[str, list[tuple[str, list[str]]]] = {}
    for layer in ("superspine", "spine", "other"):
        if by_layer[layer]:
            rows[layer] = [("", sorted(by_layer[layer], key=natural_key))]
    leaves = sorted(by_layer["leaf"], key=lambda d: (natural_key(rail.get(d, "")), natural_key(d)))
    if leaves:
        rails = sorted({rail.get(d, "") for d in leaves}, key=natural_key)
        named = len(rails) > 1
        rows["leaf"] = [
            (f"rail {r}" if named and r else "", [d for d in leaves if rail.get(d, "") == r]) for r in rails
        ]
    if by_layer["host"]:
        rows["host"] = _host_groups(by_layer["host"], roles, leaves_of, leaves)
    return {layer: rows[layer] for layer in LAYERS if layer in rows}


def _both_ways(link: dict) -> Iterable[tuple[tuple[str, str], tuple[str, str]]]:
    a, b = (link["a"], link["ends"][0]), (link["b"], link["ends"][1])
    return ((a, b), (b, a))


def _host_groups(
    hosts: list[str], roles: dict[str, str], leaves_of: dict[str, set[str]], leaves: list[str]
) -> list[tuple[str, list[str]]]:
    single: dict[str, list[str]] = defaultdict(list)
    multi, storage, loose = [], [], []
    for host in hosts:
        attached = leaves_of.get(host, set())
        if roles[host] == "storage":
            storage.append(host)
        elif len(attached) == 1:
            single[next(iter(attached))].append(host)
        elif attached:
            multi.append(host)
        else:
            loose.append(host)
    groups = [(leaf, sorted(single[leaf], key=natural_key)) for leaf in leaves if single.get(leaf)]
    for name, members in (("hosts (rails)", multi), ("unattached", loose), ("storage", storage)):
        if members:
            groups.append((name, sorted(members, key=natural_key)))
    return groups


def _place(rows: dict[str, list[tuple[str, list[str]]]], roles: dict[str, str], links: list[dict]) -> dict:
    widths = {
        layer: NODE_GAP * (sum(len(m) for _, m in groups) - 1) + GROUP_GAP * (len(groups) - 1)
        for layer, groups in rows.items()
    }
    inner = max(widths.values(), default=0)
    xs: dict[str, float] = {}
    for layer, groups in rows.items():
        x = MARGIN + (inner - widths[layer]) / 2
        for _, members in groups:
            for device in members:
                xs[device] = x
                x += NODE_GAP
            x += GROUP_GAP
    _over_their_hosts(rows, xs)
    nodes, out_rows = [], []
    for i, (layer, groups) in enumerate(rows.items()):
        y = MARGIN + i * ROW_GAP
        for name, members in groups:
            nodes += [{"id": d, "role": roles[d], "layer": layer, "group": name, "x": xs[d], "y": y} for d in members]
        spans = [{"name": name, "x0": xs[members[0]], "x1": xs[members[-1]]} for name, members in groups]
        out_rows.append({"layer": layer, "y": y, "groups": spans})
    height = 2 * MARGIN + ROW_GAP * (len(rows) - 1) if rows else 0
    return {"width": inner + 2 * MARGIN, "height": height, "rows": out_rows, "nodes": nodes, "links": links}


def _over_their_hosts(rows: dict[str, list[tuple[str, list[str]]]], xs: dict[str, float]) -> None:
    """Move each leaf over the middle of its hosts' group when every leaf has one (a
    classic fabric; not rails). The groups are in leaf order, one gap apart, so two
    centres are at least NODE_GAP + GROUP_GAP apart: the leaves keep order and room."""
    leaves = [d for _, members in rows.get("leaf", []) for d in members]
    hosts = {name: members for name, members in rows.get("host", [])}
    if leaves and all(leaf in hosts for leaf in leaves):
        xs.update((leaf, (xs[hosts[leaf][0]] + xs[hosts[leaf][-1]]) / 2) for leaf in leaves)


# ---------------------------------------------------------------- around an incident

_LINK_MARK_OF_FAMILY = {"pfc": "pause", "congestion": "congested", "microburst": "congested", "job_surge": "congested"}


def around(document: dict, incident: dict) -> dict:
    """The layout of the part of the fabric an incident touches, with what to draw on it.

    Devices shown: those of the root causes and symptoms, the peers of every interface
    named, and the neighbours of the rank-1 cause (a dead switch's leaves, a bad link's
    two ends). Marks, per device: `cause` (rank 1), `candidate` (lower ranks), `symptom`,
    `affected` (a host or storage host with a symptom or the cause); per link: `cause`,
    `pause` (a PFC symptom on one of its ends; `pause_from` lists the devices sending
    pause on it), `congested` (congestion on an end: the traffic a fault moved), `symptom`.
    """
    full = layout(document)
    roles = {n["id"]: n["role"] for n in full["nodes"]}
    link_of = {end: k for k in full["links"] for end in k["ends"]}
    by_id = {k["id"]: k for k in full["links"]}
    node_marks: dict[str, set[str]] = defaultdict(set)
    link_marks: dict[str, set[str]] = defaultdict(set)
    pause_from: dict[str, set[str]] = defaultdict(set)
    causes = sorted(incident.get("root_causes") or [], key=lambda rc: rc.get("rank", 0))
    for i, rc in enumerate(causes):
        _mark(rc.get("entity") or {}, "cause" if i == 0 else "candidate", node_marks, link_marks, link_of, by_id)
    for symptom in incident.get("symptoms") or []:
        entity = symptom.get("entity") or {}
        mark = _LINK_MARK_OF_FAMILY.get(str(symptom.get("family")), "symptom")
        _mark(entity, "symptom", node_marks, link_marks, link_of, by_id, link_mark=mark)
        node_marks[str(symptom.get("device", ""))].add("symptom")
        if mark == "pause" and str(symptom.get("kind", "")).endswith("_tx") and entity.get("id") in link_of:
            pause_from[link_of[entity["id"]]["id"]].add(device_of(entity["id"]))
    for device, marks in node_marks.items():
        if roles.get(device) in ("host", "storage") and marks & {"cause", "symptom"}:
            marks.add("affected")
    shown = {d for d in node_marks if d in roles}
    for link_id in link_marks:
        shown |= {by_id[link_id]["a"], by_id[link_id]["b"]}
    top = {d for d, m in node_marks.items() if "cause" in m}
    for link in full["links"]:
        if link["a"] in top or link["b"] in top:
            shown |= {link["a"], link["b"]}
    part = {
        "devices": [{"id": d, "role": roles[d]} for d in shown],
        "links": [{"id": k["id"], "a": k["ends"][0], "b": k["ends"][1]} for k in full["links"]
                  if k["a"] in shown and k["b"] in shown],
    }  # fmt: skip
    drawn = layout(part)
    for node in drawn["nodes"]:
        node["marks"] = sorted(node_marks.get(node["id"], ()))
    for link in drawn["links"]:
        link["marks"] = sorted(link_marks.get(link["id"], ()))
        link["pause_from"] = sorted(pause_from.get(link["id"], ()), key=natural_key)
    return drawn


def _mark(
    entity: dict,
    mark: str,
    node_marks: dict[str, set[str]],
    link_marks: dict[str, set[str]],
    link_of: dict[str, dict],
    by_id: dict[str, dict],
    *,
    link_mark: str | None = None,
) -> None:
    """Put `mark` on the devices of `entity` and `link_mark` (default `mark`) on its link."""
    kind, eid = str(entity.get("kind", "")), str(entity.get("id", ""))
    if kind == "link" and eid in by_id:
        link = by_id[eid]
        link_marks[eid].add(link_mark or mark)
        node_marks[link["a"]].add(mark)
        node_marks[link["b"]].add(mark)
    elif kind == "interface":
        node_marks[device_of(eid)].add(mark)
        if eid in link_of:
            link_marks[link_of[eid]["id"]].add(link_mark or mark)
    elif kind in ("switch", "host", "storage"):
        node_marks[eid].add(mark)
