"""The scenario table and the public entry point simulate(); the suite is in suite.py.

Scenario groups: the classic ones (one fault each, `clean` and `demo`: SCENARIOS), gray
failures (GRAY_SCENARIOS), concurrent independent faults (`concurrent2`, `concurrent3`)
and a one-hour clean run (`clean_1h`). ALL_SCENARIOS names them all.
"""
from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from .fabric import BASE_EPOCH, Fabric, FabricSpec, Physics
from .faults import INTENSITIES, Fault, endpoint_index
from .faults.benign import CheckpointBurst, CollectiveBurst, Scheduled, scheduled
from .faults.gray import FecCreep, PcieStall, PfcStormLow, StorageDrift
from .faults.hosts import NicDegraded, StorageSlow
from .faults.links import DeviceDown, LinkDegraded, LinkFlap
from .faults.queues import Congestion, Microburst, NoisyNeighbor, PfcStorm
from .jobs import Job, churn_job, default_jobs, placement_records
from .paths import affected_jobs
from .run import Plan, run



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
        return self.host_at(leaf, slot)

    def host_at(self, leaf: int, slot: int) -> int:
        """An endpoint by position, clamped to the fabric; a negative leaf counts from
        the last."""
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
def _link_flap(ctx: Context, jobs: list[Job], start: float,
        length: float | None = None) -> list[Fault]:
    e = ctx.host(1, 1)
    downs = LinkFlap.schedule(ctx.rng, start, length or ctx.window(), intensity=ctx.intensity)
    return [_fault(LinkFlap, ctx, jobs, entity=ctx.fabric.host_link(e), start=downs[0][0],
                   end=downs[-1][1], endpoint=e, downs=downs)]


def _uplink(ctx: Context, leaf: int = 0, spine: int = 0) -> tuple[int, int]:
    """(leaf, spine) of the target leaf-spine link (a link id or either interface id),
    else of the given position (negative: from the last)."""
    f = ctx.fabric
    if ctx.target:
        iface = ctx.target.split("--")[0]
        port = f.ports[f.port_index[iface]] if iface in f.port_index else None
        if port is None or port.role == "host":
            raise ValueError(f"{ctx.target!r} is not a leaf-spine link")
        return port.leaf, port.spine
    n, m = f.spec.leaves, f.spec.spines
    return min(leaf % n, n - 1), min(spine % m, m - 1)


def _link_degraded(ctx: Context, jobs: list[Job], start: float,
        length: float | None = None) -> list[Fault]:
    f = ctx.fabric
    leaf, spine = _uplink(ctx)
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


def _congestion(ctx: Context, jobs: list[Job], start: float,
        length: float | None = None) -> list[Fault]:
    e = ctx.host(-2, 1)
    return [_fault(Congestion, ctx, jobs, entity=_host_port(ctx, e), start=start,
                   end=start + (length or ctx.window()), endpoint=e)]


def _microburst(ctx: Context, jobs: list[Job], start: float,
        length: float | None = None) -> list[Fault]:
    e, end = ctx.host(0, 2), start + (length or ctx.window())
    bursts, t = [], start + ctx.rng.uniform(0.2, 2.0)
    while t < end:
        bursts.append(round(t, 3))
        t += ctx.rng.randint(3, 8) * max(ctx.scale, 0.5)
    return [_fault(Microburst, ctx, jobs, entity=_host_port(ctx, e), start=start, end=end,
                   endpoint=e, bursts=bursts)]


def _nic_degraded(ctx: Context, jobs: list[Job], start: float,
        length: float | None = None) -> list[Fault]:
    e = ctx.host(-1, 0)
    return [_fault(NicDegraded, ctx, jobs, entity=ctx.fabric.endpoints[e].nic_id, start=start,
                   end=start + (length or ctx.window()), endpoint=e)]


