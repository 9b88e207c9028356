"""Benign events: normal operation that moves counters without being a fault. They run
through the same tick hooks as faults but are not in truth's fault list (truth lists
them under "benign"); nothing they do should raise an incident."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..tick import Tick
from . import Fault


@dataclass
class Benign(Fault):
    """A job-wide change of traffic between start and end."""

    job_id: str = ""

    def hosts(self) -> list[int]:
        return list(next(j for j in self.jobs if j.job_id == self.job_id).hosts)

    def describe(self) -> dict:
        return {"kind": self.kind, "job_id": self.job_id, "start": self.start, "end": self.end}


@dataclass
class CollectiveBurst(Benign):
    """An all-reduce phase: the job's hosts send 30 % more for a few seconds. Uplinks
    stay below 95 %, so no queue builds and nothing is marked."""

    kind = "collective_burst"
    factor: float = 1.3

    def shape(self, tick: Tick) -> None:
        frac = self.frac(tick)
        if frac > 0:
            tick.tx_factor[self.hosts()] *= 1 + (self.factor - 1) * frac


@dataclass
class CheckpointBurst(Benign):
    """A checkpoint: the job's hosts write to their storage, at most 30 % of line rate
    into one storage NIC in total; storage operations rise, latency does not."""

    kind = "checkpoint"
    share: float = 0.3  # of line rate, summed over the job's hosts

    def demand(self, tick: Tick, d: np.ndarray) -> None:
        frac = self.frac(tick)
        if frac <= 0:
            return
        job = next(j for j in self.jobs if j.job_id == self.job_id)
        hosts, stor = list(job.hosts), list(job.storage_eps(self.fabric))
        if not stor:
            return
        per = self.share * frac * self.fabric.spec.line_bytes / len(hosts) / len(stor)
        for s in stor:
            d[hosts, s] += per


@dataclass
class JobRampUp(Benign):
    """A job ramping up to high but unsaturated load (contract section 8): its hosts'
    mean send rate rises linearly over rise_s from its normal level to `peak` of line
    rate, holds until end, then falls back. No link it crosses (host links, leaf
    uplinks) goes past `ceiling` of line rate, so no queue builds and nothing is marked."""

    kind = "job_ramp_up"
    rise_s: float = 60.0
    peak: float = 0.8
    ceiling: float = 0.85

    def demand(self, tick: Tick, d: np.ndarray) -> None:
        if self.frac(tick) <= 0:
            return
        hosts, line = self.hosts(), self.fabric.spec.line_bytes
        mine = np.zeros_like(d)
        mine[hosts] = d[hosts]
        now = mine[hosts].sum(axis=1).mean() / line
        if now <= 0:
            return
        want = now + (self.peak - now) * min(1.0, max(0.0, tick.t - self.start) / self.rise_s)
        gain = min(want / now, self._room(tick, d - mine, mine))
        if gain > 1.0:
            d[hosts] *= gain

    def _room(self, tick: Tick, rest: np.ndarray, mine: np.ndarray) -> float:
        """The largest factor on the job's traffic that keeps every host link and leaf
        uplink (ECMP over the leaf's live spines) at or below the ceiling."""
        f = self.fabric
        onehot = np.eye(f.spec.leaves)[f.leaf_of]
        spines = np.maximum(tick.alive().sum(axis=1), 1)

        def links(x: np.ndarray) -> np.ndarray:
            ll = onehot.T @ x @ onehot
            np.fill_diagonal(ll, 0.0)
            return np.concatenate([x.sum(axis=1), x.sum(axis=0), ll.sum(axis=1) / spines,
                                   ll.sum(axis=0) / spines])

        job, other = links(mine), links(rest)
        used = job > 0
        cap = self.ceiling * f.spec.line_bytes
        return float(np.min((cap - other[used]) / job[used])) if used.any() else 1.0

    def describe(self) -> dict:
        return super().describe() | {"rise_s": self.rise_s, "peak": self.peak,
                                     "ceiling": self.ceiling}


@dataclass
class IdlePort(Benign):
    """An idle port (contract section 8): one host sends and receives nothing for a
    while (its job drained it), its link up; its peers' traffic to it stops too."""

    kind = "idle_port"
    endpoint: int = 0

    def shape(self, tick: Tick) -> None:
        if self.frac(tick) > 0:
            tick.tx_factor[self.endpoint] *= 1 - self.frac(tick)
            tick.rx_factor[self.endpoint] *= 1 - self.frac(tick)

    def describe(self) -> dict:
        return {"kind": self.kind, "host": self.fabric.endpoints[self.endpoint].name,
                "start": self.start, "end": self.end}


@dataclass(frozen=True)
class Scheduled:
    """A benign event the realism layer adds to a run (sim/split.py): `kind` is
    job_ramp_up or idle_port, from `at` s into the run for `length` s; `pick` chooses
    the job (among those running throughout) or the host, modulo their number."""

    kind: str
    at: float
    length: float
    pick: int
    rise_s: float = 60.0  # job_ramp_up only
    peak: float = 0.8
    ceiling: float = 0.85


def scheduled(fabric, jobs: list, start: float, events: tuple[Scheduled, ...]) -> list[Benign]:
    """The Benign actors of `events`; ValueError on an unknown kind."""
    out: list[Benign] = []
    for ev in events:
        t0, t1 = start + ev.at, start + ev.at + ev.length
        if ev.kind == "job_ramp_up":
            running = [j for j in jobs if j.running(t0) and j.running(t1) and len(j.hosts) > 1]
            if running:
                job = running[ev.pick % len(running)]
                out.append(JobRampUp(fabric, jobs, f"job:{job.job_id}", t0, t1, "strong",
                                     job_id=job.job_id, rise_s=ev.rise_s, peak=ev.peak,
                                     ceiling=ev.ceiling))
        elif ev.kind == "idle_port":
            host = fabric.hosts[ev.pick % len(fabric.hosts)]
            out.append(IdlePort(fabric, jobs, host.nic_id, t0, t1, "strong", endpoint=host.index))
        else:
            raise ValueError(f"unknown scheduled benign event {ev.kind!r}; valid: job_ramp_up, idle_port")
    return out
