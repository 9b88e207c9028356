"""Stage 4: correlate symptoms into incidents over the topology, then rank and publish.

A new symptom joins the open incident whose leading cause explains it, or one whose
symptoms are close to it in time and in the graph; otherwise it founds a new incident.
An incident is published once it holds a symptom that may open an incident and has
settled for `settle_s` of event time, and resolves after its symptoms have been quiet for
`resolve_after_s`. Everything runs on event time passed in by `advance`.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable

import msgspec

from engine.attribution import Attribution, dominant_jobs, harmed, host_load, shared_link
from engine.cabling import Cabling
from engine.credible import STEADY, Persistence
from engine.events import JobWire, SymptomWire, symptom_from_wire, symptom_to_wire
from engine.impact import affected_jobs
from engine.incidents import Incident, IncidentState, SeverityPolicy, incident_id
from engine.jobs import JobBook
from engine.maintenance import ADMIN_DOWN_FAMILY, admin_down_reason, window_reason
from engine.ports import MaintenanceSource
from engine.rank import CONGESTION_KINDS, PAUSED_KINDS, SATURATED, Context, explain, hypotheses, pressed, rank
from engine.reopen import Recent
from engine.topology import Topology
from engine.types import Entity, Job, Symptom

SURGE_RULE = "job_traffic_surge"
RX_BUSY = "nic_rx_busy"  # a NIC's receive load (rules/catalogue: nic_rx_busy), beside nic_tx_busy
SPREADING = ("congestion", "pfc_storm")  # causes whose effects travel hop by hop


@dataclass(frozen=True)
class CorrelationConfig:
    window_s: float = 30.0  # a symptom joins an incident active this recently
    hops: int = 2  # ... whose symptoms are this close in the device graph
    settle_s: float = 1.0  # wait this long for related symptoms before publishing (2 s bought nothing on the tune split)
    resolve_after_s: float = 60.0  # quiet time after which an incident resolves
    reopen_s: float = 300.0  # a resolved incident's cause back on its entity this soon reopens it (engine/reopen.py)
    min_score: float = 0.15  # publish only when the leading cause scores at least this
    surge_fraction: float = 0.5  # share of a job's hosts saturating that makes a job surge
    dominant_share: float = 0.6  # share of a congested shared link's load that makes its job the noisy one
    surge_refresh_s: float = 5.0  # a live job surge is sent again this often (its evidence grows)
    # A job whose hosts saturated this long before the shared link they congest: a steady
    # load the fabric changed under, dated from the congestion (`_job_surges`)
    steady_s: float = 30.0
    persistence: Persistence = Persistence()  # when a candidate's evidence makes a fault (engine/credible.py)
    severity: SeverityPolicy = SeverityPolicy()


class BookEntry(JobWire):
    seen: float | None  # event time of the snapshot held, when known


class CorrelatorState(msgspec.Struct, frozen=True, omit_defaults=True):
    """The correlator's state (a checkpoint); topology, rules and config come from the
    worker's files. The job book is `JobBook.to_dict`'s form."""

    watermark: float
    open: list[IncidentState]
    home: dict[str, str]  # symptom key -> incident id
    saturated: dict[str, SymptomWire]
    surges: dict[str, SymptomWire]
    opened: int
    resolved: int
    jobs: list[BookEntry]
    changes: list[dict[str, Any]]  # incident changes not yet drained (contract JSON)
    admin_down: dict[str, SymptomWire] = {}  # interface -> its admin-down symptom (added in 0.2)
    busy: dict[str, SymptomWire] = msgspec.field(default_factory=dict)
    busy_rx: dict[str, SymptomWire] = msgspec.field(default_factory=dict)  # (absent in checkpoints before it: none)
    shared: dict[str, SymptomWire] = msgspec.field(default_factory=dict)
    cabling: list[IncidentState] = msgspec.field(default_factory=list)  # open link_miswired incidents
    recent: list[IncidentState] = msgspec.field(default_factory=list)  # resolved, may reopen (none before it)
    reopened: int = 0
    # The last attribution (`Correlator._attribution`): [[[congestion key, last], ...],
    # [[job id, share, [link, ...], start], ...]]; [] before one.
    attributed: list = msgspec.field(default_factory=list)


@dataclass
class Correlator:
    topology: Topology
    jobs: JobBook
    opens_incident: Callable[[str], bool]  # rule id -> may this symptom open an incident?
    config: CorrelationConfig = CorrelationConfig()
    watermark: float = float("-inf")
    open: dict[str, Incident] = field(default_factory=dict)
    home: dict[str, str] = field(default_factory=dict)  # symptom key -> incident id
    saturated: dict[str, Symptom] = field(default_factory=dict)  # host -> nic_tx_saturated
    surges: dict[str, Symptom] = field(default_factory=dict)  # job id -> surge symptom
    busy: dict[str, Symptom] = field(default_factory=dict)  # NIC -> nic_tx_busy (load, for attribution)
    busy_rx: dict[str, Symptom] = field(default_factory=dict)  # NIC -> nic_rx_busy (likewise, received)
    shared: dict[str, Symptom] = field(default_factory=dict)  # key -> congestion on a switch-to-switch link
    opened: int = 0
    resolved: int = 0
    maintenance: MaintenanceSource | None = None  # the windows in force (data, read by an adapter)
    admin_down: dict[str, Symptom] = field(default_factory=dict)  # interface -> admin-down symptom
    cabling: Cabling = field(default_factory=Cabling)  # link_miswired from LLDP (engine/cabling.py): not correlated
    recent: Recent = field(default_factory=Recent)  # resolved incidents that may reopen (engine/reopen.py)
    reopened: int = 0
    attributed: tuple = ()  # (the congestion evidence it was taken on, its dominant jobs): `_attribution`
    _changes: list[dict] = field(default_factory=list)

    # --- input -----------------------------------------------------------------------
    def add(self, symptom: Symptom) -> None:
        """A symptom started or ended (the same key again means an update)."""
        s = symptom.snapshot()
        if s.family == ADMIN_DOWN_FAMILY:  # an operator's doing: marks incidents, joins none
            if (s.end is None) != (s.entity.id in self.admin_down):
                self._recheck(s.entity.id)  # a candidate on that link is judged again (engine/credible.py)
            if s.end is None:
                self.admin_down[s.entity.id] = s
            else:
                self.admin_down.pop(s.entity.id, None)
            return
        if s.kind == SATURATED:
            if s.end is None:
                self.saturated[s.device] = s
            elif self.saturated.get(s.device, s).key == s.key:
                self.saturated.pop(s.device, None)
        if s.family == "load":  # a NIC's transmit or receive load: bookkeeping for attribution only
            busy = self.busy_rx if s.kind == RX_BUSY else self.busy
            if s.end is None:
                busy[s.entity.id] = s
            elif busy.get(s.entity.id, s).key == s.key:
                busy.pop(s.entity.id, None)
            return
        evidence = self.config.persistence.evidence_only  # the models' evidence congests no link
        if (s.kind in CONGESTION_KINDS and shared_link(self.topology, s.entity.id) is not None
                and not (evidence is not None and evidence(s.rule))):
            if s.end is None:
                self.shared[s.key] = s
            else:
                self.shared.pop(s.key, None)
        owner = self.home.get(s.key)
        if owner is not None:
            inc = self.open.get(owner)
            if inc is not None:
                inc.symptoms[s.key] = s
                inc.dirty = True
            return
        inc = self._place(s)
        if inc is None:
            inc = Incident(id=incident_id(s.key), opened_at=s.start, updated_at=s.start, received_at=self.watermark)
            self.open[inc.id] = inc
        inc.symptoms[s.key] = s
        inc.opened_at = min(inc.opened_at, s.start)
        inc.dirty = True
        self.home[s.key] = inc.id
        if not inc.can_open and self.opens_incident(s.rule):
            inc.can_open = True
            inc.received_at = self.watermark

    def _place(self, s: Symptom) -> Incident | None:
        best: tuple[float, float, Incident] | None = None
        ctx = self._context()
        for inc in self.open.values():
            # An incident with a symptom still active is active now, whatever its
            # symptoms' last update says (they are sent at start and end only).
            active = self.watermark if not inc.quiet else inc.last_activity
            if inc.status != "open" or s.start > active + self.config.window_s:
                continue
            strength, fit = 0.0, 0.0
            if inc.root_causes:
                top = inc.root_causes[0]
                e = explain(top.cause, top.entity, s, ctx)
                strength = e if e >= 0.5 else 0.0
            if strength == 0.0 and self._near(inc, s):
                fit = self._may_share(inc, s, ctx)
                strength = 0.4 if fit is not None else 0.0
            # Nearness ties go to the incident the symptom's own cause explains best
            # (a job surge joins the congestion of its links, not a stale candidate beside).
            key = (strength, fit or 0.0, -inc.opened_at)
            if strength and (best is None or key > best[0]):
                best = (key, inc)
        return best[1] if best else None

    @staticmethod
    def _may_share(inc: Incident, s: Symptom, ctx: Context) -> float | None:
        """Nearness alone may join a symptom to a ranked incident only if the symptom
        points at no cause of its own, at a cause the incident already ranks or of the
        spreading kind it leads with (congestion, pause), or at one that explains most of the
        incident (the same fault, seen better). A symptom whose
        own cause is none of these is another fault that happens to be close (slow
        storage beside a pause storm), not part of this one. The answer is how much of
        the incident the symptom's own causes explain (None: it may not join)."""
        own = hypotheses(s, ctx)
        if not inc.root_causes or not own:
            return 0.0
        symptoms = list(inc.symptoms.values())
        total = sum(x.severity for x in symptoms) or 1.0
        fit = max(sum(x.severity * explain(c, e, x, ctx) for x in symptoms) / total for c, e in own)
        ranked = {(rc.cause, rc.entity) for rc in inc.root_causes}
        lead = inc.root_causes[0].cause
        if fit >= 0.5 or any(h in ranked or (h[0] == lead and lead in SPREADING) for h in own):
            return fit
        return None

    def _locus(self, s: Symptom) -> set[str]:
        if s.entity.kind == "job":
            job = self.jobs.get(s.entity.id)
            return set(job.hosts) if job else set()
        return {s.device}

    def _near(self, inc: Incident, s: Symptom) -> bool:
        mine = self._locus(s)
        for other in inc.symptoms.values():
            for a in self._locus(other):
                for b in mine:
                    if a == b:
                        return True
                    d = self.topology.distance(a, b)
                    if d is not None and d <= self.config.hops:
                        return True
        return False

    def _context(self) -> Context:
        return Context(self.topology, tuple(self.jobs.running(self.watermark)) if self.watermark > 0 else (),
                       frozenset(self.admin_down))

    def _recheck(self, interface: str) -> None:
        """An interface went admin-down or came back: the candidates with a symptom on it
        or on its peer are ranked and judged again at the next advance."""
        ids = {interface, self.topology.peer(interface)}
        for inc in self.open.values():
            if not inc.published and any(x.entity.id in ids for x in inc.symptoms.values()):
                inc.dirty = True

    # --- time ------------------------------------------------------------------------
    def advance(self, watermark: float) -> None:
        """Event time reached `watermark`: derive job surges, rank, publish, resolve."""
        if watermark <= self.watermark:
            return
        self.watermark = watermark
        self.recent.expire(watermark, within=self.config.reopen_s)
        self._job_surges()
        ctx = self._context()
        if any(inc.dirty for inc in self.open.values()):
            ctx = dataclasses.replace(ctx, pressed=pressed(
                (x for inc in self.open.values() for x in inc.symptoms.values()), self.topology))
        for inc in list(self.open.values()):
            if inc.dirty:
                self._rerank(inc, ctx)
        self._merge_unpublished(ctx)
        for inc in list(self.open.values()):
            if not inc.published:
                if self._ready(inc):
                    old = self.recent.take(inc, within=self.config.reopen_s)
                    if old is not None:
                        self._reopen(old, inc, ctx)
                    else:
                        inc.detected_at = watermark
                        inc.updated_at = watermark
                        self.opened += 1
                        self._emit(inc)
                elif inc.quiet and watermark - inc.last_activity >= self.config.resolve_after_s:
                    self._forget(inc)  # never became an incident
                continue
            if inc.quiet and watermark - inc.last_activity >= self.config.resolve_after_s:
                inc.status = "resolved"
                inc.resolved_at = inc.last_activity + self.config.resolve_after_s
                inc.updated_at = watermark
                self.resolved += 1
                self._emit(inc)
                self._forget(inc)
                self.recent.add(inc)
            elif inc.dirty:
                inc.updated_at = watermark
                self._emit(inc)
            inc.dirty = False
        changed, opened, resolved = self.cabling.advance(watermark, running=ctx.jobs, topology=self.topology,
                                                         severity=self.config.severity)
        self.opened, self.resolved = self.opened + opened, self.resolved + resolved
        for inc in changed:
            self._emit(inc)

    def _ready(self, inc: Incident) -> bool:
        """A candidate is published once it may open an incident, has settled, and a cause
        that scores enough has credible evidence (persistent or repeated: engine/credible.py)."""
        return inc.can_open and self.watermark >= inc.received_at + self.config.settle_s and inc.credible

    def _credible_lead(self, inc: Incident, ctx: Context) -> None:
        """The best-ranked cause that scores enough and has credible evidence leads (ranks
        renumbered): a better-scored one without (the silence of a collector gap, a host
        link that went down once) is not what pages. None: the incident is not credible."""
        symptoms = list(inc.symptoms.values())
        inc.credible, inc.onset = False, None
        for i, rc in enumerate(inc.root_causes):
            if rc.score < self.config.min_score:
                return
            onset = self.config.persistence.onset(rc.cause, rc.entity, symptoms, ctx)
            if onset is not None:
                inc.credible, inc.onset = True, onset
                if i:
                    order = [rc] + inc.root_causes[:i] + inc.root_causes[i + 1:]
                    inc.root_causes = [dataclasses.replace(x, rank=n + 1) for n, x in enumerate(order)]
                return

    def _merge_unpublished(self, ctx: Context) -> None:
        """Symptoms of one fault that arrived together may have founded several groups
        before any was ranked: fold a not-yet-published group into an older incident
        whose leading cause is the same, or explains most of the group."""
        ordered = sorted(self.open.values(), key=lambda i: (i.opened_at, i.id))
        for young in [i for i in ordered if not i.published and i.root_causes]:
            if young.id not in self.open:
                continue
            for old in ordered:
                if old is young or old.id not in self.open or not old.root_causes:
                    continue
                # A younger candidate takes an older one only as the broader explanation
                # (a job surge's incident takes the congestion of its links, not the reverse).
                later = not old.published and (old.opened_at, old.id) > (young.opened_at, young.id)
                if later and self._same_fault(young, old, ctx):
                    continue
                if self._same_fault(old, young, ctx):
                    self._fold(young, into=old)
                    self._rerank(old, ctx)
                    break

    def _same_fault(self, old: Incident, young: Incident, ctx: Context) -> bool:
        """Whether `old`'s leading cause is `young`'s, or explains most of the symptoms of
        `young` that could open an incident (a collector gap's silence, which opens none by
        itself, beside a fault's first congestion is no other fault to keep apart), or
        explains most of the evidence of `young`'s own leading cause: a noisy job's uplink
        congestion that founded a group of its own beside a host's link bounce is the
        job's, whatever else the group holds (a cascade joins its root, contract section 8)."""
        top, other = old.root_causes[0], young.root_causes[0]
        if (top.cause, top.entity) == (other.cause, other.entity) or self._twin_jobs(top, other):
            return True
        symptoms = [s for s in young.symptoms.values() if self.opens_incident(s.rule)] or list(young.symptoms.values())
        # (the lead's evidence is all of it: the models' evidence that named a job's host
        # link beside a host's link bounce opens nothing by itself, and is still the lead's)
        lead = [s for s in young.symptoms.values() if explain(other.cause, other.entity, s, ctx) >= 1.0]
        return any(self._covered(top, group, ctx) >= 0.5 for group in (symptoms, lead) if group)

    def _twin_jobs(self, a, b) -> bool:
        """Two noisy-neighbour causes naming jobs that share hosts: attribution reads a
        host's NIC rates, which jobs on one host share, so no telemetry splits that load
        between them; they are one fault and one incident, ranking both (a rails fabric of
        three hosts ran every job on two or three of them, and the surge was published
        twice)."""
        if not a.cause == b.cause == "noisy_neighbor":
            return False
        x, y = self.jobs.get(a.entity.id), self.jobs.get(b.entity.id)
        return (x is not None and y is not None and x.running_at(self.watermark) and y.running_at(self.watermark)
                and not set(x.hosts).isdisjoint(y.hosts))

    @staticmethod
    def _covered(cause, symptoms: list[Symptom], ctx: Context) -> float:
        """The share of `symptoms` (by severity) that `cause` explains."""
        total = sum(s.severity for s in symptoms) or 1.0
        return sum(s.severity * explain(cause.cause, cause.entity, s, ctx) for s in symptoms) / total

    def _reopen(self, old: Incident, young: Incident, ctx: Context) -> None:
        """`young` is `old`'s fault come back (engine/reopen.py): `old` takes its symptoms
        and is open again, under its own id, paging no one anew."""
        self.open[old.id] = old
        old.status, old.resolved_at = "open", None
        self._fold(young, into=old)
        self._rerank(old, ctx)
        old.updated_at = self.watermark
        self.reopened += 1
        self._emit(old)
        old.dirty = False

    def _fold(self, young: Incident, *, into: Incident) -> None:
        for key, s in young.symptoms.items():
            into.symptoms[key] = s
            self.home[key] = into.id
        into.opened_at = min(into.opened_at, young.opened_at)
        if young.can_open and not into.can_open:
            into.can_open, into.received_at = True, young.received_at
        into.dirty = True
        del self.open[young.id]

    def _rerank(self, inc: Incident, ctx: Context) -> None:
        inc.root_causes = rank(list(inc.symptoms.values()), ctx)
        if inc.root_causes:
            self._credible_lead(inc, ctx)
            self._impact(inc, ctx)

    def _impact(self, inc: Incident, ctx: Context) -> None:
        """Opening time, affected jobs and severity from the leading cause: the incident
        opened when the credible evidence for its leading cause began, or (not credible
        yet) with the first symptom that cause explains. A symptom of something else that
        happened to be near (a collector gap before a switch died) does not date the fault."""
        symptoms = list(inc.symptoms.values())
        top = inc.root_causes[0]
        inc.opened_at = inc.onset if inc.onset is not None else min(
            (s.start for s in symptoms if explain(top.cause, top.entity, s, ctx) >= 0.5),
            default=min(s.start for s in symptoms))
        running = {j.job_id: j for j in self.jobs.running(inc.opened_at)}
        running.update({j.job_id: j for j in ctx.jobs})
        inc.affected_jobs = affected_jobs(cause=top.cause, entity=top.entity, jobs=running.values(), topology=self.topology)
        hosts = {h for j in inc.affected_jobs for h in running[j.job_id].hosts}
        hosts |= {s.device for s in symptoms if self.topology.role(s.device) == "host"}
        inc.hosts_affected = len(hosts)
        inc.severity = self.config.severity.grade(jobs=len(inc.affected_jobs), hosts=len(hosts))

    def _job_surges(self) -> None:
        """A job surges when most of its hosts saturate their NICs while a shared link it
        crosses with another job is congested (`harmed`), or when its share of a congested
        shared link's load is dominant (engine/attribution.py); the surge is a symptom of
        the job, sent again while it lasts."""
        if not (self.saturated or self.shared or self.surges):
            return  # (no saturated host, no congested shared link, no surge to end: most ticks)
        running = self.jobs.running(self.watermark)
        congested = self._loaded_links()
        hot_by_job = {}
        for job in running:
            if len(job.hosts) < 2:
                continue
            hot = [self.saturated[h] for h in job.hosts if h in self.saturated]
            # saturated hosts make a surge only while they hurt a neighbour: a ramp-up to
            # near line rate that congests no shared link is high load, not a fault
            if len(hot) / len(job.hosts) < self.config.surge_fraction:
                continue
            harm = harmed(job, congested=congested, jobs=running, topology=self.topology)
            if harm is not None:
                hot_by_job[job.job_id] = (hot, len(hot) / len(job.hosts), harm)
        noisy = self._attribution(congested, running) if congested else {}
        for job_id in sorted(hot_by_job.keys() | noisy.keys()):
            sym = self.surges.get(job_id)
            if sym is not None:
                named = job_id in noisy and "share" not in sym.metrics  # (surging by saturation first)
                if named:
                    sym.metrics.update(noisy[job_id].metrics())
                if named or self.watermark - sym.last >= self.config.surge_refresh_s:
                    sym.last = self.watermark
                    self.add(sym)
                continue
            sym = self.surges[job_id] = self._new_surge(job_id, *hot_by_job.get(job_id, ([], 0.0, None)),
                                                         noisy.get(job_id))
            self.add(sym)
        for job_id in list(self.surges):
            if job_id not in hot_by_job and job_id not in noisy:
                sym = self.surges.pop(job_id)
                void = self._stood_on_pause(job_id, sym, congested, running)
                sym.end = sym.last = sym.start if void else self.watermark
                self.add(sym)

    def _new_surge(self, job_id: str, hot: list[Symptom], fraction: float, harm: float | None,
                   named: Attribution | None) -> Symptom:
        """A job's surge: by saturation (`hot`, its saturated hosts' symptoms, hurting a
        neighbour since `harm`), by attribution (`named`), or both."""
        metrics = {"saturated_hosts": float(len(hot)), "fraction": round(fraction, 3)}
        starts = []
        if hot:
            since = min(s.start for s in hot)
            if harm - since >= self.config.steady_s:
                # Its hosts ran at line rate long before anything congested: its load did
                # not change, something else did (a pause tree filling the shared links'
                # queues: credible.py waits for their pause counters). A surge from when
                # it hurt a neighbour, no earlier.
                metrics[STEADY] = round(harm - since, 3)
                since = harm
            starts.append(since)
        if named is not None:
            metrics.update(named.metrics())
            starts.append(named.start)
        start = min(starts)
        return Symptom(key=f"{SURGE_RULE}@{job_id}@{start:.3f}", kind="job_traffic_surge", family="job_surge",
                       entity=Entity("job", job_id), device="", start=start, last=self.watermark,
                       severity=0.8, metrics=metrics, rule=SURGE_RULE)

    def _attribution(self, congested: list[Symptom], running: list[Job]) -> dict:
        """The jobs dominating the congested shared links (engine/attribution.py), taken
        again only once the congestion's evidence moves: a congested port new or seen
        again (not one ending; a job that ended drops out). A congestion symptom stays
        active a few of its series' intervals after its last evidence, and the NIC load
        of a tick without new evidence is not what filled it (docs/design.md, "Noisy
        neighbour by attribution")."""
        evidence = frozenset((s.key, s.last) for s in congested)
        if self.attributed and evidence <= self.attributed[0]:  # (congestion that ended moves nothing)
            ids = {j.job_id for j in running}
            return {j: a for j, a in self.attributed[1].items() if j in ids}
        noisy = self._dominant(congested, running)
        self.attributed = (evidence, noisy)
        return noisy

    def _dominant(self, congested: list[Symptom], running: list[Job]) -> dict:
        return dominant_jobs(congested=congested, load=host_load(self.busy.values()), jobs=running,
                             topology=self.topology, share=self.config.dominant_share,
                             load_in=host_load(self.busy_rx.values(), "util_rx"))

    def _stood_on_pause(self, job_id: str, sym: Symptom, congested: list[Symptom], running: list[Job]) -> bool:
        """Whether a surge that attribution alone made ends only because the ports it
        stood on are now known to be paused: a queue gauge is proven in two samples and
        the pause counters that show its port a victim in three, so for a tick the pause
        tree's queues looked like load. It never stood on load, and spans nothing."""
        if "share" not in sym.metrics or sym.metrics.get("saturated_hosts"):
            return False
        if len(congested) == len(self.shared):
            return False  # no shared port turned out paused
        return job_id in self._dominant(list(self.shared.values()), running)

    def _loaded_links(self) -> list[Symptom]:
        """The congested switch-to-switch ports whose queues hold what is sent across
        them: a port paused itself fills behind its stopped egress (a pause tree's victim,
        contract section 8), whatever the jobs crossing it send."""
        if not self.shared:
            return []
        paused = {s.entity.id for inc in self.open.values() for s in inc.symptoms.values()
                  if s.kind in PAUSED_KINDS and s.end is None}
        return [s for s in self.shared.values() if s.entity.id not in paused]

    def _emit(self, inc: Incident) -> None:
        if inc.maintenance is None and inc.root_causes:
            inc.maintenance = self._maintenance(inc)
        self._changes.append(inc.to_dict())

    def _maintenance(self, inc: Incident) -> str | None:
        entity, peer = inc.root_causes[0].entity, self.topology.peer
        reason = admin_down_reason(entity, self.admin_down, peer) if self.admin_down else None
        if reason is None and self.maintenance is not None:
            reason = window_reason(entity, inc.opened_at, self.maintenance.windows(), peer)
        return reason

    def _forget(self, inc: Incident) -> None:
        del self.open[inc.id]
        for key in inc.symptoms:
            self.home.pop(key, None)

    def update_job(self, job: Job) -> None:
        self.jobs.update(job)

    def drain(self) -> list[dict]:
        """Incident changes (contract JSON) since the last drain, in order."""
        out, self._changes = self._changes, []
        return out

    def snapshot(self) -> CorrelatorState:
        return CorrelatorState(
            watermark=self.watermark, open=[inc.snapshot() for inc in self.open.values()], home=dict(self.home),
            saturated={h: symptom_to_wire(x) for h, x in self.saturated.items()},
            surges={j: symptom_to_wire(x) for j, x in self.surges.items()}, opened=self.opened,
            resolved=self.resolved, jobs=self.jobs.to_dict()["jobs"], changes=list(self._changes),
            admin_down={i: symptom_to_wire(x) for i, x in self.admin_down.items()},
            busy={i: symptom_to_wire(x) for i, x in self.busy.items()},
            busy_rx={i: symptom_to_wire(x) for i, x in self.busy_rx.items()},
            shared={k: symptom_to_wire(x) for k, x in self.shared.items()}, cabling=self.cabling.snapshot(),
            recent=self.recent.snapshot(), reopened=self.reopened, attributed=_attributed_to_wire(self.attributed))

    def restore(self, state: CorrelatorState) -> None:
        """Continue from `state`; ValueError (before any change) if it does not hold together."""
        incidents = {st.id: Incident.restore(st) for st in state.open}
        cabled = [Incident.restore(st) for st in state.cabling]
        reopenable = [Incident.restore(st) for st in state.recent]
        self.jobs = JobBook.from_dict({"jobs": state.jobs})
        self.open, self.home = incidents, dict(state.home)
        self.saturated = {h: symptom_from_wire(x) for h, x in state.saturated.items()}
        self.surges = {j: symptom_from_wire(x) for j, x in state.surges.items()}
        self.admin_down = {i: symptom_from_wire(x) for i, x in state.admin_down.items()}
        self.busy = {i: symptom_from_wire(x) for i, x in state.busy.items()}
        self.busy_rx = {i: symptom_from_wire(x) for i, x in state.busy_rx.items()}
        self.shared = {k: symptom_from_wire(x) for k, x in state.shared.items()}
        self.cabling.restore(cabled)
        self.recent = Recent()
        for inc in reopenable:
            self.recent.add(inc)
        self.watermark, self.opened, self.resolved = state.watermark, state.opened, state.resolved
        self.reopened = state.reopened
        self.attributed = _attributed_from_wire(state.attributed)
        self._changes = list(state.changes)


def _attributed_to_wire(attributed: tuple) -> list:
    if not attributed:
        return []
    evidence, noisy = attributed
    return [[list(k) for k in sorted(evidence)], [[a.job_id, a.share, list(a.links), a.start] for a in noisy.values()]]


def _attributed_from_wire(wire: list) -> tuple:
    if not wire:
        return ()
    evidence, noisy = wire
    return (frozenset((k, last) for k, last in evidence),
            {j: Attribution(j, share, tuple(links), start) for j, share, links, start in noisy})
