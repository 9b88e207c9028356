"""Injected faults. Each fault is called on every tick in three steps:
shape (conditions before traffic), demand (extra traffic), apply (its symptoms).

Intensities: "strong" (loud, unmistakable symptoms), "medium" (between) and "weak" (still
plain to an operator who looks at the right counter, but near the level an alarm would
be set at). Gray faults (faults/gray.py) are quieter still, some with a gradual onset:
their signal rises from nothing over minutes."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from ..fabric import Fabric
from ..jobs import Job
from ..tick import NICF, SP, SQ, Tick
from ..traffic import Loads, port_flows

MIB = 1024 * 1024
INTENSITIES = ("strong", "medium", "weak")


@dataclass
class Fault:
    cause: ClassVar[str] = ""
    kind: ClassVar[str] = ""
    onset: ClassVar[str] = "abrupt"  # "abrupt": full strength at once; "gradual": ramps up
    gray: ClassVar[bool] = False  # a gray failure: low-level, below the usual alarms

    fabric: Fabric = field(repr=False)
    jobs: list[Job] = field(repr=False)
    entity: str
    start: float
    end: float
    intensity: str = "strong"

    @property
    def strong(self) -> bool:
        return self.intensity == "strong"

    def pick(self, strong, medium, weak):
        """The value for this fault's intensity."""
        return {"strong": strong, "medium": medium, "weak": weak}[self.intensity]

    def active(self, tick: Tick) -> bool:
        return tick.t0 < self.end and tick.t > self.start

    def frac(self, tick: Tick) -> float:
        return tick.within(self.start, self.end)

    def begins(self, tick: Tick) -> bool:
        return tick.t0 < self.start <= tick.t

    def ends(self, tick: Tick) -> bool:
        return tick.t0 < self.end <= tick.t

    def shape(self, tick: Tick) -> None:
        """Set conditions (rate factors, link and device state) before traffic."""

    def demand(self, tick: Tick, d: np.ndarray) -> None:
        """Add traffic of its own to the demand matrix (bytes/s)."""

    def apply(self, tick: Tick, loads: Loads) -> None:
        """Add its symptoms to the tick's deltas and gauges."""

    def detail(self) -> dict:
        """Extra facts for truth.json (victims, schedule)."""
        return {}

    def job_of(self, endpoint: int) -> Job | None:
        for job in self.jobs:
            if endpoint in job.hosts:
                return job
        return None


def endpoint_index(fabric: Fabric, name: str) -> int:
    """An endpoint from a host name or its NIC interface id (`gpu006:eth0`)."""
    host = name.split(":", 1)[0]
    if host not in fabric.by_name:
        raise ValueError(f"unknown host {name!r}")
    return fabric.by_name[host].index


def congest(tick: Tick, loads: Loads, port: int, *, occupancy: float, marks: float) -> None:
    """A congested egress queue: occupancy, ECN marks on the port and its queue, and the
    CNPs they cause: receivers count marked packets and send CNPs, senders handle them."""
    tick.occ[port] = occupancy
    tick.wm[port] = max(tick.wm[port], min(tick.phys.buffer_bytes, occupancy * tick.rng.uniform(1.05, 1.3)))
    tick.sp[port, SP["ecn_marked_packets"]] = marks  # replaces the normal-load estimate
    tick.sq[port, SQ["wred_ecn_marked_packets"]] = marks
    recv, send = port_flows(tick.fabric, loads, port)
    total = recv.sum()
    if total <= 0:
        return
    cnp = marks * tick.rng.uniform(0.85, 1.0)
    tick.nic[:, NICF["np_ecn_marked_roce_packets"]] += marks * recv / total
    tick.nic[:, NICF["np_cnp_sent"]] += cnp * recv / total
    tick.nic[:, NICF["rp_cnp_handled"]] += cnp * send / send.sum()