def _storage_host(ctx: Context, default: int = 0) -> tuple[str, int]:
    """(name, endpoint) of the target storage host, else storage[default]."""
    f = ctx.fabric
    if not f.storage:
        raise ValueError("this scenario needs a fabric with storage hosts")
    name = (ctx.target or f.storage[default].name).split(":", 1)[0]
    if name not in {s.name for s in f.storage}:
        raise ValueError(f"{name!r} is not a storage host")
    return name, f.by_name[name].index


def _storage_slow(ctx: Context, jobs: list[Job], start: float,
        length: float | None = None) -> list[Fault]:
    name, e = _storage_host(ctx)
    return [_fault(StorageSlow, ctx, jobs, entity=name, start=start,
                   end=start + (length or ctx.window()), endpoint=e)]


def _device_down(ctx: Context, jobs: list[Job], start: float,
        length: float | None = None) -> list[Fault]:
    """A switch is down or not: intensity changes only how long (medium: a quick
    reload of 20-40 s; strong and weak: 60-90 s)."""
    name = ctx.target or ctx.fabric.spines[-1]
    if name not in ctx.fabric.switches:
        raise ValueError(f"unknown switch {name!r}")
    if length is None:
        length = ctx.window(20.0, 40.0) if ctx.intensity == "medium" else ctx.window()
    return [_fault(DeviceDown, ctx, jobs, entity=name, start=start, end=start + length)]


def _noisy_neighbor(ctx: Context, jobs: list[Job], start: float,
        length: float | None = None) -> list[Fault]:
    job = ctx.target or jobs[0].job_id
    if job not in {j.job_id for j in jobs}:
        raise ValueError(f"unknown job {job!r}; jobs: {', '.join(j.job_id for j in jobs)}")
    return [_fault(NoisyNeighbor, ctx, jobs, entity=job, start=start,
                   end=start + (length or ctx.window()))]


# --- gray failures: start at 120 s, ramp for 300 s, plateau for 120 s (nominal 600 s) -----
GRAY_RAMP_S, GRAY_LENGTH_S = 300.0, 420.0


def _gray_times(ctx: Context, start: float) -> dict:
    return {"start": start, "end": round(start + GRAY_LENGTH_S * ctx.scale, 3)}


def _fec_creep(ctx: Context, jobs: list[Job], start: float) -> list[Fault]:
    leaf, spine = _uplink(ctx, 1, -1)
    return [_fault(FecCreep, ctx, jobs, entity=ctx.fabric.uplink(leaf, spine),
                   **_gray_times(ctx, start), ramp_s=GRAY_RAMP_S * ctx.scale,
                   leaf=leaf, spine=spine)]


def _pcie_stall(ctx: Context, jobs: list[Job], start: float) -> list[Fault]:
    e = ctx.host(2, 2)
    return [_fault(PcieStall, ctx, jobs, entity=ctx.fabric.endpoints[e].nic_id,
                   **_gray_times(ctx, start), ramp_s=GRAY_RAMP_S * ctx.scale, endpoint=e)]


def _storage_drift(ctx: Context, jobs: list[Job], start: float) -> list[Fault]:
    name, e = _storage_host(ctx, -1)
    return [_fault(StorageDrift, ctx, jobs, entity=name, **_gray_times(ctx, start),
                   ramp_s=GRAY_RAMP_S * ctx.scale, endpoint=e)]


def _pfc_storm_low(ctx: Context, jobs: list[Job], start: float) -> list[Fault]:
    e = ctx.host(0, 3)
    return [_fault(PfcStormLow, ctx, jobs, entity=ctx.fabric.endpoints[e].nic_id,
                   **_gray_times(ctx, start), endpoint=e)]


# --- concurrent independent faults, far apart, overlapping in time --------------------------
def _placed(ctx: Context, target: str) -> Context:
    return replace(ctx, target=target)


