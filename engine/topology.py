"""The fabric as a graph of devices, interfaces and links, and the traffic paths over it.

Paths are what the engine reasons with: it cannot know a switch's ECMP hash, so a flow
between two devices may take any equal-cost shortest path (hop count on the device
graph). Only switches forward: hosts and storage are path ends, never transit, so a
dual-homed server is not mistaken for a shortcut between its two leaves.

`Topology` is immutable once built; results of path queries are cached on the instance
(bounded where the key space is open-ended, such as job placements).
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from pathlib import Path

import networkx

from engine.topology_load import (
    ROLES,
    SWITCH_ROLES,
    TopologyError,
    canonical_role,
    read_spec,
    role_from_name,
)
from engine.types import device_of, link_id

__all__ = ["ROLES", "SWITCH_ROLES", "Topology", "TopologyError", "load_topology"]

_JOB_CACHE_SIZE = 256  # distinct job placements remembered; ~100 run at once

# switch-to-switch links, and the switches used on each side
_GroupPaths = tuple[frozenset[str], frozenset[str], frozenset[str]]


class Topology:
    """Devices (nodes with a `role`) joined by links; an edge's `links` attribute is the
    sorted list of link ids between its two devices (parallel cables)."""

    graph: networkx.Graph

    def __init__(self, *, graph: networkx.Graph, ends: dict[str, tuple[str, str]],
                 warnings: tuple[str, ...] = (), excluded: dict[str, str] | None = None) -> None:
        """Use `from_links` or `load_topology`; this trusts its arguments. `warnings` say
        what its file's reader guessed or left out; `excluded` names the devices the file
        holds that are not part of the data fabric (and why): they are in no path."""
        self.graph = graph
        self.warnings = warnings
        self.excluded = dict(excluded or {})
        self._ends = ends
        self._peer: dict[str, str] = {}
        self._link_of: dict[str, str] = {}
        self._ifaces: dict[str, list[str]] = {}
        for link, (a, b) in ends.items():
            self._peer[a], self._peer[b] = b, a
            self._link_of[a] = self._link_of[b] = link
            self._ifaces.setdefault(device_of(a), []).append(a)
            self._ifaces.setdefault(device_of(b), []).append(b)
        for names in self._ifaces.values():
            names.sort()
        self._bfs_cache: dict[str, dict[str, int]] = {}
        self._ecmp_cache: dict[tuple[str, str], frozenset[str]] = {}
        self._group_cache: dict[tuple[frozenset[str], frozenset[str]], _GroupPaths] = {}
        self._job_cache: OrderedDict[tuple, tuple[frozenset[str], frozenset[str]]] = OrderedDict()
        self._egress_cache: OrderedDict[tuple, dict[str, float]] = OrderedDict()  # egress and ingress shares

    # ----------------------------------------------------------------- building

    @classmethod
    def from_links(cls, *, roles: dict[str, str], links: list[tuple[str, str]]) -> Topology:
        """Build from device roles and links given as pairs of interface ids
        (`dev:ifname`). A device in a link but not in `roles` gets its role from its
        name (spine*, leaf*, stor*, otherwise host)."""
        return cls.build(roles=roles, links=links, where=[f"links[{i}]" for i in range(len(links))])

    @classmethod
    def build(cls, *, roles: dict[str, str], links: list[tuple[str, str]], where: list[str],
              warnings: tuple[str, ...] = (), excluded: dict[str, str] | None = None) -> Topology:
        """`from_links` with a location per link (file and line) for error messages."""
        graph = networkx.Graph()
        for device, raw in roles.items():
            role = canonical_role(raw)
            if role is None:
                raise TopologyError(f"device {device}: unknown role {raw!r} (expected one of {', '.join(ROLES)})")
            _check_device_name(device)
            graph.add_node(device, role=role)
        ends: dict[str, tuple[str, str]] = {}
        seen: dict[str, str] = {}  # interface -> where its link was given
        for (a, b), place in zip(links, where, strict=True):
            _check_interface(a, place=place)
            _check_interface(b, place=place)
            if a == b:
                raise TopologyError(f"{place}: link joins interface {a} to itself")
            for iface in (a, b):
                if iface in seen:
                    raise TopologyError(f"{place}: interface {iface} is already cabled at {seen[iface]}")
                seen[iface] = place
            link = link_id(a, b)
            ends[link] = (min(a, b), max(a, b))
            dev_a, dev_b = device_of(a), device_of(b)
            for dev in (dev_a, dev_b):
                if dev not in graph:
                    graph.add_node(dev, role=role_from_name(dev))
            if graph.has_edge(dev_a, dev_b):
                graph.edges[dev_a, dev_b]["links"].append(link)
            else:
                graph.add_edge(dev_a, dev_b, links=[link])
        for _, _, data in graph.edges(data=True):
            data["links"].sort()
        return cls(graph=graph, ends=ends, warnings=warnings, excluded=excluded)

    def to_dict(self) -> dict:
        """The engine's own form, accepted back by `load_topology`."""
        return {
            "devices": [{"id": d, "role": self.graph.nodes[d]["role"]} for d in self.devices()],
            "links": [{"id": link, "a": a, "b": b} for link, (a, b) in sorted(self._ends.items())],
        }

    # ------------------------------------------------------------------ lookups

    def role(self, device: str) -> str | None:
        return self.graph.nodes[device]["role"] if device in self.graph else None

    def is_switch(self, device: str) -> bool:
        return self.role(device) in SWITCH_ROLES

    def devices(self, role: str | None = None) -> list[str]:
        return sorted(d for d, r in self.graph.nodes(data="role") if role is None or r == role)

    def interfaces(self, device: str) -> list[str]:
        return list(self._ifaces.get(device, ()))

    def cabled_interfaces(self) -> frozenset[str]:
        """Every "device:interface" a link of the topology ends on."""
        return frozenset(self._link_of)

    def has_interface(self, interface: str) -> bool:
        return interface in self._link_of

    def peer(self, interface: str) -> str | None:
        return self._peer.get(interface)

    def link_of(self, interface: str) -> str | None:
        return self._link_of.get(interface)

    def link_ends(self, link: str) -> tuple[str, str]:
        """The two interface ids of a link, sorted; KeyError for an unknown link."""
        return self._ends[link]

    def links(self) -> list[str]:
        return sorted(self._ends)

    # -------------------------------------------------------------------- paths

    def distance(self, a: str, b: str) -> int | None:
        """Hop count of the shortest path from device a to device b through switches."""
        if a not in self.graph or b not in self.graph:
            return None
        return self._bfs(a).get(b)

    def ecmp_links(self, a: str, b: str) -> frozenset[str]:
        """Link ids on every equal-cost shortest path between devices a and b."""
        key = (a, b) if a <= b else (b, a)
        cached = self._ecmp_cache.get(key)
        if cached is None:
            cached = self._ecmp_cache[key] = self._compute_ecmp(*key)
        return cached

    def job_links(self, *, hosts: Iterable[str], storage: Iterable[str]) -> frozenset[str]:
        """Links on the ECMP paths between every pair of `hosts` and from every host to
        every `storage` host. Devices not in the topology are ignored."""
        return self._job_paths(hosts=hosts, storage=storage)[0]

    def job_devices(self, *, hosts: Iterable[str], storage: Iterable[str]) -> frozenset[str]:
        """Devices on those paths, and the job's own hosts even when no path leaves them."""
        return self._job_paths(hosts=hosts, storage=storage)[1]

    def egress_shares(self, *, hosts: Iterable[str], interface: str) -> dict[str, float]:
        """Per host of a job, the share of its traffic to the job's other hosts (spread
        evenly over them) whose shortest paths may leave through `interface` onto its link:
        on a leaf's uplink only what its own hosts send off the leaf, on a spine's port
        down to a leaf only what is sent to the job's hosts under that leaf. A host on
        rail leaves counts whole (a rail NIC reaches every rail over the spines: see
        `_compute_group`). Hosts with the same attachment switches share every distance,
        so a job costs as much as its groups."""
        hs = frozenset(h for h in hosts if h in self.graph)
        return self._shares((hs, interface), lambda: self._egress(hs, interface))

    def ingress_shares(self, *, hosts: Iterable[str], storage: Iterable[str], interface: str) -> dict[str, float]:
        """Per host of a job, the share of what it receives from its sources (the job's
        other hosts and its `storage`, spread evenly over them) whose shortest paths may
        arrive through `interface` (out of it, onto its link): `egress_shares` seen from
        the receiving end, where a job reading its storage loads the spines' ports down to
        its leaves though its hosts send little. A host on rail leaves counts whole."""
        hs = frozenset(h for h in hosts if h in self.graph)
        sources = frozenset(x for x in storage if x in self.graph) | hs
        return self._shares((hs, sources, interface), lambda: self._ingress(hs, sources, interface))

    def _shares(self, key: tuple, compute) -> dict[str, float]:
        """Egress or ingress shares by `key` (their keys differ in length), computed once."""
        hit = self._egress_cache.get(key)
        if hit is None:
            hit = self._egress_cache[key] = compute()
            if len(self._egress_cache) > _JOB_CACHE_SIZE * 16:
                self._egress_cache.popitem(last=False)
        return hit

    def _port_groups(self, interface: str, members: frozenset[str]
                     ) -> tuple[str, str, dict[frozenset[str], list[str]]] | None:
        """A link port's two devices (near, far) and `members` grouped by the switches they
        attach to (hosts on the same switches take the same paths); None when the port has
        no peer or fewer than two members share it."""
        peer = self.peer(interface)
        if peer is None or len(members) < 2:
            return None
        groups: dict[frozenset[str], list[str]] = {}
        for x in sorted(members):
            groups.setdefault(self.attachments(x), []).append(x)
        return device_of(interface), device_of(peer), groups

    def _ingress(self, hosts: frozenset[str], sources: frozenset[str], interface: str) -> dict[str, float]:
        ends = self._port_groups(interface, sources)
        if ends is None:
            return {}
        near, far, groups = ends
        out: dict[str, float] = {}
        for h in sorted(hosts):
            if self._rails(self.attachments(h)):
                out[h] = 1.0
                continue
            to_me = self.distance(far, h)
            arriving = 0
            for members in groups.values():
                src = next((x for x in members if x != h), None)
                if src is None:
                    continue
                total, first = self.distance(src, h), self.distance(src, near)
                if to_me is not None and total is not None and first is not None and first + 1 + to_me == total:
                    arriving += len(members) - (h in members)
            out[h] = arriving / (len(sources) - 1)
        return out

    def _egress(self, hosts: frozenset[str], interface: str) -> dict[str, float]:
        ends = self._port_groups(interface, hosts)
        if ends is None:
            return {}
        near, far, groups = ends
        out: dict[str, float] = {}
        for src, members in groups.items():
            if self._rails(src):
                out.update((h, 1.0) for h in members)
                continue
            me, to_near = members[0], self.distance(members[0], near)
            crossing = 0
            for dst, others in groups.items():
                other = next((x for x in others if x != me), None)
                total, rest = self.distance(me, other) if other else None, self.distance(far, other) if other else None
                if to_near is not None and total is not None and rest is not None and to_near + 1 + rest == total:
                    crossing += len(others) - (dst == src)
            out.update((h, crossing / (len(hosts) - 1)) for h in members)
        return out

    def _bfs(self, source: str) -> dict[str, int]:
        """Hop distances from `source`, expanding only through switches."""
        dist = self._bfs_cache.get(source)
        if dist is not None:
            return dist
        dist = {source: 0}
        frontier = [source]
        while frontier:
            nxt = []
            for u in frontier:
                if u != source and not self.is_switch(u):
                    continue
                for v in self.graph[u]:
                    if v not in dist:
                        dist[v] = dist[u] + 1
                        nxt.append(v)
            frontier = nxt
        self._bfs_cache[source] = dist
        return dist

    def _compute_ecmp(self, a: str, b: str) -> frozenset[str]:
        total = self.distance(a, b)
        if not total:  # unknown, disconnected, or the same device
            return frozenset()
        from_a, from_b = self._bfs(a), self._bfs(b)
        out: set[str] = set()
        for u, du in from_a.items():
            if du >= total or (u != a and not self.is_switch(u)):
                continue
            for v in self.graph[u]:
                if from_b.get(v) == total - du - 1 and (v == b or self.is_switch(v)):
                    out.update(self.graph.edges[u, v]["links"])
        return frozenset(out)

    def _job_paths(self, *, hosts: Iterable[str], storage: Iterable[str]) -> tuple[frozenset[str], frozenset[str]]:
        host_set = frozenset(h for h in hosts if h in self.graph)
        storage_set = frozenset(s for s in storage if s in self.graph)
        key = (host_set, storage_set)
        hit = self._job_cache.get(key)
        if hit is not None:
            self._job_cache.move_to_end(key)
            return hit
        links = _JobPaths(self, hosts=host_set, storage=storage_set).links()
        devices = {device_of(i) for link in links for i in self._ends[link]} | host_set
        result = (frozenset(links), frozenset(devices))
        self._job_cache[key] = result
        if len(self._job_cache) > _JOB_CACHE_SIZE:
            self._job_cache.popitem(last=False)
        return result

    def _rails(self, switches: frozenset[str]) -> bool:
        """Multi-NIC endpoints on rail leaves: attached to more switches than a dual-homed
        bond's two, none of them cabled to another (not one switch stack)."""
        return len(switches) > 2 and not any(self.graph.has_edge(a, b) for a in switches for b in switches if a < b)

    def attachments(self, device: str) -> frozenset[str]:
        """The switches a device is cabled to."""
        return frozenset(n for n in self.graph[device] if self.is_switch(n))

    def _group_paths(self, src: frozenset[str], dst: frozenset[str]) -> _GroupPaths:
        """For endpoints attached to switch sets `src` and `dst`: the switch-to-switch
        links on their shortest paths, and the switches of each side those paths use."""
        key = (src, dst)
        hit = self._group_cache.get(key)
        if hit is None:
            hit = self._group_cache[key] = self._compute_group(src, dst)
        return hit

    def _compute_group(self, src: frozenset[str], dst: frozenset[str]) -> _GroupPaths:
        dist = {(s, t): self.distance(s, t) for s in src for t in dst}
        found = [d for d in dist.values() if d is not None]
        if not found:
            return frozenset(), frozenset(), frozenset()
        if self._rails(src) or self._rails(dst):
            # A rail NIC reaches only its own leaf: NIC i of one host and NIC j of
            # another meet over the shortest paths between leaf i and leaf j.
            pairs = [st for st, d in dist.items() if d is not None]
        else:
            best = min(found)
            pairs = [st for st, d in dist.items() if d == best]
        links = frozenset().union(*(self.ecmp_links(s, t) for s, t in pairs))
        return links, frozenset(s for s, _ in pairs), frozenset(t for _, t in pairs)


