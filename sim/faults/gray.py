"""Gray failures: faults that stay below the usual alarms. Most start from nothing and
rise slowly (onset "gradual"); the low-intensity pause storm starts at once but stays low.

Each follows the physics of its loud counterpart (errors on both ends of a link, pause
spreading up the tree, latency with Little's law for the queue depth), at a fraction of
its level. Intensity scales the level reached: strong 1, medium about 0.6, weak about 0.35
(storage: 3x, 2.5x and 2x the normal latency).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..tick import Tick
from ..traffic import Loads, port_flows
from . import Fault
from .queues import PfcStorm, StormLevel


@dataclass
class Gradual(Fault):
    """A fault whose level ramps linearly from 0 at `start` to its peak at
    `start + ramp_s` and stays there until `end`."""

    onset = "gradual"
    gray = True
    ramp_s: float = 300.0

    def level(self, tick: Tick) -> float:
        """0..1: the ramp at the sample time, times the share of the interval inside."""
        frac = self.frac(tick)
        if frac <= 0:
            return 0.0
        return frac * min(1.0, max(0.0, (tick.t - self.start) / max(self.ramp_s, 1e-9)))

    def detail(self) -> dict:
        return {"ramp_s": self.ramp_s, "peak_at": round(self.start + self.ramp_s, 3)}


@dataclass
class FecCreep(Gradual):
    """An optic ageing on a leaf-spine link: corrected FEC frames and symbol errors rise
    from nothing to a few hundred per second on both ends (normal: 0-20 and 0-50), with a
    rare uncorrectable frame (a CRC error, one retransmission) near the top. Throughput
    does not change."""

    cause = "link_degraded"
    kind = "link"
    leaf: int = 0
    spine: int = 0

    CORRECTED = 450.0  # corrected frames/s at the peak (strong)
    SYMBOLS = 750.0  # symbol errors/s at the peak (strong)
    LOST = 0.25  # chance per second and end of an uncorrectable frame at the peak

    def apply(self, tick: Tick, loads: Loads) -> None:
        lvl = self.level(tick) * self.pick(1.0, 0.6, 0.35)
        if lvl <= 0:
            return
        f, rng = self.fabric, tick.rng
        ends = ((int(f.up_port[self.leaf, self.spine]), int(f.down_port[self.spine, self.leaf])),
                (int(f.down_port[self.spine, self.leaf]), int(f.up_port[self.leaf, self.spine])))
        for port, peer in ends:
            tick.sp_add(port, "if_in_fec_correctable_frames",
                        self.CORRECTED * lvl * rng.uniform(0.8, 1.2))
            tick.sp_add(port, "if_in_fec_symbol_errors", self.SYMBOLS * lvl * rng.uniform(0.8, 1.2))
            if rng.random() < self.LOST * lvl * lvl:
                tick.sp_add(port, "if_in_fec_not_correctable_frames", 1)
                tick.sp_add(port, "if_in_errors", 1)
                self._retransmit(tick, loads, peer)

    def _retransmit(self, tick: Tick, loads: Loads, peer: int) -> None:
        """One frame the peer sent was lost: its receiver sees a gap, its sender resends."""
        recv, send = port_flows(self.fabric, loads, peer)
        for counts, name in ((recv, "out_of_sequence"), (send, "packet_seq_err")):
            total = counts.sum()
            if total <= 0:
                continue
            x, acc = tick.rng.random() * total, 0.0
            for e, v in enumerate(counts.tolist()):
                acc += v
                if v > 0 and acc >= x:
                    tick.nic_add(e, name, 1)
                    break

    def detail(self) -> dict:
        peak = self.CORRECTED * self.pick(1.0, 0.6, 0.35)
        return super().detail() | {"peak_corrected_per_s": peak}


@dataclass
class PcieStall(Gradual):
    """A NIC whose PCIe writes and reads to host memory stall more and more (a failing
    riser, a throttled root port): outbound PCIe stall gauges rise from the normal 0-2 %
    by up to 2.5 points, the NIC sends a few pause frames to keep its buffer from
    overflowing (so no out-of-buffer and no discards), and its throughput dips by up to
    6 %."""

    cause = "nic_degraded"
    kind = "interface"
    endpoint: int = 0

    STALL = 2.5  # stall percentage points added at the peak (strong)
    CUT = 0.06  # throughput lost at the peak (strong)

    def scale(self) -> float:
        return self.pick(1.0, 0.7, 0.45)

    def shape(self, tick: Tick) -> None:
        lvl = self.level(tick) * self.scale()
        if lvl > 0:
            tick.tx_factor[self.endpoint] *= 1 - self.CUT * lvl
            tick.rx_factor[self.endpoint] *= 1 - self.CUT * lvl

    def apply(self, tick: Tick, loads: Loads) -> None:
        lvl = self.level(tick) * self.scale()
        if lvl <= 0:
            return
        rng, e, f = tick.rng, self.endpoint, self.fabric
        tick.pci_rd[e] += self.STALL * lvl * rng.uniform(0.85, 1.15)
        tick.pci_wr[e] += self.STALL * lvl * rng.uniform(0.85, 1.15)
        pause = rng.uniform(0.0, 4.0) * lvl
        dur = pause * rng.uniform(20, 60)  # a few tens of us each
        tick.nic_add(e, "tx_prio3_pause", pause)
        tick.nic_add(e, "tx_prio3_pause_duration", dur)
        port = int(f.host_port[e])  # the leaf port receives that pause
        tick.sp_add(port, "pfc_3_rx_pkts", pause)
        tick.sp_add(port, "pfc_3_rx_pause_duration_us", dur)

    def detail(self) -> dict:
        return super().detail() | {"peak_stall_points": self.STALL * self.scale()}


@dataclass
class StorageDrift(Gradual):
    """A storage host's I/O latency drifts up from its normal 0.3-0.8 ms to 3x (medium
    2.5x, weak 2x) over minutes (a rebuilding array, a filling SSD); the in-flight queue
    grows with it and the operation rate sags by up to 5 %."""

    cause = "storage_slow"
    kind = "storage"
    endpoint: int = 0

    def peak(self) -> float:
        return self.pick(3.0, 2.5, 2.0)

    def shape(self, tick: Tick) -> None:
        lvl = self.level(tick)
        if lvl <= 0:
            return
        k = [s.index for s in self.fabric.storage].index(self.endpoint)
        factor = 1 + (self.peak() - 1) * lvl
        rate = 1 - 0.05 * lvl
        tick.tx_factor[self.endpoint] *= rate
        tick.rx_factor[self.endpoint] *= rate
        tick.stor_latency_ms[k] *= factor
        tick.stor_inflight_mult[k] = factor

    def detail(self) -> dict:
        return super().detail() | {"peak_latency_factor": self.peak()}


LOW_STORM_LEVELS = {
    "strong": StormLevel((0.92, 0.98), (20, 45), 30_000, (0.4, 1.0), (0.1, 0.5), False, False),
    "medium": StormLevel((0.94, 0.99), (12, 27), 18_000, (0.3, 0.8), (0.1, 0.4), False, False),
    "weak": StormLevel((0.96, 0.99), (7, 16), 10_000, (0.2, 0.6), (0.1, 0.3), False, False),
}


@dataclass
class PfcStormLow(PfcStorm):
    """A pause storm of low intensity: the NIC sends 20-45 pause frames a second (3 % of
    the time paused; weak 7-16) from the start, the pause tree spreads as in a loud storm
    at a third of that, queues stay shallow, no storm events, no watchdog."""

    gray = True
    levels = LOW_STORM_LEVELS
