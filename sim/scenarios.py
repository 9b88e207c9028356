"""The scenario table and the public entry points: simulate() and simulate_suite()."""
from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from .fabric import BASE_EPOCH, Fabric, FabricSpec
from .faults import Fault, endpoint_index
from .faults.hosts import NicDegraded, StorageSlow
from .faults.links import DeviceDown, LinkDegraded, LinkFlap
from .faults.queues import Congestion, Microburst, NoisyNeighbor, PfcStorm
from .jobs import Job, churn_job, default_jobs, placement_records
from .paths import affected_jobs
from .run import Plan, run

INTENSITIES = ("strong", "weak")


@dataclass
class Context:
    """What a scenario builder may use to place its faults."""

    fabric: Fabric
    rng: random.Random
    start: float
    scale: float  # < 1 when the run is shorter than the scenario's nominal duration
    intensity: str
    target: str | None

    def at(self, nominal_s: float) -> float:
        return round(self.start + nominal_s * self.scale, 3)

    def window(self, lo: float = 60.0, hi: float = 90.0) -> float:
        return round(self.rng.uniform(lo, hi) * self.scale, 3)

    def host(self, leaf: int, slot: int) -> int:
        """An endpoint by position (clamped to the fabric), unless a target is given."""
        if self.target:
            return resolve_endpoint(self.fabric, self.target)
        n = self.fabric.spec.leaves
        leaf = min(max(leaf if leaf >= 0 else n + leaf, 0), n - 1)
        hosts = self.fabric.hosts_on(leaf)
        return hosts[min(slot, len(hosts) - 1)]


def resolve_endpoint(fabric: Fabric, target: str) -> int:
    """A host from a host name, a NIC id, a leaf host-port id or a host link id."""
    for part in target.split("--"):
        if part in fabric.port_index:
            port = fabric.ports[fabric.port_index[part]]
            if port.role == "host":
                return port.endpoint
        elif part.split(":", 1)[0] in fabric.by_name:
            return endpoint_index(fabric, part)
    raise ValueError(f"{target!r} names no host, host port or host link")


def _fault(cls, ctx: Context, jobs, *, entity: str, start: float, end: float, **kw) -> Fault:
    return cls(ctx.fabric, jobs, entity, start, end, ctx.intensity, **kw)


# --- builders: (context, jobs, fault start) -> faults ----------------------------------------
def _link_flap(ctx: Context, jobs: list[Job], start: float) -> list[Fault]:
    e = ctx.host(1, 1)
    downs = LinkFlap.schedule(ctx.rng, start, ctx.window(), strong=ctx.intensity == "strong")
    return [_fault(LinkFlap, ctx, jobs, entity=ctx.fabric.host_link(e), start=downs[0][0],
                   end=downs[-1][1], endpoint=e, downs=downs)]


def _link_degraded(ctx: Context, jobs: list[Job], start: float,
        length: float | None = None) -> list[Fault]:
    f, leaf, spine = ctx.fabric, 0, 0
    if ctx.target:
        iface = ctx.target.split("--")[0]
        port = f.ports[f.port_index[iface]] if iface in f.port_index else None
        if port is None or port.role == "host":
            raise ValueError(f"{ctx.target!r} is not a leaf-spine link")
        leaf, spine = port.leaf, port.spine
    end = start + (length or ctx.window())
    return [_fault(LinkDegraded, ctx, jobs, entity=f.uplink(leaf, spine), start=start, end=end,
                   leaf=leaf, spine=spine)]


def _pfc_storm(ctx: Context, jobs: list[Job], start: float,
        length: float | None = None) -> list[Fault]:
    e = ctx.host(1, 1)
    end = start + (length or ctx.window())
    return [_fault(PfcStorm, ctx, jobs, entity=ctx.fabric.endpoints[e].nic_id, start=start,
                   end=end, endpoint=e)]


def _host_port(ctx: Context, e: int) -> str:
    return ctx.fabric.ports[int(ctx.fabric.host_port[e])].id