def _concurrent2(ctx: Context, jobs: list[Job], start: float) -> list[Fault]:
    """A degraded uplink of the first leaf (120-270 s) and a degraded NIC on the
    second-last leaf (180-330 s)."""
    if ctx.target:
        raise ValueError("concurrent scenarios place their own faults; no target")
    f, length = ctx.fabric, 150.0 * ctx.scale
    nic = f.endpoints[ctx.host_at(-2, 0)].name
    return (_link_degraded(_placed(ctx, f.uplink(0, 0)), jobs, ctx.at(120), length)
            + _nic_degraded(_placed(ctx, nic), jobs, ctx.at(180), length))


def _concurrent3(ctx: Context, jobs: list[Job], start: float) -> list[Fault]:
    """A pause storm from a host of the first leaf (120-300 s), incast congestion at a
    host of the second-last leaf (150-300 s) and the last storage host slowing down
    (180-330 s)."""
    if ctx.target:
        raise ValueError("concurrent scenarios place their own faults; no target")
    f = ctx.fabric
    if not f.storage:
        raise ValueError("concurrent3 needs a fabric with storage hosts")
    storm, incast = (f.endpoints[ctx.host_at(0, 1)].name, f.endpoints[ctx.host_at(-2, 1)].name)
    return (_pfc_storm(_placed(ctx, storm), jobs, ctx.at(120), 180.0 * ctx.scale)
            + _congestion(_placed(ctx, incast), jobs, ctx.at(150), 150.0 * ctx.scale)
            + _storage_slow(_placed(ctx, f.storage[-1].name), jobs, ctx.at(180),
                            150.0 * ctx.scale))


def _demo(ctx: Context, jobs: list[Job], start: float) -> list[Fault]:
    length, plain = 60 * ctx.scale, replace(ctx, target=None)
    faults = (_pfc_storm(ctx, jobs, ctx.at(60), length)
              + _link_degraded(plain, jobs, ctx.at(200), length))
    if ctx.fabric.storage:
        faults += _storage_slow(plain, jobs, ctx.at(340), length)
    return faults


@dataclass(frozen=True)
class Scenario:
    build: Callable | None  # (context, jobs, fault start) -> faults
    duration: float = 300.0
    shared: bool = False  # a placement where two jobs share uplinks
    causes: tuple[str, ...] = ()  # contract causes of its faults, in order
    plan: Callable | None = None  # (context, jobs, duration) -> Plan, instead of build


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


def _clean_1h_plan(ctx: Context, jobs: list[Job], duration: float) -> Plan:
    """An hour without a fault: three jobs end and three start on their hosts (ramping
    up over 10 s), five counter resets (single ports and every port of one spine, as
    `sonic-clear counters` does), all-reduce bursts and checkpoints, late, duplicate and
    batched records; the normal watermark bursts of every port come from the physics."""
    f, at, jobs = ctx.fabric, ctx.at, list(jobs)

    def churn(k: int, end: float, start: float) -> int:
        """Job k ends at `end`, a new job starts on its hosts at `start`: its index."""
        ended = replace(jobs[k], end=at(end))
        jobs[k] = ended
        jobs.append(churn_job(f, jobs, replaces=ended, start=at(start)))
        return len(jobs) - 1

    n = len(jobs)
    a = churn(n - 1, 600, 630)  # the last job
    b = churn(n - 2, 1500, 1530) if n >= 3 else None  # the one before (never the first)
    c = churn(a, 2400, 2430)  # the first replacement ends too
    first, late = jobs[0].job_id, jobs[c if b is None else b].job_id  # late: runs at 2600

    def burst(cls, job: str, start: float, length: float):
        return cls(f, jobs, f"job:{job}", at(start), at(start + length), "strong", job_id=job)

    benign = [burst(CollectiveBurst, first, 800, 20), burst(CheckpointBurst, first, 1000, 40),
              burst(CollectiveBurst, first, 1900, 30), burst(CheckpointBurst, first, 2200, 30),
              burst(CheckpointBurst, late, 2600, 30), burst(CollectiveBurst, late, 2700, 20),
              burst(CollectiveBurst, first, 3000, 15)]
    spines, last = f.spines, f.spec.leaves - 1
    leaf_port = f"{f.leaves[min(1, last)]}:swp{min(3, f.spec.hosts_per_leaf)}"
    resets = [(at(450) + 0.5, f.port_index[leaf_port]),
              (at(1200) + 0.5, f.port_index[f"{spines[0]}:swp{min(2, f.spec.leaves)}"]),
              (at(2000) + 0.5, int(f.up_port[min(2, last), 0])),
              (at(3300) + 0.5, int(f.host_port[f.hosts_on(last)[0]]))]
    resets += [(at(2700) + 0.5, p) for p in f.ports_of(spines[-1])]
    return Plan("clean_1h", f, jobs, [], ctx.start, duration, messy=True,
                resets=sorted(resets), benign=benign)


