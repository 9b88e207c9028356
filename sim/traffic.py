"""Traffic: job demand between endpoints, routed over the leaf/spine fabric.

Demand is an endpoint-by-endpoint matrix D (bytes/s). Inter-leaf flows are split
evenly over the spines both leaves still reach (ECMP); flows crossing a link whose
demand exceeds line rate are scaled down (a crude congestion control), so no link
ever carries more than line rate.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .fabric import Fabric
from .jobs import Job
from .tick import Tick

STORAGE_WRITE = 0.01  # share of a host's rate written to its storage
STORAGE_READ = 0.015  # storage reads back, as a share of the host's rate
MAX_NORMAL_UPLINK = 0.75  # normal uplink utilisation allowed with one spine fewer
NOISE = 0.05


@dataclass
class Loads:
    D: np.ndarray  # routed endpoint-to-endpoint bytes/s
    nic_tx: np.ndarray
    nic_rx: np.ndarray
    up: np.ndarray  # [leaf, spine] bytes/s leaf -> spine
    dn: np.ndarray  # [spine, leaf] bytes/s spine -> leaf
    share: np.ndarray  # [leaf a, leaf b, spine] share of a->b flows over each spine
    port_out: np.ndarray  # per switch port egress bytes/s
    port_in: np.ndarray


class Traffic:
    def __init__(self, fabric: Fabric, jobs: list[Job]) -> None:
        self.fabric = fabric
        self.jobs = jobs
        e, s = len(fabric.endpoints), fabric.spec
        self.onehot = np.zeros((e, s.leaves))
        self.onehot[np.arange(e), fabric.leaf_of] = 1.0
        self._cache: dict[tuple[str, ...], tuple[np.ndarray, np.ndarray]] = {}
        self.scale = self._level_scale()

    # --- demand ------------------------------------------------------------------------
    def _matrices(self, running: list[Job]) -> tuple[np.ndarray, np.ndarray]:
        """Bh: host rows (share of the sender's rate per destination); Bs: storage rows
        (share of the reading host's rate), for the running jobs."""
        key = tuple(j.job_id for j in running)
        if key not in self._cache:
            e = len(self.fabric.endpoints)
            bh, bs = np.zeros((e, e)), np.zeros((e, e))
            for job in running:
                hosts = list(job.hosts)
                stor = list(job.storage_eps(self.fabric))
                peer = (1.0 - STORAGE_WRITE) / max(1, len(hosts) - 1)
                for h in hosts:
                    bh[h, hosts] = peer if len(hosts) > 1 else 0.0
                    bh[h, h] = 0.0
                    if stor:
                        bh[h, stor] += STORAGE_WRITE / len(stor)
                for st in stor:
                    bs[st, hosts] += STORAGE_READ / len(stor)
            self._cache[key] = (bh, bs)
        return self._cache[key]

    def _level_scale(self) -> float:
        """Scale all job levels so that normal uplink load stays below
        MAX_NORMAL_UPLINK even with one spine missing (no symptom on reroute)."""
        s = self.fabric.spec
        worst = 0.0
        for t in sorted({j.start for j in self.jobs}):
            running = [j for j in self.jobs if j.running(t)]
            bh, bs = self._matrices(running)
            r = np.zeros(len(self.fabric.endpoints))
            for j in running:
                r[list(j.hosts)] = j.level * (1 + NOISE)
            ll = self.onehot.T @ (r[:, None] * bh + bs * r[None, :]) @ self.onehot
            np.fill_diagonal(ll, 0.0)
            worst = max(worst, ll.sum(axis=1).max(), ll.sum(axis=0).max())
        spines = max(1, s.spines - 1)
        return min(1.0, MAX_NORMAL_UPLINK * spines / worst) if worst > 0 else 1.0

    def rates(self, tick: Tick) -> np.ndarray:
        """Per-endpoint send rate (fraction of line rate) of the running jobs."""
        r = np.zeros(len(self.fabric.endpoints))
        noise = tick.nrng.uniform(1 - NOISE, 1 + NOISE, len(r))
        for job in self.jobs:
            if job.running(tick.t):
                idx = list(job.hosts)
                r[idx] = job.level * self.scale * job.ramp(tick.t) * noise[idx]
        return r

    def demand(self, tick: Tick) -> np.ndarray:
        running = [j for j in self.jobs if j.running(tick.t)]
        bh, bs = self._matrices(running)
        r = self.rates(tick)
        d = r[:, None] * bh + bs * r[None, :]
        d *= tick.tx_factor[:, None]
        d *= tick.rx_factor[None, :]
        return d * self.fabric.spec.line_bytes

    # --- routing -----------------------------------------------------------------------
    def route(self, tick: Tick, demand: np.ndarray) -> Loads:
        f, line = self.fabric, self.fabric.spec.line_bytes
        lo = f.leaf_of
        conn = tick.link_frac * tick.leaf_up[lo]
        d = demand * conn[:, None] * conn[None, :]
        alive = tick.alive().astype(float)
        common = alive @ alive.T
        share = alive[:, None, :] * alive[None, :, :] / np.maximum(common, 1)[:, :, None]
        idx = np.arange(f.spec.leaves)
        share[idx, idx, :] = 0.0
        reach = (common > 0) | np.eye(f.spec.leaves, dtype=bool)
        d *= reach[lo][:, lo]
        for _ in range(12):
            loads = self._loads(d, share)
            f_tx = np.minimum(1.0, line / np.maximum(loads.nic_tx, 1.0))
            f_rx = np.minimum(1.0, line / np.maximum(loads.nic_rx, 1.0))
            f_up = np.minimum(1.0, line / np.maximum(loads.up, 1.0))
            f_dn = np.minimum(1.0, line / np.maximum(loads.dn, 1.0))
            path = np.minimum(f_up[:, None, :], f_dn.T[None, :, :])
            g = np.where(share > 0, path, np.inf).min(axis=2)
            g = np.where(np.isfinite(g), g, 1.0)
            if f_tx.min() > 0.999 and f_rx.min() > 0.999 and g.min() > 0.999:
                return loads
            # each flow slows down to its tightest bottleneck
            d *= np.minimum(np.minimum(f_tx[:, None], f_rx[None, :]), g[lo][:, lo])
        return self._loads(d, share)

    def _loads(self, d: np.ndarray, share: np.ndarray) -> Loads:
        f = self.fabric
        ll = self.onehot.T @ d @ self.onehot
        up = np.einsum("ab,abs->as", ll, share)
        dn = np.einsum("ab,abs->sb", ll, share)
        nic_tx, nic_rx = d.sum(axis=1), d.sum(axis=0)
        out, inp = np.zeros(len(f.ports)), np.zeros(len(f.ports))
        out[f.host_port], inp[f.host_port] = nic_rx, nic_tx
        out[f.up_port], inp[f.up_port] = up, dn.T
        out[f.down_port], inp[f.down_port] = dn, up.T
        return Loads(d, nic_tx, nic_rx, up, dn, share, out, inp)


def port_flows(fabric: Fabric, loads: Loads, port: int) -> tuple[np.ndarray, np.ndarray]:
    """Bytes/s leaving a switch port, by receiving and by sending endpoint."""
    p, lo, d = fabric.ports[port], fabric.leaf_of, loads.D
    if p.role == "host":
        recv = np.zeros(len(lo))
        recv[p.endpoint] = d[:, p.endpoint].sum()
        return recv, d[:, p.endpoint].copy()
    if p.role == "up":
        m = d * (lo == p.leaf)[:, None] * loads.share[p.leaf, lo, p.spine][None, :]
    else:
        m = d * (lo == p.leaf)[None, :] * loads.share[lo, p.leaf, p.spine][:, None]
    return m.sum(axis=0), m.sum(axis=1)
