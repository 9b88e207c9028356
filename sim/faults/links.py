"""Faults of links and devices: link_flap, link_degraded, device_down."""
from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np

from ..events import host_link_event, switch_link_event
from ..fabric import NIC
from ..tick import Tick
from ..traffic import Loads, port_flows
from . import Fault


@dataclass
class LinkFlap(Fault):
    """A host link goes down for 1-3 s and comes back after 5-15 s, several times."""

    cause = "link_flap"
    kind = "link"
    endpoint: int = 0
    downs: list[tuple[float, float]] = field(default_factory=list)

    @staticmethod
    def schedule(rng: random.Random, start: float, window: float, *, intensity: str
                 ) -> list[tuple[float, float]]:
        """Down periods (down_at, up_at) fitting in the window: 5 flaps of 1.2-3 s
        (medium: 4 of 1.1-2.2 s, weak: 3 of 1.1-1.6 s)."""
        flaps, lo, hi = {"strong": (5, 1.2, 3.0), "medium": (4, 1.1, 2.2),
                         "weak": (3, 1.1, 1.6)}[intensity]
        scale = min(1.0, window / 60.0)
        downs, t = [], start
        for _ in range(flaps):
            down = rng.uniform(lo, hi)
            if downs and t + down > start + window:
                break
            downs.append((round(t, 3), round(t + down, 3)))
            t += down + max(2.0, rng.uniform(5.0, 15.0) * scale)
        return downs

    def shape(self, tick: Tick) -> None:
        lost = sum(max(0.0, min(tick.t, u) - max(tick.t0, d)) for d, u in self.downs)
        if lost:
            tick.link_frac[self.endpoint] = max(0.0, 1.0 - lost / tick.dt)
        if any(d <= tick.t < u for d, u in self.downs):
            tick.link_state[self.endpoint] = False

    def apply(self, tick: Tick, loads: Loads) -> None:
        f = self.fabric
        ep = f.endpoints[self.endpoint]
        port = f.ports[int(f.host_port[self.endpoint])]
        for d, u in self.downs:
            for when, up in ((d, False), (u, True)):
                if tick.t0 < when <= tick.t:
                    tick.sp_add(port.index, "carrier_changes", 1)
                    if not up:
                        tick.nic_add(self.endpoint, "link_down_events_phy", 1)
                    tick.events.append(switch_link_event(port.device, port.iface, when, up=up,
                                                         reason="remote fault"))
                    tick.events.append(host_link_event(ep.name, NIC, when + 0.002, up=up,
                                                       speed_mbps=f.spec.speed_gbps * 1000))

    def detail(self) -> dict:
        return {"downs": [list(x) for x in self.downs]}


@dataclass
class LinkDegraded(Fault):
    """A bad optic on a leaf-spine link: FEC, symbol and CRC errors on both ends, and a
    few RoCE retransmissions on the hosts whose traffic crosses it. The link stays up."""

    cause = "link_degraded"
    kind = "link"
    leaf: int = 0
    spine: int = 0

    def apply(self, tick: Tick, loads: Loads) -> None:
        frac = self.frac(tick)
        if frac <= 0:
            return
        f, rng = self.fabric, tick.rng
        m = frac * self.pick(1.0, 0.3, 0.1)
        ports = (int(f.up_port[self.leaf, self.spine]), int(f.down_port[self.spine, self.leaf]))
        for port in ports:
            bad = rng.uniform(20, 200) * m
            tick.sp_add(port, "if_in_fec_correctable_frames", 50_000 * rng.uniform(0.9, 1.1) * m)
            tick.sp_add(port, "if_in_fec_not_correctable_frames", bad)
            tick.sp_add(port, "if_in_errors", bad * rng.uniform(0.95, 1.05))
            tick.sp_add(port, "if_in_fec_symbol_errors", 100_000 * rng.uniform(0.9, 1.1) * m)
        recv = np.zeros(len(f.endpoints))
        send = np.zeros(len(f.endpoints))
        for port in ports:
            r, s = port_flows(f, loads, port)
            recv += r
            send += s
        for e in np.flatnonzero(recv > 0):
            tick.nic_add(int(e), "out_of_sequence", rng.uniform(5, 50) * m)
        for e in np.flatnonzero(send > 0):
            tick.nic_add(int(e), "packet_seq_err", rng.uniform(5, 50) * m)


@dataclass
class DeviceDown(Fault):
    """A switch stops: no telemetry from it, its peers see their links go down, traffic
    reroutes. At the end it reboots: telemetry resumes with counters from zero."""

    cause = "device_down"
    kind = "switch"

    @property
    def is_spine(self) -> bool:
        return self.entity in self.fabric.spines

    def shape(self, tick: Tick) -> None:
        if not (self.start <= tick.t < self.end):
            return
        f = self.fabric
        if self.is_spine:
            tick.spine_up[f.spines.index(self.entity)] = False
        else:
            tick.leaf_up[f.leaves.index(self.entity)] = False
        tick.silent.add(self.entity)

    def _peers(self) -> tuple[list[int], list[int]]:
        """Switch ports facing the device, and endpoints attached to it."""
        f = self.fabric
        ports = [p.index for p in f.ports if p.peer_device == self.entity]
        hosts = [] if self.is_spine else [e.index for e in f.endpoints
                                          if e.leaf == f.leaves.index(self.entity)]
        return ports, hosts

    def apply(self, tick: Tick, loads: Loads) -> None:
        for when, up in ((self.start, False), (self.end, True)):
            if not (tick.t0 < when <= tick.t):
                continue
            f = self.fabric
            ports, hosts = self._peers()
            for i in ports:
                p = f.ports[i]
                tick.sp_add(i, "carrier_changes", 1)
                tick.events.append(switch_link_event(p.device, p.iface, when, up=up,
                                                     reason="carrier loss"))
            for e in hosts:
                if not up:
                    tick.nic_add(e, "link_down_events_phy", 1)
                tick.events.append(host_link_event(f.endpoints[e].name, NIC, when + 0.001,
                                                   up=up, speed_mbps=f.spec.speed_gbps * 1000))
            if up:
                tick.resets.update(f.ports_of(self.entity))

    def detail(self) -> dict:
        return {"counter_reset_at": self.end, "reboot": True}
