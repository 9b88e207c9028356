"""Job placement: which hosts and storage each job uses, and its Slurm snapshots."""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

from .fabric import Fabric

FIRST_JOB_ID = 4242
TENANTS = ("acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "wonka",
           "tyrell", "cyberdyne", "soylent", "vandelay", "oscorp", "aperture")
USERS = ("alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan",
         "judy", "mallory", "niaj", "olivia", "peggy")
# Per-job traffic level (fraction of line rate each host sends), cycled by job index.
LEVELS = (0.32, 0.42, 0.38, 0.36, 0.40, 0.34)
PRE_RUN_S = 3600.0  # jobs already running at the start began this long before


@dataclass(frozen=True)
class Job:
    job_id: str
    tenant: str
    user: str
    hosts: tuple[int, ...]  # endpoint indices
    storage: tuple[int, ...]  # explicit storage endpoints; () = all storage hosts
    level: float  # per-host send rate as a fraction of line rate
    start: float  # epoch s
    end: float | None = None  # epoch s, None: beyond the run
    ramp_s: float = 0.0  # seconds to reach full rate after start

    def storage_eps(self, fabric: Fabric) -> tuple[int, ...]:
        return self.storage or tuple(e.index for e in fabric.storage)

    def running(self, t: float) -> bool:
        return self.start <= t and (self.end is None or t < self.end)

    def overlaps(self, start: float, end: float) -> bool:
        return self.start < end and (self.end is None or self.end > start)

    def ramp(self, t: float) -> float:
        if self.ramp_s <= 0:
            return 1.0
        return min(1.0, max(0.0, (t - self.start) / self.ramp_s))


def _job(k: int, hosts: list[int], storage: tuple[int, ...], start: float) -> Job:
    return Job(str(FIRST_JOB_ID + k), TENANTS[k % len(TENANTS)], USERS[k % len(USERS)],
               tuple(hosts), storage, LEVELS[k % len(LEVELS)], start - PRE_RUN_S * (k + 1))


def default_jobs(fabric: Fabric, start: float, *, shared: bool = False) -> list[Job]:
    """Jobs of two leaves each; the last two leaves hold a storage job (the second-last
    leaf plus half of the last, stor01) and a small job (the rest, stor02).

    With shared=True the first leaf pair is split between the first job and an extra
    job (its id follows the churn job's), so the two share uplinks: noisy_neighbor. The
    first job takes every other host of each leaf (the first, the third, ...): a rails
    fabric renames a leaf's k-th host to the k-th host's NIC on that rail
    (sim/shapes.py), so the first half of three hosts per leaf was one rail host, a
    "job" whose traffic ran between its own NICs (that goes over NVLink on a real host).
    """
    s = fabric.spec
    stor = [e.index for e in fabric.storage]
    groups: list[tuple[list[int], tuple[int, ...]]] = []
    for a in range(0, s.leaves - 2, 2):
        leaves = [a] if a + 1 >= s.leaves - 2 else [a, a + 1]
        groups.append(([h for lf in leaves for h in fabric.hosts_on(lf)], ()))
    last = fabric.hosts_on(s.leaves - 1)
    half = max(1, len(last) // 2)
    groups.append((fabric.hosts_on(s.leaves - 2) + last[:half], tuple(stor[:1])))
    if last[half:]:
        groups.append((last[half:], tuple(stor[1:2] or stor[:1])))
    jobs = [_job(k, hosts, storage, start) for k, (hosts, storage) in enumerate(groups)]
    if shared:
        first = jobs[0]
        by_leaf: dict[int, list[int]] = {}
        for h in first.hosts:
            by_leaf.setdefault(fabric.endpoints[h].leaf, []).append(h)
        mine = [h for hs in by_leaf.values() for h in hs[::2]]
        other = [h for h in first.hosts if h not in mine]
        jobs[0] = replace(first, hosts=tuple(mine))
        jobs.append(replace(_job(len(jobs) + 1, other, (), start), start=first.start + 600))
    return jobs


def churn_job(fabric: Fabric, jobs: list[Job], *, replaces: Job, start: float) -> Job:
    """A new job on the hosts of one that ended (clean scenario), ramping over 10 s."""
    k = len(jobs)
    return Job(str(FIRST_JOB_ID + k), TENANTS[k % len(TENANTS)], USERS[k % len(USERS)],
               replaces.hosts, replaces.storage, LEVELS[k % len(LEVELS)], start, None, 10.0)


def hostlist(names: list[str]) -> str:
    """Compressed Slurm hostlist: gpu001..gpu004, gpu009 -> `gpu[001-004,009]`."""
    groups: dict[tuple[str, int], list[int]] = {}
    order: list[tuple[str, int]] = []
    plain: list[str] = []
    for name in names:
        m = re.fullmatch(r"(.*?)(\d+)", name)
        if not m:
            plain.append(name)
            continue
        key = (m.group(1), len(m.group(2)))
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(int(m.group(2)))
    parts: list[str] = []
    for prefix, width in order:
        nums = sorted(set(groups[(prefix, width)]))
        ranges: list[str] = []
        lo = prev = nums[0]
        for n in nums[1:] + [None]:
            if n is not None and n == prev + 1:
                prev = n
                continue
            ranges.append(f"{lo:0{width}d}" if lo == prev else f"{lo:0{width}d}-{prev:0{width}d}")
            if n is not None:
                lo = prev = n
        if len(nums) == 1:
            parts.append(f"{prefix}{ranges[0]}")
        else:
            parts.append(f"{prefix}[{','.join(ranges)}]")
    return ",".join(parts + plain)


def placement_records(fabric: Fabric, jobs: list[Job], run_end: float) -> list[dict]:
    """job_placement snapshots: RUNNING at each job's start, COMPLETED at its end if it
    ends within the run; sorted by event time."""
    records = []
    for job in jobs:
        fields = {
            "job_id": job.job_id,
            "account": job.tenant,
            "user": job.user,
            "job_state": "RUNNING",
            "nodes": hostlist([fabric.endpoints[h].name for h in job.hosts]),
        }
        if job.storage:
            fields["storage"] = ",".join(fabric.endpoints[s].name for s in job.storage)
        fields["start_time"] = int(job.start)
        records.append(_placement(fields, job.start))
        if job.end is not None and job.end <= run_end:
            done = dict(fields, job_state="COMPLETED", end_time=int(job.end))
            records.append(_placement(done, job.end))
    records.sort(key=lambda r: (r["timestamp"], r["fields"]["job_id"]))
    return records


def _placement(fields: dict, ts: float) -> dict:
    return {"name": "job_placement", "tags": {"scheduler": "slurm", "cluster": "c1"},
            "fields": fields, "timestamp": int(ts)}
