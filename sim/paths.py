"""Which jobs a fault touches (contract section 6), from the generator's own placement.

A job's paths are all ECMP paths between its hosts and from its hosts to its storage:
its endpoints' host links, and, when a pair of them sits on different leaves, every
uplink of those leaves and every spine.
"""
from __future__ import annotations

from dataclasses import dataclass

from .fabric import Fabric, link_id
from .jobs import Job


@dataclass(frozen=True)
class JobPaths:
    links: frozenset[str]  # link ids on the job's paths
    fabric_links: frozenset[str]  # the switch-to-switch subset
    devices: frozenset[str]  # switches, hosts and storage hosts on them


def job_paths(fabric: Fabric, job: Job) -> JobPaths:
    hosts = list(job.hosts)
    storage = [s for s in job.storage_eps(fabric) if s not in job.hosts]
    pairs = [(a, b) for i, a in enumerate(hosts) for b in hosts[i + 1:]]
    pairs += [(h, s) for h in hosts for s in storage]
    used = set(hosts) | {s for _, s in pairs if s in storage}
    links = {fabric.host_link(e) for e in used}
    devices = {fabric.endpoints[e].name for e in used}
    devices |= {fabric.leaves[fabric.endpoints[e].leaf] for e in used}
    crossing = {fabric.endpoints[e].leaf for pair in pairs for e in pair
                if fabric.endpoints[pair[0]].leaf != fabric.endpoints[pair[1]].leaf}
    s2s = {fabric.uplink(leaf, sp) for leaf in crossing for sp in range(fabric.spec.spines)}
    if crossing:
        devices |= set(fabric.spines)
    return JobPaths(frozenset(links | s2s), frozenset(s2s), frozenset(devices))


def interface_link(fabric: Fabric, interface: str) -> str:
    """The link id of an interface id, whichever end it names."""
    for p in fabric.ports:
        if interface in (p.id, p.peer_id):
            return link_id(p.id, p.peer_id)
    raise ValueError(f"unknown interface {interface!r}")


def affected_jobs(fabric: Fabric, jobs: list[Job], *, cause: str, kind: str, entity: str,
                  start: float, end: float) -> list[str]:
    """Job ids (sorted) running in [start, end) whose paths touch the entity."""
    running = [j for j in jobs if j.overlaps(start, end)]
    paths = {j.job_id: job_paths(fabric, j) for j in running}
    if cause == "noisy_neighbor":
        noisy = paths.get(entity)
        if noisy is None:
            return []
        hit = [j for j, p in paths.items() if j == entity or p.fabric_links & noisy.fabric_links]
    elif kind == "link":
        hit = [j for j, p in paths.items() if entity in p.links]
    elif kind == "interface":
        link = interface_link(fabric, entity)
        hit = [j for j, p in paths.items() if link in p.links]
    elif kind in ("switch", "storage", "host"):
        hit = [j for j, p in paths.items() if entity in p.devices]
    else:
        raise ValueError(f"unknown entity kind {kind!r}")
    return sorted(hit)