class _JobPaths:
    """ECMP links of one job, computed per group of endpoints sharing the same
    attachment switches: hosts under one leaf (or one leaf pair) share every
    switch-to-switch path, so 512 hosts cost as much as their few dozen groups."""

    def __init__(self, topo: Topology, *, hosts: frozenset[str], storage: frozenset[str]) -> None:
        self.topo = topo
        self.hosts = hosts
        self.storage = storage
        self.groups: dict[frozenset[str], list[str]] = {}
        self.irregular: list[str] = []  # endpoints with a non-switch neighbour, or switches
        for dev in sorted(hosts | storage):
            neighbours = topo.graph[dev]
            if topo.is_switch(dev) or any(not topo.is_switch(n) for n in neighbours):
                self.irregular.append(dev)
            else:
                self.groups.setdefault(topo.attachments(dev), []).append(dev)

    def _pairs_ok(self, x: str, y: str) -> bool:
        """Traffic flows between two job hosts, and between a job host and storage."""
        return x != y and (x in self.hosts or y in self.hosts)

    def links(self) -> set[str]:
        out: set[str] = set()
        keys = list(self.groups)
        for i, src in enumerate(keys):
            for dst in keys[i:]:
                self._add_group_pair(out, src, dst)
        everyone = sorted(self.hosts | self.storage)
        for x in self.irregular:
            for y in everyone:
                if self._pairs_ok(x, y):
                    out |= self.topo.ecmp_links(x, y)
        return out

    def _add_group_pair(self, out: set[str], src: frozenset[str], dst: frozenset[str]) -> None:
        left, right = self.groups[src], self.groups[dst]
        left_talkers = [x for x in left if self._has_partner(x, right)]
        if not left_talkers:
            return
        right_talkers = [y for y in right if self._has_partner(y, left)]
        switch_links, left_sw, right_sw = self.topo._group_paths(src, dst)
        if not left_sw:
            return  # the two groups are not connected
        out |= switch_links
        self._add_host_links(out, left_talkers, left_sw)
        self._add_host_links(out, right_talkers, right_sw)

    def _has_partner(self, x: str, others: list[str]) -> bool:
        if x in self.hosts:
            return any(y != x for y in others)
        return any(y in self.hosts for y in others)

    def _add_host_links(self, out: set[str], endpoints: list[str], switches: frozenset[str]) -> None:
        edges = self.topo.graph.edges
        for x in endpoints:
            for s in switches:
                if s in self.topo.graph[x]:
                    out.update(edges[x, s]["links"])


def load_topology(path: str | Path) -> Topology:
    """Read a DOT, containerlab, own-form or lldpctl topology file, or a folder of
    lldpctl files (see engine.topology_load)."""
    spec = read_spec(path)
    try:
        return Topology.build(roles=spec.roles, links=spec.links, where=spec.where, warnings=spec.warnings,
                              excluded=spec.excluded)
    except TopologyError as exc:
        if str(exc).startswith(str(path)):
            raise
        raise TopologyError(f"{path}: {exc}") from None


def _check_device_name(device: object) -> None:
    if not isinstance(device, str) or not device or ":" in device or device != device.strip():
        raise TopologyError(f"bad device name {device!r}: needs a non-empty name without ':' or spaces")


def _check_interface(iface: object, *, place: str) -> None:
    if not isinstance(iface, str) or ":" not in iface:
        raise TopologyError(f"{place}: {iface!r} is not an interface id 'device:interface'")
    dev, name = iface.split(":", 1)
    if not dev or not name or iface != iface.strip():
        raise TopologyError(f"{place}: {iface!r} is not an interface id 'device:interface'")
