"""Faults of queues and traffic: pfc_storm, congestion, microburst, noisy_neighbor."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from ..events import wjh_buffer_drop
from ..tick import Tick
from ..traffic import Loads, port_flows
from . import MIB, Fault, congest


@dataclass(frozen=True)
class StormLevel:
    """How hard a pause storm is."""

    drop: tuple[float, float]  # send-rate factor of the paused hosts
    rate: tuple[float, float]  # pause frames/s sent by the origin NIC
    pause_us: float  # pause time per second at the origin (us/s)
    occ_mib: tuple[float, float]  # queue at the origin's leaf port
    hop_mib: tuple[float, float]  # queues further up the pause tree
    warning: bool  # the NIC counts pause-storm warning events
    watchdog: bool  # the switch's PFC watchdog declares the queue stormed


STORM_LEVELS = {
    "strong": StormLevel((0.1, 0.5), (5_000, 20_000), 800_000, (8, 14), (1, 4), True, True),
    "medium": StormLevel((0.3, 0.6), (1_500, 4_000), 350_000, (3, 6), (1, 4), True, False),
    "weak": StormLevel((0.5, 0.8), (300, 800), 100_000, (1, 3), (1, 4), False, False),
}


@dataclass
class PfcStorm(Fault):
    """A host NIC sends pause without end; the pause tree spreads one hop per second:
    its leaf port (t+0), that leaf's uplinks and the spines (t+1), the spines' ports to
    the job's other leaves (t+2), those leaves' ports to the job's hosts (t+3)."""

    cause = "pfc_storm"
    kind = "interface"
    levels: ClassVar[dict[str, StormLevel]] = STORM_LEVELS
    endpoint: int = 0
    _stormed: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        f, v = self.fabric, self.endpoint
        job = self.job_of(v)
        peers = [h for h in (job.hosts if job else ()) if h != v]
        leaf = f.endpoints[v].leaf
        self.local = [h for h in peers if f.endpoints[h].leaf == leaf]
        self.remote = [h for h in peers if f.endpoints[h].leaf != leaf]
        self.remote_leaves = sorted({f.endpoints[h].leaf for h in self.remote})
        self.leaf = leaf
        self.lv = self.levels[self.intensity]

    def _age(self, tick: Tick) -> float:
        """Whole intervals since the storm began: 0 in the first one."""
        return tick.t - tick.dt - self.start

    def shape(self, tick: Tick) -> None:
        if not self.active(tick):
            return
        age, rng = self._age(tick), tick.rng
        drop = lambda: rng.uniform(*self.lv.drop)  # noqa: E731
        paused = [self.endpoint] + (self.local if age >= 1 else []) + (
            self.remote if age >= 3 else [])
        for h in paused:
            tick.tx_factor[h] *= drop()
        tick.rx_factor[self.endpoint] *= drop()

    def apply(self, tick: Tick, loads: Loads) -> None:
        f, rng = self.fabric, tick.rng
        vport = int(f.host_port[self.endpoint])
        if self.ends(tick) and self._stormed:
            tick.sq_add(vport, "pfcwd_deadlock_restored", 1)
            self._stormed = False
        frac = self.frac(tick)
        if frac <= 0 or not self.active(tick):
            return
        age, lv = self._age(tick), self.lv
        rate = rng.uniform(*lv.rate) * frac
        dur = lv.pause_us * rng.uniform(0.9, 1.05) * frac
        v = self.endpoint
        tick.nic_add(v, "tx_prio3_pause", rate)
        tick.nic_add(v, "tx_prio3_pause_duration", dur)
        if lv.warning:
            tick.nic_add(v, "tx_pause_storm_warning_events", 1)
        self._rx(tick, vport, rate, dur)
        occ = rng.uniform(*lv.occ_mib) * MIB
        self._fill(tick, vport, occ)
        if lv.watchdog and age >= 3 and not self.ends(tick):
            tick.stormed[vport] = True
            if not self._stormed:
                tick.sq_add(vport, "pfcwd_deadlock_detected", 1)
                self._stormed = True
        self._spread(tick, age, 0.3 * rate, 0.3 * dur)

    def _spread(self, tick: Tick, age: float, rate: float, dur: float) -> None:
        """The pause tree beyond the first hop, one hop per interval."""
        f, alive = self.fabric, tick.alive()
        spines = [s for s in range(f.spec.spines) if alive[self.leaf, s]]
        if age >= 1:
            for s in spines:
                self._tx(tick, int(f.up_port[self.leaf, s]), rate, dur)
                self._rx(tick, int(f.down_port[s, self.leaf]), rate, dur)
                self._fill(tick, int(f.down_port[s, self.leaf]),
                           tick.rng.uniform(*self.lv.hop_mib) * MIB)
            self._pause_hosts(tick, self.local, rate, dur)
        if age >= 2:
            for b in self.remote_leaves:
                for s in spines:
                    if alive[b, s]:
                        self._tx(tick, int(f.down_port[s, b]), rate, dur)
                        self._rx(tick, int(f.up_port[b, s]), rate, dur)
                        self._fill(tick, int(f.up_port[b, s]),
                                   tick.rng.uniform(*self.lv.hop_mib) * MIB)
        if age >= 3:
            self._pause_hosts(tick, self.remote, rate, dur)

    def _pause_hosts(self, tick: Tick, hosts: list[int], rate: float, dur: float) -> None:
        for h in hosts:
            self._tx(tick, int(self.fabric.host_port[h]), rate, dur)
            tick.nic_add(h, "rx_prio3_pause", rate)
            tick.nic_add(h, "rx_prio3_pause_duration", dur)

    @staticmethod
    def _tx(tick: Tick, port: int, rate: float, dur: float) -> None:
        tick.sp_add(port, "pfc_3_tx_pkts", rate * tick.rng.uniform(0.9, 1.1))
        tick.sp_add(port, "pfc_3_tx_pause_duration_us", dur * tick.rng.uniform(0.9, 1.1))

    @staticmethod
    def _rx(tick: Tick, port: int, rate: float, dur: float) -> None:
        tick.sp_add(port, "pfc_3_rx_pkts", rate)
        tick.sp_add(port, "pfc_3_rx_pause_duration_us", dur)

    @staticmethod
    def _fill(tick: Tick, port: int, occ: float) -> None:
        """A paused egress queue fills up."""
        tick.occ[port] = occ
        tick.wm[port] = max(tick.wm[port], min(tick.phys.buffer_bytes, occ * tick.rng.uniform(1.0, 1.1)))

    def detail(self) -> dict:
        names = lambda hs: [self.fabric.endpoints[h].name for h in hs]  # noqa: E731
        return {"paused_hosts": names(self.local + self.remote),
                "remote_leaves": [self.fabric.leaves[b] for b in self.remote_leaves]}