TABLE: dict[str, Scenario] = {
    "clean": Scenario(None, 900.0, plan=_clean_plan),
    "link_flap": Scenario(_link_flap, causes=("link_flap",)),
    "link_degraded": Scenario(_link_degraded, causes=("link_degraded",)),
    "pfc_storm": Scenario(_pfc_storm, causes=("pfc_storm",)),
    "congestion": Scenario(_congestion, causes=("congestion",)),
    "microburst": Scenario(_microburst, causes=("microburst",)),
    "nic_degraded": Scenario(_nic_degraded, causes=("nic_degraded",)),
    "storage_slow": Scenario(_storage_slow, causes=("storage_slow",)),
    "device_down": Scenario(_device_down, causes=("device_down",)),
    "noisy_neighbor": Scenario(_noisy_neighbor, shared=True, causes=("noisy_neighbor",)),
    "demo": Scenario(_demo, 480.0, causes=("pfc_storm", "link_degraded", "storage_slow")),
    # gray failures
    "fec_creep": Scenario(_fec_creep, 600.0, causes=("link_degraded",)),
    "pcie_stall": Scenario(_pcie_stall, 600.0, causes=("nic_degraded",)),
    "storage_drift": Scenario(_storage_drift, 600.0, causes=("storage_slow",)),
    "pfc_storm_low": Scenario(_pfc_storm_low, 600.0, causes=("pfc_storm",)),
    # concurrent independent faults
    "concurrent2": Scenario(_concurrent2, 420.0, causes=("link_degraded", "nic_degraded")),
    "concurrent3": Scenario(_concurrent3, 480.0,
                            causes=("pfc_storm", "congestion", "storage_slow")),
    "clean_1h": Scenario(None, 3600.0, plan=_clean_1h_plan),
}
# The classic scenarios: one fault each at a fixed placement, plus clean and demo.
SCENARIOS: tuple[str, ...] = ("clean", "link_flap", "link_degraded", "pfc_storm", "congestion",
                              "microburst", "nic_degraded", "storage_slow", "device_down",
                              "noisy_neighbor", "demo")
GRAY_SCENARIOS: tuple[str, ...] = ("fec_creep", "pcie_stall", "storage_drift", "pfc_storm_low")
ALL_SCENARIOS: tuple[str, ...] = tuple(TABLE)
FAULT_START_S = 120.0


def _plan(name: str, ctx: Context, duration: float) -> Plan:
    sc = TABLE[name]
    jobs = default_jobs(ctx.fabric, ctx.start, shared=sc.shared)
    if sc.plan is not None:
        return sc.plan(ctx, jobs, duration)
    faults = sc.build(ctx, jobs, ctx.at(FAULT_START_S))
    return Plan(name, ctx.fabric, jobs, faults, ctx.start, duration)


def _with(plan: Plan, physics: Physics | None, benign: tuple[Scheduled, ...]) -> Plan:
    """The realism layer's additions (sim/split.py): physics constants, benign events."""
    plan.physics = physics or plan.physics
    plan.benign += scheduled(plan.fabric, plan.jobs, plan.start, benign)
    return plan


