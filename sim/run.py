"""The tick loop: conditions -> demand -> routing -> physics -> symptoms -> records."""
from __future__ import annotations

import random
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .emit import Counters, Renderer, Writer
from .fabric import Fabric, Physics
from .faults import Fault
from .jobs import Job
from .physics import baseline
from .tick import Tick
from .traffic import Traffic


@dataclass
class Plan:
    """Everything one run needs, decided before the first tick."""

    scenario: str
    fabric: Fabric
    jobs: list[Job]
    faults: list[Fault]
    start: float
    duration: float
    messy: bool = False  # late, duplicate and batched records
    resets: list[tuple[float, int]] = field(default_factory=list)  # (time, switch port)
    benign: list[Fault] = field(default_factory=list)  # normal events, not in truth's faults
    physics: Physics = field(default_factory=Physics)


@dataclass
class RunStats:
    records: int
    late: int
    duplicates: int
    batches: int
    resets: list[dict]


def run(plan: Plan, *, seed: int, path: Path,
        progress: Callable[[int], None] | None = None) -> RunStats:
    f = plan.fabric
    dt = f.spec.interval_s
    salt = zlib.crc32(plan.scenario.encode())
    rng = random.Random(seed * 1_000_003 + salt)
    nrng = np.random.default_rng([seed, salt])
    counters = Counters(f, nrng)
    traffic = Traffic(f, plan.jobs)
    renderer = Renderer(f)
    resets: list[dict] = []
    ticks = int(round(plan.duration / dt))
    actors = plan.faults + plan.benign
    with open(path, "wb") as raw:
        writer = Writer(raw, messy=plan.messy, rng=random.Random(seed * 7 + salt),
                        progress=progress)
        for i in range(ticks):
            tick = Tick(f, i, plan.start + i * dt, dt, rng, nrng, plan.physics)
            for fault in actors:
                fault.shape(tick)
            demand = traffic.demand(tick)
            for fault in actors:
                fault.demand(tick, demand)
            loads = traffic.route(tick, demand)
            baseline(tick, loads)
            for fault in actors:
                fault.apply(tick, loads)
            tick.resets.update(p for when, p in plan.resets if tick.t0 < when <= tick.t)
            for p in sorted(tick.resets):
                resets.append({"interface": f.ports[p].id, "at": tick.t,
                               "series": ["switch_port", "switch_queue"]})
            renderer.stamp(tick)
            counters.advance(tick)
            writer.write(i, renderer.render(tick, counters))
        writer.close()
    return RunStats(writer.records, writer.late, writer.duplicates, writer.batches, resets)