@dataclass
class Congestion(Fault):
    """Incast: the victim's job hosts all send to it; its leaf egress port runs at line
    rate with a deep queue, ECN marks and CNPs, a few WRED drops, and no pause."""

    cause = "congestion"
    kind = "interface"
    endpoint: int = 0  # the receiving host

    def senders(self) -> list[int]:
        job = self.job_of(self.endpoint)
        return [h for h in (job.hosts if job else ()) if h != self.endpoint]

    def demand(self, tick: Tick, d: np.ndarray) -> None:
        frac = self.frac(tick)
        if frac > 0:
            extra = self.pick(0.35, 0.25, 0.15) * frac * self.fabric.spec.line_bytes
            d[self.senders(), self.endpoint] += extra

    def apply(self, tick: Tick, loads: Loads) -> None:
        frac = self.frac(tick)
        if frac <= 0:
            return
        rng, port = tick.rng, int(self.fabric.host_port[self.endpoint])
        r_occ, r_marks, most = self.pick(((4, 12), (50e3, 200e3), 20),
                                         ((3, 7), (15e3, 60e3), 8),
                                         ((2, 4), (5e3, 20e3), 3))
        occ, marks = rng.uniform(*r_occ) * MIB, rng.uniform(*r_marks)
        drops = rng.randint(0, most)
        congest(tick, loads, port, occupancy=occ, marks=marks * frac)
        tick.sp_add(port, "wred_dropped_packets", drops)
        tick.sq_add(port, "wred_dropped_packets", drops)

    def detail(self) -> dict:
        return {"senders": [self.fabric.endpoints[h].name for h in self.senders()]}


