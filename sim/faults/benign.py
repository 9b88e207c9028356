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
