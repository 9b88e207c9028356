"""containerlab YAML: `topology.nodes.<name>` and `topology.links[].endpoints`.

A node's role, first found wins:
1. a `role` (or `graph-role`) label, inherited defaults -> kinds -> groups -> node;
2. a `group` that names a role (groups are free-form, "tier-1" or "rack3" say nothing);
3. its `kind` (the node's, else `topology.defaults.kind`): a network OS kind (srl /
   nokia_srlinux, ceos / arista_ceos, sonic-vs, cvx / cumulus_cvx, crpd, xrd, any
   `vr-*` vrnetlab VM, ...) is a switch whose tier comes from its name (spine1 ->
   spine) or, when the name gives none, is guessed as leaf with a warning; `linux` is a
   host (storage when named stor*), or, when named like a switch (an FRR container),
   that switch with a warning; `bridge` and `ovs-bridge` nodes are left out of the
   fabric with a warning;
4. anything else (an unknown kind, no kind): the role its name gives, with a warning.
"""
from __future__ import annotations

from engine.topology_load.common import (
    EXPECTED,
    TopologyError,
    TopologySpec,
    Warnings,
    canonical_role,
    names,
    role_from_name,
    switch_tier_from_name,
)

CLAB_SPECIAL_NODES = frozenset({"host", "mgmt-net", "macvlan", "bridge", "ovs-bridge"})
CLAB_SINGLE_ENDED = frozenset({"host", "mgmt-net", "macvlan", "dummy", "vxlan", "vxlan-stitch"})
# containerlab's kinds of network operating systems (current names and the short or
# older ones it still accepts): each is a switch or router of the fabric.
SWITCH_KINDS = frozenset({
    "nokia_srlinux", "srl", "nokia_sros", "nokia_srsim", "arista_ceos", "ceos", "arista_veos",
    "cumulus_cvx", "cvx", "sonic-vs", "sonic-vm", "dell_sonic", "dell_ftosv", "juniper_crpd", "crpd",
    "juniper_vmx", "juniper_vqfx", "juniper_vsrx", "juniper_vjunosrouter", "juniper_vjunosswitch",
    "juniper_vjunosevolved", "juniper_cjunosevolved", "cisco_xrd", "xrd", "cisco_xrv", "cisco_xrv9k",
    "cisco_csr1000v", "cisco_n9kv", "cisco_nxos", "cisco_c8000", "cisco_c8000v", "cisco_cat9kv",
    "cisco_iol", "cisco_vios", "mikrotik_ros", "huawei_vrp", "ipinfusion_ocnos", "aruba_aoscx",
    "6wind_vsr", "fdio_vpp", "vyosnetworks_vyos", "rare",
})
SWITCH_KIND_PREFIXES = ("vr-",)  # vrnetlab VMs of a network OS: vr-sros, vr-vmx, vr-veos, ...
HOST_KINDS = frozenset({"linux"})
NON_FABRIC_KINDS = frozenset({"bridge", "ovs-bridge"})


def parse_clab(doc: dict, *, source: str) -> TopologySpec:
    """The devices, roles and links of a containerlab document."""
    topo = doc.get("topology")
    if not isinstance(topo, dict):
        raise TopologyError(f"{source}: 'topology' must be a mapping")
    nodes = topo.get("nodes") or {}
    if not isinstance(nodes, dict):
        raise TopologyError(f"{source}: topology.nodes must be a mapping of node names")
    warnings = Warnings()
    roles: dict[str, str] = {}
    excluded: dict[str, str] = {}
    for name, node in nodes.items():
        role = _clab_role(str(name), node or {}, topo=topo, source=source, warnings=warnings)
        if role.startswith("kind="):
            excluded[str(name)] = role
        else:
            roles[str(name)] = role
    links = topo.get("links") or []
    if not isinstance(links, list):
        raise TopologyError(f"{source}: topology.links must be a list")
    pairs: list[tuple[str, str]] = []
    where: list[str] = []
    for i, link in enumerate(links):
        label = f"{source}: links[{i}]"
        pair = _clab_link(link, roles=roles, excluded=excluded, label=label)
        if pair is not None:
            pairs.append(pair)
            where.append(label)
    notes = warnings.lines(source)
    if excluded:
        notes = (f"{source}: left out of the data fabric with their links: "
                 + names([f"{d} ({why})" for d, why in excluded.items()]),) + notes
    return TopologySpec(roles=roles, links=pairs, where=where, warnings=notes, excluded=excluded)