def _congestion(ctx: Context, jobs: list[Job], start: float) -> list[Fault]:
    e = ctx.host(-2, 1)
    return [_fault(Congestion, ctx, jobs, entity=_host_port(ctx, e), start=start,
                   end=start + ctx.window(), endpoint=e)]


def _microburst(ctx: Context, jobs: list[Job], start: float) -> list[Fault]:
    e, end = ctx.host(0, 2), start + ctx.window()
    bursts, t = [], start + ctx.rng.uniform(0.2, 2.0)
    while t < end:
        bursts.append(round(t, 3))
        t += ctx.rng.randint(3, 8) * max(ctx.scale, 0.5)
    return [_fault(Microburst, ctx, jobs, entity=_host_port(ctx, e), start=start, end=end,
                   endpoint=e, bursts=bursts)]


def _nic_degraded(ctx: Context, jobs: list[Job], start: float) -> list[Fault]:
    e = ctx.host(-1, 0)
    return [_fault(NicDegraded, ctx, jobs, entity=ctx.fabric.endpoints[e].nic_id, start=start,
                   end=start + ctx.window(), endpoint=e)]


def _storage_slow(ctx: Context, jobs: list[Job], start: float,
        length: float | None = None) -> list[Fault]:
    f = ctx.fabric
    if not f.storage:
        raise ValueError("storage_slow needs a fabric with storage hosts")
    name = (ctx.target or f.storage[0].name).split(":", 1)[0]
    if name not in {s.name for s in f.storage}:
        raise ValueError(f"{name!r} is not a storage host")
    e = f.by_name[name].index
    return [_fault(StorageSlow, ctx, jobs, entity=name, start=start,
                   end=start + (length or ctx.window()), endpoint=e)]


def _device_down(ctx: Context, jobs: list[Job], start: float) -> list[Fault]:
    name = ctx.target or ctx.fabric.spines[-1]
    if name not in ctx.fabric.switches:
        raise ValueError(f"unknown switch {name!r}")
    return [_fault(DeviceDown, ctx, jobs, entity=name, start=start, end=start + ctx.window())]


def _noisy_neighbor(ctx: Context, jobs: list[Job], start: float) -> list[Fault]:
    job = ctx.target or jobs[0].job_id
    if job not in {j.job_id for j in jobs}:
        raise ValueError(f"unknown job {job!r}; jobs: {', '.join(j.job_id for j in jobs)}")
    return [_fault(NoisyNeighbor, ctx, jobs, entity=job, start=start, end=start + ctx.window())]


def _demo(ctx: Context, jobs: list[Job], start: float) -> list[Fault]:
    length, plain = 60 * ctx.scale, replace(ctx, target=None)
    faults = (_pfc_storm(ctx, jobs, ctx.at(60), length)
              + _link_degraded(plain, jobs, ctx.at(200), length))
    if ctx.fabric.storage:
        faults += _storage_slow(plain, jobs, ctx.at(340), length)
    return faults


@dataclass(frozen=True)
class Scenario:
    build: Callable | None
    duration: float = 300.0
    shared: bool = False  # a placement where two jobs share uplinks


TABLE: dict[str, Scenario] = {
    "clean": Scenario(None, 900.0),
    "link_flap": Scenario(_link_flap),
    "link_degraded": Scenario(_link_degraded),
    "pfc_storm": Scenario(_pfc_storm),
    "congestion": Scenario(_congestion),
    "microburst": Scenario(_microburst),
    "nic_degraded": Scenario(_nic_degraded),
    "storage_slow": Scenario(_storage_slow),
    "device_down": Scenario(_device_down),
    "noisy_neighbor": Scenario(_noisy_neighbor, shared=True),
    "demo": Scenario(_demo, 480.0),
}
SCENARIOS: tuple[str, ...] = tuple(TABLE)
FAULT_START_S = 120.0


def _plan(name: str, ctx: Context, duration: float) -> Plan:
    sc = TABLE[name]
    jobs = default_jobs(ctx.fabric, ctx.start, shared=sc.shared)
    if name == "clean":
        return _clean_plan(ctx, jobs, duration)
    faults = sc.build(ctx, jobs, ctx.at(FAULT_START_S))
    return Plan(name, ctx.fabric, jobs, faults, ctx.start, duration)


