"""Faults of end hosts: nic_degraded, storage_slow."""
from __future__ import annotations

from dataclasses import dataclass

from ..tick import Tick
from ..traffic import Loads
from . import Fault


@dataclass
class NicDegraded(Fault):
    """A NIC that drops and stalls on its own: out-of-buffer, discards, PCIe stalls,
    lower throughput; no pause storm, no link errors, the switch side stays clean."""

    cause = "nic_degraded"
    kind = "interface"
    endpoint: int = 0

    def shape(self, tick: Tick) -> None:
        frac = self.frac(tick)
        if frac > 0:
            cut = self.pick(0.3, 0.2, 0.1) * frac
            tick.tx_factor[self.endpoint] *= 1 - cut
            tick.rx_factor[self.endpoint] *= 1 - cut

    def apply(self, tick: Tick, loads: Loads) -> None:
        frac = self.frac(tick)
        if frac <= 0:
            return
        rng, e = tick.rng, self.endpoint
        oob_r, disc_r, stall = self.pick(((2e3, 20e3), (1e3, 10e3), (20, 60)),
                                         ((500, 3e3), (200, 1e3), (12, 30)),
                                         ((100, 500), (20, 200), (8, 15)))
        oob, disc = rng.uniform(*oob_r), rng.uniform(*disc_r)
        tick.nic_add(e, "rx_out_of_buffer", oob * frac)
        tick.nic_add(e, "out_of_buffer", oob * rng.uniform(0.95, 1.0) * frac)
        tick.nic_add(e, "rx_discards_phy", disc * frac)
        tick.nic_add(e, "tx_prio3_pause", rng.randint(0, 5) * frac)
        if self.start <= tick.t < self.end:
            tick.pci_rd[e] = rng.uniform(*stall)
            tick.pci_wr[e] = rng.uniform(*stall)


@dataclass
class StorageSlow(Fault):
    """A storage host's I/O latency rises (20-50 ms, medium 8-20 ms, weak 4-8 ms) and its
    operation rate drops, without any network cause."""

    cause = "storage_slow"
    kind = "storage"
    endpoint: int = 0

    def shape(self, tick: Tick) -> None:
        frac = self.frac(tick)
        if frac <= 0:
            return
        rng = tick.rng
        k = [s.index for s in self.fabric.storage].index(self.endpoint)
        r_rate, r_lat, r_depth = self.pick(((0.5, 0.8), (20, 50), (5, 20)),
                                           ((0.65, 0.9), (8, 20), (3, 10)),
                                           ((0.8, 0.95), (4, 8), (2, 5)))
        rate, lat, depth = rng.uniform(*r_rate), rng.uniform(*r_lat), rng.uniform(*r_depth)
        rate = 1 - (1 - rate) * frac
        tick.tx_factor[self.endpoint] *= rate
        tick.rx_factor[self.endpoint] *= rate
        base = tick.stor_latency_ms[k]
        tick.stor_latency_ms[k] = base + (lat - base) * frac
        tick.stor_inflight_mult[k] = (1 + (depth - 1) * frac) / rate
