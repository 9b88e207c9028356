"""Noisy neighbour by attribution (contract section 8): whose traffic fills the congested
shared links?

A job's hosts need not be saturated one by one: with oversubscribed uplinks, many hosts
at 60-80 % of line rate fill them. So each congested switch-to-switch link's load is
split over the running jobs whose hosts send across it: a job's load there is the sum of
its hosts' NIC transmit utilisation (from the busy NICs the detector reports), each
host's counted for the share of its traffic to the job's other hosts whose shortest
paths leave through the congested port (its egress), and a job sends across a link when
the link lies on the ECMP paths between its hosts (every equal-cost path: the engine
cannot know the switches' hash). A job whose share of
a congested shared link is dominant, on a link that another running job also crosses (a
neighbour to hurt), is the noisy neighbour there.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from engine.topology import Topology
from engine.types import Job, Symptom, device_of


@dataclass(frozen=True)
class Attribution:
    job_id: str
    share: float  # its smallest dominant share over the links it dominates
    links: tuple[str, ...]  # the congested shared links it dominates
    start: float  # when the congestion on those links began

    def metrics(self) -> dict[str, float]:
        """What a job's surge symptom carries of it."""
        return {"share": self.share, "shared_links": float(len(self.links))}


def host_load(nics: Iterable[Symptom], field: str = "util_tx") -> dict[str, float]:
    """Per host, the sum of its NICs' utilisation `field` (util_tx: transmit, util_rx:
    receive; the peak of each NIC's symptom)."""
    out: dict[str, float] = {}
    for s in nics:
        out[s.device] = out.get(s.device, 0.0) + float(s.metrics.get(field, 0.0))
    return out


def shared_link(topology: Topology, interface: str) -> str | None:
    """The switch-to-switch link of `interface`, or None (a host link, or unknown)."""
    link = topology.link_of(interface)
    if link is None:
        return None
    ends = topology.link_ends(link)
    return link if all(topology.is_switch(device_of(x)) for x in ends) else None


def dominant_jobs(*, congested: Iterable[Symptom], load: dict[str, float], jobs: Iterable[Job],
                  topology: Topology, share: float = 0.6, min_hosts: int = 2,
                  load_in: dict[str, float] | None = None) -> dict[str, Attribution]:
    """The jobs that dominate at least one congested shared link, by job id. Congestion is
    a port's egress, so a job's load there is what its hosts send through that port
    (`Topology.egress_shares`): a job spread over many leaves does not fill one leaf's
    uplinks with the traffic of its hosts elsewhere. The port is read from its receiving
    end too (`load_in`: per host, its NICs' receive utilisation): what a job's hosts
    receive through it from the job's other hosts and its storage
    (`Topology.ingress_shares`), so that a job reading its storage hard is seen on the
    spines' ports down to its leaves though its own hosts send little. A job dominant in
    either reading is dominant there."""
    by_port: dict[str, tuple[str, float]] = {}  # congested egress interface -> (its link, start)
    for s in congested:
        link = shared_link(topology, s.entity.id)
        if link is not None:
            seen = by_port.get(s.entity.id)
            by_port[s.entity.id] = (link, min(seen[1], s.start) if seen else s.start)
    if not by_port:
        return {}
    jobs = list(jobs)
    every_storage = tuple(topology.devices("storage"))
    storage_of = {j.job_id: every_storage if j.storage is None else tuple(j.storage) for j in jobs}
    # What a job sends between its hosts loads the link; its paths to storage also make
    # it a tenant of the link (a neighbour the noisy job can hurt).
    sends = {j.job_id: topology.job_links(hosts=j.hosts, storage=()) for j in jobs}
    paths = {j.job_id: topology.job_links(hosts=j.hosts, storage=storage_of[j.job_id]) for j in jobs}

    def egress(j: Job, port: str) -> dict[str, float]:
        return topology.egress_shares(hosts=j.hosts, interface=port)

    def ingress(j: Job, port: str) -> dict[str, float]:
        return topology.ingress_shares(hosts=j.hosts, storage=storage_of[j.job_id], interface=port)

    views = [(load, sends, egress)]
    if load_in:
        views.append((load_in, paths, ingress))
    found: dict[str, list[tuple[str, float, float]]] = {}
    for port, (link, start) in sorted(by_port.items()):
        for host_load_, carries, shares in views:
            hit = _dominant(port, link, jobs, host_load_, carries, paths, shares, share, min_hosts)
            if hit is not None:
                found.setdefault(hit[0], []).append((link, hit[1], start))
                break
    return {j: Attribution(j, round(min(p for _, p, _ in xs), 3), tuple(sorted({x for x, _, _ in xs})),
                           min(t for _, _, t in xs)) for j, xs in found.items()}


def _dominant(port: str, link: str, jobs: list[Job], load: dict[str, float], carries: dict, paths: dict,
              shares, share: float, min_hosts: int) -> tuple[str, float] | None:
    """The job dominating congested `port` in one reading of its load (host loads `load`,
    the jobs whose traffic `carries` over the link, each host's share through the port by
    `shares`), and its part, or None."""
    crossing = [j for j in jobs if link in carries[j.job_id]]
    if not crossing:
        return None
    by_job = {j.job_id: shares(j, port) for j in crossing}
    loads = {j: sum(load.get(h, 0.0) * x for h, x in sh.items()) for j, sh in by_job.items()}
    # What the busy hosts carry through the port, each host counted once: a NIC carries
    # its bytes once however many jobs are placed on its host (pods of several tenants on
    # one node). A host in several crossing jobs counts with its largest share.
    most: dict[str, float] = {}
    for sh in by_job.values():
        for h, x in sh.items():
            most[h] = max(most.get(h, 0.0), x)
    total = sum(load.get(h, 0.0) * x for h, x in most.items())
    if total <= 0:
        return None
    busy = {j.job_id: sum(1 for h in j.hosts if load.get(h, 0.0) > 0) for j in crossing}
    # Jobs placed on the same busy hosts carry the same load: the one whose hosts are
    # all busy explains it without idle hosts (the others' idle hosts carry nothing).
    spread = {j.job_id: busy[j.job_id] / max(1, len(set(j.hosts))) for j in crossing}
    top = max(loads, key=lambda j: (round(loads[j], 9), spread[j], j))
    if not any(link in paths[j.job_id] for j in jobs if j.job_id != top):
        return None  # nobody else on the link: a busy job, not a noisy neighbour
    part = loads[top] / total
    if part >= share and busy[top] >= min_hosts:
        return top, part
    return None


def harmed(job: Job, *, congested: Iterable[Symptom], jobs: Iterable[Job], topology: Topology) -> float | None:
    """When `job` began to hurt a neighbour, if it does: the earliest start of the
    congested switch-to-switch links it sends across that another running job also
    crosses (contract section 8); None when there is none. A job whose hosts are busy,
    even near line rate, while no link it shares is congested is a job at high load,
    which drops nothing: a ramp-up, healthy but unusual, not a noisy neighbour."""
    starts: dict[str, float] = {}
    for s in congested:
        link = shared_link(topology, s.entity.id)
        if link is not None:
            starts[link] = min(starts.get(link, s.start), s.start)
    mine = starts.keys() & topology.job_links(hosts=job.hosts, storage=()) if starts else set()
    if not mine:
        return None
    every_storage = tuple(topology.devices("storage"))
    hurt: set[str] = set()
    for other in jobs:
        if other.job_id != job.job_id:
            storage = every_storage if other.storage is None else other.storage
            hurt |= mine & topology.job_links(hosts=other.hosts, storage=storage)
    return min((starts[link] for link in hurt), default=None)