@dataclass
class Microburst(Fault):
    """Every 3-8 s one interval where a host port's queue spikes to the buffer limit and
    drops packets, while the port's average utilisation stays low."""

    cause = "microburst"
    kind = "interface"
    endpoint: int = 0
    bursts: list[float] = field(default_factory=list)

    def shape(self, tick: Tick) -> None:
        tick.rx_factor[self.endpoint] *= 0.7  # a lightly loaded host: < 30 % utilisation

    def apply(self, tick: Tick, loads: Loads) -> None:
        f, rng = self.fabric, tick.rng
        port = f.ports[int(f.host_port[self.endpoint])]
        for when in self.bursts:
            if not (tick.t0 < when <= tick.t):
                continue
            peak = rng.uniform(*self.pick((0.9, 1.0), (0.87, 0.96), (0.85, 0.92)))
            drops = rng.randint(*self.pick((50, 500), (20, 200), (5, 50)))
            tick.wm[port.index] = peak * tick.phys.buffer_bytes
            tick.sq_add(port.index, "dropped_packets", drops)
            tick.sq_add(port.index, "dropped_bytes", drops * tick.phys.mtu_bytes)
            tick.sp_add(port.index, "if_out_discards", drops)
            tick.nic_add(self.endpoint, "out_of_sequence", max(1, drops // 20))
            _, send = port_flows(f, loads, port.index)
            src = int(np.argmax(send)) if send.sum() > 0 else self.endpoint
            ingress = (f.endpoints[src].leaf_port if f.endpoints[src].leaf == port.leaf
                       else f.uplink_iface(rng.randrange(f.spec.spines)))
            tick.events.append(wjh_buffer_drop(
                port.device, ingress=ingress, egress=port.iface, t=when, drops=drops,
                occupancy=int(peak * tick.phys.buffer_bytes), sip=f.endpoints[src].ip,
                dip=f.endpoints[self.endpoint].ip, sport=rng.randint(49152, 65535)))

    def detail(self) -> dict:
        return {"bursts": self.bursts}


@dataclass
class NoisyNeighbor(Fault):
    """One job surges to line rate towards its hosts on other leaves: its leaves'
    uplinks and the spines' ports towards them saturate, with deep queues and ECN
    marks; other jobs crossing those links get CNPs and lose throughput. A job whose
    hosts share one leaf sends nothing across the fabric to itself: it surges by reading
    its storage at line rate instead, so the spines' ports down to its leaf and the
    storage leaves' uplinks saturate (a surge congesting links the job's traffic does not
    cross was a fault no telemetry could attribute)."""

    cause = "noisy_neighbor"
    kind = "job"

    def __post_init__(self) -> None:
        f = self.fabric
        self.job = next(j for j in self.jobs if j.job_id == self.entity)
        self.noisy_leaves = sorted({f.endpoints[h].leaf for h in self.job.hosts})
        # one leaf: it reads its storage on the other leaves (none there: it stays on its leaf)
        self.readers = len(self.noisy_leaves) == 1
        self.sources = [s for s in self.job.storage_eps(f) if f.endpoints[s].leaf not in self.noisy_leaves]
        self.source_leaves = sorted({f.endpoints[s].leaf for s in self.sources})
        self.victims = [h for j in self.jobs if j is not self.job for h in j.hosts
                        if f.endpoints[h].leaf in self.noisy_leaves and (self._spans(j) or self._reads_across(j))]

    def _reads_across(self, job) -> bool:
        """A reader's neighbour: another job reading storage over the same spine ports."""
        return self.readers and bool(set(job.storage_eps(self.fabric)) & set(self.sources))

    def _spans(self, job) -> bool:
        return len({self.fabric.endpoints[h].leaf for h in job.hosts}) > 1

    def shape(self, tick: Tick) -> None:
        if self.active(tick):
            lo, hi = self.pick((0.8, 0.9), (0.85, 0.93), (0.9, 0.97))
            for h in self.victims:
                tick.tx_factor[h] *= tick.rng.uniform(lo, hi)

    def demand(self, tick: Tick, d: np.ndarray) -> None:
        frac = self.frac(tick)
        if frac <= 0:
            return
        f = self.fabric
        level = tick.rng.uniform(*self.pick((0.95, 1.0), (0.85, 0.92), (0.75, 0.85)))
        if self.readers:
            if self.sources:
                d[np.ix_(self.sources, list(self.job.hosts))] += (
                    level * frac * f.spec.line_bytes / len(self.sources))
            return
        for h in self.job.hosts:
            far = [x for x in self.job.hosts if f.endpoints[x].leaf != f.endpoints[h].leaf]
            if far:
                d[h, far] += level * frac * f.spec.line_bytes / len(far)

    def saturated_ports(self, tick: Tick) -> list[int]:
        f, alive = self.fabric, tick.alive()
        if self.readers:
            return sorted({int(p) for s in range(f.spec.spines) for a in self.noisy_leaves for b in self.source_leaves
                           if alive[a, s] and alive[b, s] for p in (f.down_port[s, a], f.up_port[b, s])})
        return [int(p) for a in self.noisy_leaves for s in range(f.spec.spines) if alive[a, s]
                for p in (f.up_port[a, s], f.down_port[s, a])]

    def apply(self, tick: Tick, loads: Loads) -> None:
        frac = self.frac(tick)
        if frac <= 0:
            return
        rng = tick.rng
        for port in self.saturated_ports(tick):
            r_occ, r_marks = self.pick(((3, 10), (20e3, 100e3)), ((2, 5), (8e3, 40e3)),
                                       ((1, 3), (2e3, 10e3)))
            occ, marks = rng.uniform(*r_occ) * MIB, rng.uniform(*r_marks)
            congest(tick, loads, port, occupancy=occ, marks=marks * frac)

    def detail(self) -> dict:
        return {"victim_hosts": [self.fabric.endpoints[h].name for h in self.victims]}
