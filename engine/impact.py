"""Which running jobs a root cause touches (contract section 6), and how.

A job touches a root cause through its hosts, its traffic paths (every equal-cost
shortest path between its hosts and from its hosts to its storage) or its storage.
The engine cannot know the switches' ECMP hash, so any equal-cost path counts.
Path sets come from `Topology.job_links`, which caches per placement: this runs on
every incident update.
"""
from __future__ import annotations

from collections.abc import Iterable

from engine.jobs import job_sort_key
from engine.topology import Topology
from engine.types import HOST, INTERFACE, JOB, LINK, STORAGE, SWITCH, AffectedJob, Entity, Job, device_of


def affected_jobs(
    *,
    cause: str,
    entity: Entity,
    jobs: Iterable[Job],
    topology: Topology,
    storage_hosts: Iterable[str] | None = None,
) -> list[AffectedJob]:
    """The `jobs` (already those running at the time) that `entity` touches, sorted
    by job id. A job without its own storage list uses `storage_hosts` (default:
    every storage-role device). `cause` does not change the answer: the entity kind
    decides; it is taken so callers pass the whole root cause."""
    del cause
    jobs = list(jobs)
    every_storage = tuple(storage_hosts) if storage_hosts is not None else tuple(topology.devices("storage"))
    ctx = _Context(topology=topology, every_storage=every_storage)
    if entity.kind == JOB:
        found = _noisy_neighbour(entity.id, jobs=jobs, ctx=ctx)
    else:
        check = _CHECKS.get(entity.kind)
        if check is None:
            raise ValueError(f"affected_jobs: unknown entity kind {entity.kind!r}")
        found = [(job, impact) for job in jobs if (impact := check(entity.id, job, ctx)) is not None]
    result = [AffectedJob(job_id=job.job_id, tenant=job.tenant, impact=impact, hosts=job.hosts) for job, impact in found]
    return sorted(result, key=lambda a: job_sort_key(a.job_id))


class _Context:
    """The topology and the storage a job without its own list talks to."""

    def __init__(self, *, topology: Topology, every_storage: tuple[str, ...]) -> None:
        self.topology = topology
        self.every_storage = every_storage

    def storage_of(self, job: Job) -> tuple[str, ...]:
        return self.every_storage if job.storage is None else job.storage

    def links_of(self, job: Job) -> frozenset[str]:
        return self.topology.job_links(hosts=job.hosts, storage=self.storage_of(job))

    def devices_of(self, job: Job) -> frozenset[str]:
        return self.topology.job_devices(hosts=job.hosts, storage=self.storage_of(job))


def _by_link(link: str, job: Job, ctx: _Context) -> str | None:
    if link in ctx.links_of(job):
        return f"traffic crosses {link}"
    on_host = [device_of(end) for end in _ends(link, ctx) if device_of(end) in job.hosts]
    return f"runs on {on_host[0]}" if on_host else None


def _ends(link: str, ctx: _Context) -> tuple[str, ...]:
    try:
        return ctx.topology.link_ends(link)
    except KeyError:
        return tuple(link.split("--", 1)) if "--" in link else ()


def _by_interface(interface: str, job: Job, ctx: _Context) -> str | None:
    link = ctx.topology.link_of(interface)
    if link is not None and link in ctx.links_of(job):
        return f"traffic crosses {interface}"
    host = device_of(interface)
    return f"runs on {host}" if host in job.hosts else None


def _by_switch(switch: str, job: Job, ctx: _Context) -> str | None:
    if switch in ctx.devices_of(job):
        return f"traffic crosses {switch}"
    # a job with no path (one host, no storage) still hangs off its hosts' switches
    below = [h for h in job.hosts if h in ctx.topology.graph and switch in ctx.topology.graph[h]]
    return f"runs on {below[0]} behind {switch}" if below else None


def _by_host(host: str, job: Job, ctx: _Context) -> str | None:
    return f"runs on {host}" if host in job.hosts else None


def _by_storage(storage: str, job: Job, ctx: _Context) -> str | None:
    return f"reads/writes storage {storage}" if storage in ctx.storage_of(job) else None


_CHECKS = {LINK: _by_link, INTERFACE: _by_interface, SWITCH: _by_switch, HOST: _by_host, STORAGE: _by_storage}


def _noisy_neighbour(noisy_id: str, *, jobs: list[Job], ctx: _Context) -> list[tuple[Job, str]]:
    """The noisy job itself, and every job whose paths share a switch-to-switch link
    with its paths (host links are private to a host, so sharing one says nothing)."""
    noisy = next((j for j in jobs if j.job_id == noisy_id), None)
    if noisy is None:
        return []
    fabric = _switch_links(ctx.links_of(noisy), ctx.topology)
    found = [(noisy, "source of the traffic surge")]
    for job in jobs:
        if job.job_id == noisy_id:
            continue
        shared = sorted(fabric & ctx.links_of(job))
        if shared:
            more = f" (+{len(shared) - 1} more)" if len(shared) > 1 else ""
            found.append((job, f"shares {shared[0]} with job {noisy_id}{more}"))
    return found


def _switch_links(links: frozenset[str], topology: Topology) -> frozenset[str]:
    return frozenset(
        link for link in links if all(topology.is_switch(device_of(end)) for end in topology.link_ends(link))
    )
