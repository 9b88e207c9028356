"""The simulated fabric: a two-tier leaf/spine Clos with names, ports and links.

The generator's own model of the network, independent of the engine, so the engine's
tests can trust it. Indices (endpoint, leaf, spine, switch port) are what the traffic
and fault code works with; names and ids are only for output.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

BASE_EPOCH = 1764400000.0
BUFFER_BYTES = 16 * 1024 * 1024  # shared buffer of one switch
PACKET_BYTES = 4096  # RoCE MTU
NIC = "eth0"
UPLINK_BASE = 51  # first leaf uplink port: swp51


@dataclass(frozen=True)
class Physics:
    """Constants of the switches' hardware and of normal behaviour that the realism layer
    draws per seed (sim/split.py; link speed is FabricSpec.speed_gbps). The defaults are
    the classic suite's, so a run without Physics is byte-equal to one before it."""

    buffer_bytes: int = BUFFER_BYTES  # shared buffer of one switch
    mtu_bytes: int = PACKET_BYTES  # bytes per packet
    ecn_knee: float = 0.95  # egress utilisation above which normal load gets ECN marks
    burst_every_s: float = 300.0  # benign watermark bursts: about one per port per this
    fec_noise: int = 20  # corrected FEC frames (and NIC corrected bits) per s, at most
    storage_latency_ms: tuple[float, float] = (0.3, 0.8)  # a storage host's base latency

    def __post_init__(self) -> None:
        lo, hi = self.storage_latency_ms
        if (self.buffer_bytes <= 0 or self.mtu_bytes <= 0 or not 0.5 <= self.ecn_knee < 1
                or self.burst_every_s <= 0 or self.fec_noise < 0 or not 0 < lo <= hi):
            raise ValueError(f"physics out of range: {self}")


@dataclass(frozen=True)
class FabricSpec:
    spines: int = 2
    leaves: int = 4
    hosts_per_leaf: int = 4
    storage_hosts: int = 2
    speed_gbps: int = 400
    interval_s: float = 1.0

    def __post_init__(self) -> None:
        if self.spines < 1 or self.leaves < 2 or self.hosts_per_leaf < 2:
            raise ValueError("a fabric needs >= 1 spine, >= 2 leaves and >= 2 hosts per leaf")
        if self.storage_hosts < 0 or self.speed_gbps <= 0 or self.interval_s <= 0:
            raise ValueError("storage_hosts >= 0, speed_gbps > 0 and interval_s > 0 required")

    @property
    def line_bytes(self) -> float:
        """Line rate in bytes per second."""
        return self.speed_gbps * 1e9 / 8


@dataclass(frozen=True)
class Endpoint:
    """A GPU host or a storage host, with its one NIC on one leaf port."""

    index: int
    name: str
    kind: str  # "host" or "storage"
    leaf: int
    slot: int  # position among the leaf's host ports (0-based)
    leaf_port: str  # e.g. "swp3"

    @property
    def nic_id(self) -> str:
        return f"{self.name}:{NIC}"

    @property
    def ip(self) -> str:
        return f"10.{self.leaf + 1}.0.{self.slot + 10}"


@dataclass(frozen=True)
class SwitchPort:
    """One connected switch port; role is "host" (leaf to host), "up" (leaf to spine)
    or "down" (spine to leaf)."""

    index: int
    device: str
    iface: str
    peer_device: str
    peer_iface: str
    role: str
    leaf: int  # own leaf for host/up ports, the peer leaf for down ports
    spine: int  # -1 for host ports
    endpoint: int  # -1 unless a host port

    @property
    def id(self) -> str:
        return f"{self.device}:{self.iface}"

    @property
    def peer_id(self) -> str:
        return f"{self.peer_device}:{self.peer_iface}"

    @property
    def link_id(self) -> str:
        return link_id(self.id, self.peer_id)


def link_id(a: str, b: str) -> str:
    """Contract id of a link: the two interface ids, sorted, joined by `--`."""
    x, y = sorted((a, b))
    return f"{x}--{y}"


def _width(count: int, minimum: int) -> int:
    return max(minimum, len(str(count)))