def make_plan(scenario: str, *, seed: int = 1, fabric: FabricSpec | None = None,
              duration: float | None = None, intensity: str = "strong",
              target: str | None = None, physics: Physics | None = None,
              benign: tuple[Scheduled, ...] = ()) -> Plan:
    """Decide a run (fabric, jobs, faults, times) without simulating it; ValueError on
    an unknown scenario or intensity, or a target the scenario cannot take."""
    if scenario not in TABLE:
        raise ValueError(f"unknown scenario {scenario!r}; valid: {', '.join(ALL_SCENARIOS)}")
    if intensity not in INTENSITIES:
        raise ValueError(f"unknown intensity {intensity!r}; valid: {', '.join(INTENSITIES)}")
    fab = Fabric(fabric or FabricSpec())
    nominal = TABLE[scenario].duration
    dur = float(duration or nominal)
    if dur <= 0:
        raise ValueError("duration must be positive")
    ctx = Context(fab, random.Random(f"{seed}:{scenario}:plan"), BASE_EPOCH,
                  min(1.0, dur / nominal), intensity, target)
    return _with(_plan(scenario, ctx, dur), physics, benign)


def simulate(*, out: Path, scenario: str, seed: int = 1, fabric: FabricSpec | None = None,
             duration: float | None = None, progress: Callable[[int], None] | None = None,
             intensity: str = "strong", target: str | None = None,
             label: str | None = None, physics: Physics | None = None,
             benign: tuple[Scheduled, ...] = ()) -> dict:
    """Write topology.dot, jobs.jsonl, telemetry.jsonl.gz and truth.json into `out`;
    return the truth. Same arguments, same bytes. `label` is the name truth gives the
    run ("scenario"; default: the scenario's name, which "base_scenario" always holds)."""
    plan = make_plan(scenario, seed=seed, fabric=fabric, duration=duration, intensity=intensity,
                     target=target, physics=physics, benign=benign)
    fab, start, dur = plan.fabric, plan.start, plan.duration
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "topology.dot").write_text(fab.to_dot())
    with open(out / "jobs.jsonl", "w") as fh:
        for rec in placement_records(fab, plan.jobs, start + dur):
            fh.write(json.dumps(rec, separators=(",", ":")) + "\n")
    stats = run(plan, seed=seed, path=out / "telemetry.jsonl.gz", progress=progress)
    truth = _truth(plan, seed=seed, intensity=intensity, stats=stats, label=label or scenario,
                   target=target)
    (out / "truth.json").write_text(json.dumps(truth, indent=2) + "\n")
    return truth


def _truth(plan: Plan, *, seed: int, intensity: str, stats, label: str,
           target: str | None) -> dict:
    f = plan.fabric
    faults = [{
        "cause": x.cause,
        "entity": {"kind": x.kind, "id": x.entity},
        "start": x.start,
        "end": x.end,
        "intensity": x.intensity,
        "onset": x.onset,
        "gray": x.gray,
        "affected_jobs": affected_jobs(f, plan.jobs, cause=x.cause, kind=x.kind,
                                       entity=x.entity, start=x.start, end=x.end),
        "detail": x.detail(),
    } for x in plan.faults]
    truth = {
        "scenario": label,
        "base_scenario": plan.scenario,
        "seed": seed,
        "start": plan.start,
        "end": plan.start + plan.duration,
        "duration_s": plan.duration,
        "clean": not plan.faults,
        "hosts": len(f.endpoints),
        "records": stats.records,
        "faults": faults,
        "intensity": intensity,
        "target": target,
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
    if plan.benign:
        truth["benign"] = [b.describe() for b in plan.benign]
    if plan.physics != Physics():
        truth["physics"] = asdict(plan.physics)
    return truth
