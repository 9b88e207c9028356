"""`link_miswired` (an extension cause: docs/design.md "Extension causes"): the declared
topology against the cabling the devices report over LLDP.

`check_cabling` is pure: the declared `Topology` and the lldpctl survey's `TopologySpec`
(read by `engine.topology_load`, called from `compose.build_engine`) in, a
`CablingCheck` out: one `Miswiring` per declared link one of whose ends LLDP sees cabled
to something else (engine/topology_check.py's verdicts), with both topologies' view of it
as evidence, plus the counts of every verdict and a warning per missing and per extra
link. Missing and extra links open no incident: a declared link nobody sees may be a port
without lldpd, one down for work or a link down (which telemetry diagnoses: link_flap,
device_down), and a cable no file declares is a stale file, not a fault; the operator
reads them at start and in `fabric-rca topology check`.

`Cabling` holds the link_miswired incidents of one correlator. They are not correlated:
LLDP's word is direct evidence (score 1), so each opens at the first tick the correlator
applies (`opened_at` = `detected_at` = that event time: the engine's first knowledge of
the fabric, since the survey's own time is wall-clock and may postdate a recording),
names the declared link (contract section 4), lists the jobs whose ECMP paths cross it
or that run on one of its hosts (every job so affected while it is open: a job that ended
was still affected), and stays open while the engine runs with a survey showing it. A
restart whose survey no longer shows it (or without `--lldp`) resolves it at once. Its
id is a hash of the link and the cabling seen, so a replay, a restart or a second worker
writes the same incident.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from engine.impact import affected_jobs
from engine.incidents import Incident, IncidentState, SeverityPolicy, incident_id
from engine.jobs import job_sort_key
from engine.topology import Topology
from engine.topology_check import cross_check
from engine.topology_load import TopologySpec
from engine.topology_load.common import names
from engine.types import LINK, AffectedJob, Entity, Job, RootCause, Symptom, device_of

CAUSE = "link_miswired"
RULE = "lldp_cross_check"  # the symptom's rule: what saw it (no rule file holds it)


@dataclass(frozen=True)
class Miswiring:
    link: str  # the declared link's id
    device: str  # where the symptom lives: the declared link's switch end, else its first end
    observed: tuple[str, ...]  # the cables LLDP reports at its ends instead
    evidence: tuple[dict, ...]

    @property
    def key(self) -> str:
        return f"{CAUSE}@{self.link}@{'+'.join(self.observed)}"


@dataclass(frozen=True)
class CablingCheck:
    miswired: tuple[Miswiring, ...] = ()
    summary: dict[str, int] = field(default_factory=dict)  # verdict -> links (topology_check's summary)
    warnings: tuple[str, ...] = ()  # missing and extra links, for the operator


def check_cabling(declared: Topology, observed: TopologySpec, *, declared_source: str,
                  observed_source: str) -> CablingCheck:
    """The miswired links of `declared` in the `observed` survey (module docstring)."""
    report = cross_check(declared, observed)
    found = []
    for item in report["miswired"]:
        ends = declared.link_ends(item["link"])
        switch = [e for e in ends if declared.is_switch(device_of(e))]
        views = ({"view": "declared", "link": item["link"], "source": declared_source},
                 {"view": "lldp", "links": list(item["observed"]), "source": observed_source})
        found.append(Miswiring(link=item["link"], device=device_of((switch or list(ends))[0]),
                               observed=tuple(item["observed"]), evidence=views + tuple(item["ends"])))
    warnings = []
    if report["missing"]:
        warnings.append(f"{observed_source}: declared links LLDP does not see (no incident: "
                        f"`fabric-rca topology check` lists them): " + _names(m["link"] for m in report["missing"]))
    if report["extra"]:
        warnings.append(f"{observed_source}: cables no link of {declared_source} declares (no incident): "
                        + _names(e["link"] for e in report["extra"]))
    return CablingCheck(miswired=tuple(found), summary=dict(report["summary"]), warnings=tuple(warnings))


def _names(links) -> str:
    links = list(links)
    return f"{len(links)}: {names(links)}"


class Cabling:
    """The link_miswired incidents of one correlator (module docstring)."""

    def __init__(self, findings: tuple[Miswiring, ...] = ()) -> None:
        self.findings = {f.key: f for f in findings}
        self.open: dict[str, Incident] = {}  # finding key -> its incident
        self._jobs: frozenset[Job] | None = None  # the running jobs last looked at

    def advance(self, watermark: float, *, running: tuple[Job, ...], topology: Topology,
                severity: SeverityPolicy) -> tuple[list[Incident], int, int]:
        """Open, update and resolve at `watermark`: (the incidents changed, opened, resolved)."""
        if not self.findings and not self.open:
            return [], 0, 0
        gone = [self.open.pop(k) for k in [k for k in self.open if k not in self.findings]]
        for inc in gone:
            inc.status, inc.resolved_at, inc.updated_at = "resolved", watermark, watermark
            for s in inc.symptoms.values():
                s.end = s.last = watermark
        fresh = [_incident(f, watermark) for key, f in self.findings.items() if key not in self.open]
        self.open.update((next(iter(inc.symptoms)), inc) for inc in fresh)
        jobs = frozenset(running)
        look = self.open.values() if jobs != self._jobs else fresh  # (jobs change far less often than ticks)
        self._jobs = jobs
        born = {id(inc) for inc in fresh}
        updated = [inc for inc in look if _impact(inc, running, topology, severity, watermark) and id(inc) not in born]
        return gone + fresh + updated, len(fresh), len(gone)

    def snapshot(self) -> list[IncidentState]:
        return [inc.snapshot() for inc in self.open.values()]

    def restore(self, incidents: list[Incident]) -> None:
        """Continue with the open incidents of a checkpoint; those the findings no longer
        hold resolve at the next `advance`."""
        self.open = {next(iter(inc.symptoms)): inc for inc in incidents}
        self._jobs = None


def _incident(f: Miswiring, now: float) -> Incident:
    entity = Entity(LINK, f.link)
    symptom = Symptom(key=f.key, kind="lldp_neighbour_mismatch", family="cabling", entity=entity, device=f.device,
                      start=now, last=now, severity=1.0, rule=RULE)
    return Incident(id=incident_id(f.key), opened_at=now, updated_at=now, symptoms={f.key: symptom},
                    detected_at=now, root_causes=[RootCause(rank=1, cause=CAUSE, entity=entity, score=1.0,
                                                            evidence=f.evidence)],
                    received_at=now, can_open=True, credible=True, onset=now, dirty=False)


def _impact(inc: Incident, running: tuple[Job, ...], topology: Topology, severity: SeverityPolicy,
            now: float) -> bool:
    """Add the running jobs the link touches to those it did, and grade it; True when
    that changed the incident."""
    top = inc.root_causes[0]
    touched = affected_jobs(cause=top.cause, entity=top.entity, jobs=running, topology=topology)
    known = {j.job_id for j in inc.affected_jobs}
    new = [j for j in touched if j.job_id not in known]
    if new:
        inc.affected_jobs = _sorted(inc.affected_jobs + new)
    now_affected = {j.job_id for j in touched}
    hosts = {h for j in running if j.job_id in now_affected for h in j.hosts}
    hosts |= {device_of(e) for e in topology.link_ends(top.entity.id) if topology.role(device_of(e)) == "host"}
    inc.hosts_affected = max(inc.hosts_affected, len(hosts))
    grade = severity.grade(jobs=len(inc.affected_jobs), hosts=inc.hosts_affected)
    if not new and grade == inc.severity:
        return False
    inc.severity, inc.updated_at = grade, now
    for s in inc.symptoms.values():
        s.last = now
    return True


def _sorted(jobs: list[AffectedJob]) -> list[AffectedJob]:
    return sorted(jobs, key=lambda a: job_sort_key(a.job_id))