def _clab_role(name: str, node: object, *, topo: dict, source: str, warnings: Warnings) -> str:
    """The node's role (module docstring), or `kind=...` for a node left out."""
    if not isinstance(node, dict):
        raise TopologyError(f"{source}: node {name}: must be a mapping")
    defaults = topo.get("defaults") if isinstance(topo.get("defaults"), dict) else {}
    kind = node.get("kind", defaults.get("kind"))
    kind = kind.strip().lower() if isinstance(kind, str) else None
    group = node.get("group")
    labels: dict = {}
    for layer in (defaults, (topo.get("kinds") or {}).get(kind), (topo.get("groups") or {}).get(group), node):
        if isinstance(layer, dict) and isinstance(layer.get("labels"), dict):
            labels.update(layer["labels"])
    raw = labels.get("role", labels.get("graph-role"))
    if raw is not None:
        role = canonical_role(raw)
        if role is None:
            raise TopologyError(f"{source}: node {name}: unknown role label {raw!r} ({EXPECTED})")
        return role
    if (role := canonical_role(group)) is not None:
        return role
    return _role_of_kind(name, kind, warnings)


def _role_of_kind(name: str, kind: str | None, warnings: Warnings) -> str:
    tier = switch_tier_from_name(name)
    if kind in SWITCH_KINDS or (kind or "").startswith(SWITCH_KIND_PREFIXES):
        if tier is None:
            warnings.add("switch kind, tier guessed as leaf (the name gives none; set labels.role)",
                         f"{name} ({kind})")
        return tier or "leaf"
    if kind in HOST_KINDS:
        if tier is not None:
            warnings.add("kind linux named like a switch, loaded as that switch (set labels.role)",
                         f"{name} ({tier})")
        return role_from_name(name)
    if kind in NON_FABRIC_KINDS:
        return f"kind={kind}"
    role = role_from_name(name)
    what = f"unknown kind {kind!r}" if kind else "no kind"
    warnings.add("role guessed from the name (no role label, group or known kind)", f"{name} ({what}: {role})")
    return role


def _clab_link(link: object, *, roles: dict[str, str], excluded: dict[str, str],
               label: str) -> tuple[str, str] | None:
    if not isinstance(link, dict):
        raise TopologyError(f"{label}: must be a mapping with 'endpoints'")
    if link.get("type") in CLAB_SINGLE_ENDED:
        return None  # a link to the container host or a bridge, not a fabric cable
    endpoints = link.get("endpoints")
    if not isinstance(endpoints, list) or len(endpoints) != 2:
        raise TopologyError(f"{label}: 'endpoints' must list exactly two 'node:interface' ends")
    ends = [_clab_endpoint(ep, label=label) for ep in endpoints]
    for node, _ in ends:
        if node in excluded:
            return None
        if node not in roles:
            if node in CLAB_SPECIAL_NODES:
                return None
            raise TopologyError(f"{label}: endpoint node {node!r} is not in topology.nodes")
    return f"{ends[0][0]}:{ends[0][1]}", f"{ends[1][0]}:{ends[1][1]}"


def _clab_endpoint(ep: object, *, label: str) -> tuple[str, str]:
    if isinstance(ep, dict):
        node, iface = ep.get("node"), ep.get("interface")
    elif isinstance(ep, str) and ":" in ep:
        node, iface = ep.split(":", 1)
    else:
        raise TopologyError(f"{label}: endpoint {ep!r} is not 'node:interface'")
    if not isinstance(node, str) or not isinstance(iface, str) or not node.strip() or not iface.strip():
        raise TopologyError(f"{label}: endpoint {ep!r} needs a node and an interface")
    return node.strip(), iface.strip()