def _clean_plan(ctx: Context, jobs: list[Job], duration: float) -> Plan:
    """No fault: job churn (the last job ends, a new one starts on its hosts), one
    counter reset of a leaf port, late, duplicate and batched records."""
    f = ctx.fabric
    ended = replace(jobs[-1], end=ctx.at(300))
    jobs = jobs[:-1] + [ended]
    jobs.append(churn_job(f, jobs, replaces=ended, start=ctx.at(330)))
    leaf = f.leaves[min(1, len(f.leaves) - 1)]
    port = f.port_index[f"{leaf}:swp{min(3, f.spec.hosts_per_leaf)}"]
    return Plan("clean", f, jobs, [], ctx.start, duration, messy=True,
                resets=[(ctx.at(450) + 0.5, port)])


def simulate(*, out: Path, scenario: str, seed: int = 1, fabric: FabricSpec | None = None,
             duration: float | None = None, progress: Callable[[int], None] | None = None,
             intensity: str = "strong", target: str | None = None) -> dict:
    """Write topology.dot, jobs.jsonl, telemetry.jsonl.gz and truth.json into `out`;
    return the truth. Same arguments, same bytes."""
    if scenario not in TABLE:
        raise ValueError(f"unknown scenario {scenario!r}; valid: {', '.join(SCENARIOS)}")
    if intensity not in INTENSITIES:
        raise ValueError(f"unknown intensity {intensity!r}; valid: {', '.join(INTENSITIES)}")
    spec = fabric or FabricSpec()
    fab = Fabric(spec)
    nominal = TABLE[scenario].duration
    dur = float(duration or nominal)
    if dur <= 0:
        raise ValueError("duration must be positive")
    start = BASE_EPOCH
    ctx = Context(fab, random.Random(f"{seed}:{scenario}:plan"), start, min(1.0, dur / nominal),
                  intensity, target)
    plan = _plan(scenario, ctx, dur)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "topology.dot").write_text(fab.to_dot())
    with open(out / "jobs.jsonl", "w") as fh:
        for rec in placement_records(fab, plan.jobs, start + dur):
            fh.write(json.dumps(rec, separators=(",", ":")) + "\n")
    stats = run(plan, seed=seed, path=out / "telemetry.jsonl.gz", progress=progress)
    truth = _truth(plan, seed=seed, intensity=intensity, stats=stats)
    (out / "truth.json").write_text(json.dumps(truth, indent=2) + "\n")
    return truth


def _truth(plan: Plan, *, seed: int, intensity: str, stats) -> dict:
    f = plan.fabric
    faults = [{
        "cause": x.cause,
        "entity": {"kind": x.kind, "id": x.entity},
        "start": x.start,
        "end": x.end,
        "intensity": x.intensity,
        "affected_jobs": affected_jobs(f, plan.jobs, cause=x.cause, kind=x.kind,
                                       entity=x.entity, start=x.start, end=x.end),
        "detail": x.detail(),
    } for x in plan.faults]
    return {
        "scenario": plan.scenario,
        "seed": seed,
        "start": plan.start,
        "end": plan.start + plan.duration,
        "duration_s": plan.duration,
        "clean": not plan.faults,
        "hosts": len(f.endpoints),
        "records": stats.records,
        "faults": faults,
        "intensity": intensity,
        "fabric": asdict(f.spec),
        "jobs": [{"job_id": j.job_id, "tenant": j.tenant,
                  "hosts": [f.endpoints[h].name for h in j.hosts],
                  "storage": [f.endpoints[s].name for s in j.storage_eps(f)],
                  "start": j.start, "end": j.end} for j in plan.jobs],
        "counter_resets": stats.resets,
        "late_records": stats.late,
        "duplicate_records": stats.duplicates,
        "batched_lines": stats.batches,
    }


def simulate_suite(*, out: Path, seed: int = 1) -> list[Path]:
    """Every scenario with default settings, one directory each under out/<name>/."""
    paths = []
    for name in SCENARIOS:
        path = Path(out) / name
        simulate(out=path, scenario=name, seed=seed)
        paths.append(path)
    return paths
