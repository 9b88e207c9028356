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
            cut = (0.3 if self.strong else 0.1) * frac
            tick.tx_factor[self.endpoint] *= 1 - cut
            tick.rx_factor[self.endpoint] *= 1 - cut

    def apply(self, tick: Tick, loads: Loads) -> None:
        frac = self.frac(tick)
        if frac <= 0:
            return
        rng, e = tick.rng, self.endpoint
        if self.strong:
            oob, disc, stall = rng.uniform(2e3, 20e3), rng.uniform(1e3, 10e3), (20, 60)
        else:
            oob, disc, stall = rng.uniform(100, 500), rng.uniform(20, 200), (8, 15)
        tick.nic_add(e, "rx_out_of_buffer", oob * frac)
        tick.nic_add(e, "out_of_buffer", oob * rng.uniform(0.95, 1.0) * frac)
        tick.nic_add(e, "rx_discards_phy", disc * frac)
        tick.nic_add(e, "tx_prio3_pause", rng.randint(0, 5) * frac)
        if self.start <= tick.t < self.end:
            tick.pci_rd[e] = rng.uniform(*stall)
            tick.pci_wr[e] = rng.uniform(*stall)


@dataclass
class StorageSlow(Fault):
    """A storage host's I/O latency rises (20-50 ms, weak 4-8 ms) and its operation
    rate drops, without any network cause."""

    cause = "storage_slow"
    kind = "storage"
    endpoint: int = 0

    def shape(self, tick: Tick) -> None:
        frac = self.frac(tick)
        if frac <= 0:
            return
        rng = tick.rng
        k = [s.index for s in self.fabric.storage].index(self.endpoint)
        if self.strong:
            rate, lat, depth = rng.uniform(0.5, 0.8), rng.uniform(20, 50), rng.uniform(5, 20)
        else:
            rate, lat, depth = rng.uniform(0.8, 0.95), rng.uniform(4, 8), rng.uniform(2, 5)
        rate = 1 - (1 - rate) * frac
        tick.tx_factor[self.endpoint] *= rate
        tick.rx_factor[self.endpoint] *= rate
        base = tick.stor_latency_ms[k]
        tick.stor_latency_ms[k] = base + (lat - base) * frac
        tick.stor_inflight_mult[k] = (1 + (depth - 1) * frac) / rate