class Fabric:
    """Names, ports and index maps of one FabricSpec."""

    def __init__(self, spec: FabricSpec) -> None:
        self.spec = spec
        sw = _width(max(spec.spines, spec.leaves), 2)
        self.spines = [f"spine{i + 1:0{sw}d}" for i in range(spec.spines)]
        self.leaves = [f"leaf{i + 1:0{sw}d}" for i in range(spec.leaves)]
        self.endpoints = self._endpoints()
        self.ports = self._ports()
        self.port_index = {p.id: p.index for p in self.ports}
        self.host_port = np.array(
            [self.port_index[f"{self.leaves[e.leaf]}:{e.leaf_port}"] for e in self.endpoints])
        self.up_port = np.zeros((spec.leaves, spec.spines), dtype=int)
        self.down_port = np.zeros((spec.spines, spec.leaves), dtype=int)
        for p in self.ports:
            if p.role == "up":
                self.up_port[p.leaf, p.spine] = p.index
            elif p.role == "down":
                self.down_port[p.spine, p.leaf] = p.index
        self.leaf_of = np.array([e.leaf for e in self.endpoints])
        self.by_name = {e.name: e for e in self.endpoints}

    def _endpoints(self) -> list[Endpoint]:
        s = self.spec
        hw = _width(s.leaves * s.hosts_per_leaf, 3)
        out: list[Endpoint] = []
        for leaf in range(s.leaves):
            for slot in range(s.hosts_per_leaf):
                n = leaf * s.hosts_per_leaf + slot + 1
                name = f"gpu{n:0{hw}d}"
                out.append(Endpoint(len(out), name, "host", leaf, slot, f"swp{slot + 1}"))
        last = s.leaves - 1
        for k in range(s.storage_hosts):
            slot = s.hosts_per_leaf + k
            name = f"stor{k + 1:02d}"
            out.append(Endpoint(len(out), name, "storage", last, slot, f"swp{slot + 1}"))
        return out

    def uplink_iface(self, spine: int) -> str:
        base = max(UPLINK_BASE, self.spec.hosts_per_leaf + self.spec.storage_hosts + 1)
        return f"swp{base + spine}"

    def _ports(self) -> list[SwitchPort]:
        ports: list[SwitchPort] = []

        def add(**kw) -> None:
            ports.append(SwitchPort(index=len(ports), **kw))

        for leaf, lname in enumerate(self.leaves):
            for e in self.endpoints:
                if e.leaf == leaf:
                    add(device=lname, iface=e.leaf_port, peer_device=e.name, peer_iface=NIC,
                        role="host", leaf=leaf, spine=-1, endpoint=e.index)
            for spine, sname in enumerate(self.spines):
                add(device=lname, iface=self.uplink_iface(spine), peer_device=sname,
                    peer_iface=f"swp{leaf + 1}", role="up", leaf=leaf, spine=spine, endpoint=-1)
        for spine, sname in enumerate(self.spines):
            for leaf, lname in enumerate(self.leaves):
                add(device=sname, iface=f"swp{leaf + 1}", peer_device=lname,
                    peer_iface=self.uplink_iface(spine), role="down", leaf=leaf, spine=spine,
                    endpoint=-1)
        return ports

    # --- lookups -------------------------------------------------------------------
    @cached_property
    def switches(self) -> list[str]:
        return self.spines + self.leaves

    @cached_property
    def hosts(self) -> list[Endpoint]:
        return [e for e in self.endpoints if e.kind == "host"]

    @cached_property
    def storage(self) -> list[Endpoint]:
        return [e for e in self.endpoints if e.kind == "storage"]

    def ports_of(self, device: str) -> list[int]:
        return [p.index for p in self.ports if p.device == device]

    def hosts_on(self, leaf: int) -> list[int]:
        return [e.index for e in self.hosts if e.leaf == leaf]

    def host_link(self, endpoint: int) -> str:
        return self.ports[int(self.host_port[endpoint])].link_id

    def uplink(self, leaf: int, spine: int) -> str:
        return self.ports[int(self.up_port[leaf, spine])].link_id

    def link_ids(self) -> list[str]:
        return [p.link_id for p in self.ports if p.role in ("host", "up")]

    def to_dot(self) -> str:
        """NVIDIA Air / topology_converter DOT."""
        lines = ['graph "fabric" {']
        for name in self.spines:
            lines.append(f'  "{name}" [function="spine"]')
        for name in self.leaves:
            lines.append(f'  "{name}" [function="leaf"]')
        for e in self.endpoints:
            lines.append(f'  "{e.name}" [function="{e.kind}"]')
        for p in self.ports:
            if p.role in ("host", "up"):
                lines.append(f'  "{p.device}":"{p.iface}" -- "{p.peer_device}":"{p.peer_iface}"')
        lines.append("}")
        return "\n".join(lines) + "\n"
