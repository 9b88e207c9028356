"""Stage 5: rank root causes for a set of correlated symptoms.

Each symptom suggests candidate causes (hypotheses); each candidate is scored by how much
of the whole symptom set it explains under the fabric's physics, by whether its own
symptoms came first, and by their severity. `explain` is the physics, one small function
per cause: "if this were the cause, how well would it account for that symptom?" (0-1).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Callable

from engine.topology import Topology
from engine.types import Entity, Job, RootCause, Symptom, device_of, rfc3339

SWITCH_SIDE = ("link_down", "link_flap")
CONGESTION_KINDS = ("queue_congested", "ecn_marking", "wred_drops")
MAX_CAUSES = 5
SATURATED = "nic_tx_saturated"  # a host's own surge (rules/catalogue), which the correlator lifts to its job
PAUSED_KINDS = ("pfc_pause_rx", "pfcwd_storm")  # an interface receiving pause (a watchdog: a storm of it)


@dataclass(frozen=True)
class Context:
    """What the physics needs beside the symptoms: the graph, the running jobs and the
    interfaces an operator has taken down (admin-down: maintenance, not a fault)."""

    topology: Topology
    jobs: tuple[Job, ...] = ()
    admin_down: frozenset[str] = frozenset()
    # device -> when it relayed pressure, from every open candidate (`pressed`): empty
    # unless the correlator filled it (credibility of pfc_storm, engine/credible.py)
    pressed: Mapping[str, tuple[tuple[float, float], ...]] = field(default_factory=dict)

    def dist(self, a: str, b: str) -> int | None:
        return self.topology.distance(a, b)

    def near(self, a: str, b: str, hops: int) -> bool:
        d = self.topology.distance(a, b)
        return d is not None and d <= hops

    def job(self, job_id: str) -> Job | None:
        for j in self.jobs:
            if j.job_id == job_id:
                return j
        return None


def hypotheses(s: Symptom, ctx: Context) -> list[tuple[str, Entity]]:
    """Candidate causes a symptom points at directly."""
    topo = ctx.topology
    eid = s.entity.id
    out: list[tuple[str, Entity]] = []
    if s.family == "link_state":
        link = topo.link_of(eid)
        if link:
            out.append(("link_flap", Entity("link", link)))
        peer = topo.peer(eid)
        if peer and topo.is_switch(device_of(peer)):
            out.append(("device_down", Entity("switch", device_of(peer))))
    elif s.kind == "rx_errors":
        link = topo.link_of(eid)
        if link:
            out.append(("link_degraded", Entity("link", link)))
    elif s.kind in ("pfc_pause_tx", "pause_storm_event"):
        out.append(("pfc_storm", Entity("interface", eid)))
    elif s.kind in PAUSED_KINDS:
        peer = topo.peer(eid)
        if peer:
            out.append(("pfc_storm", Entity("interface", peer)))
    elif s.kind in CONGESTION_KINDS:
        out.append(("congestion", Entity("interface", eid)))
    elif s.kind == "cnp_receiver":
        peer = topo.peer(eid)
        if peer:
            out.append(("congestion", Entity("interface", peer)))
    elif s.family == "microburst":
        out.append(("microburst", Entity("interface", eid)))
    elif s.kind in ("nic_out_of_buffer", "nic_discards", "nic_pcie_stall"):
        out.append(("nic_degraded", Entity("interface", eid)))
    elif s.kind == "storage_latency":
        out.append(("storage_slow", Entity("storage", eid)))
    elif s.kind == "switch_silent":
        out.append(("device_down", Entity("switch", eid)))
    elif s.kind == "job_traffic_surge":
        out.append(("noisy_neighbor", Entity("job", eid)))
    return out


# --- physics: how well would cause C at entity E explain symptom S? ----------------

def _link_flap(e: Entity, s: Symptom, ctx: Context) -> float:
    ends = ctx.topology.link_ends(e.id)
    if s.family == "link_state" and s.entity.id in ends:
        return 1.0
    if s.kind == "nic_retransmit" and any(ctx.near(s.device, device_of(x), 2) for x in ends):
        return 0.4
    if s.kind in CONGESTION_KINDS and (_beside(ends, s, ctx) or _rerouted(ends, s, ctx)):
        return 0.5  # the traffic it drops moves onto the links beside it: rerouting congestion
    return 0.0


def _rerouted(ends: tuple[str, ...], s: Symptom, ctx: Context) -> bool:
    """Whether symptom s is on a switch next to an end of a switch-to-switch link: the
    surviving equal-cost paths between the link's two tiers run through the switches
    cabled to its ends (the other spines of a leaf, the other leaves of a spine), so the
    traffic the link drops fills their ports. A host link has no such detour."""
    topo = ctx.topology
    if s.entity.id in ends or not topo.is_switch(s.device) or not all(topo.is_switch(device_of(x)) for x in ends):
        return False
    return any(ctx.dist(device_of(x), s.device) == 1 for x in ends)


def _beside(ends: tuple[str, ...], s: Symptom, ctx: Context) -> bool:
    """Whether symptom s is on another port of a switch at one end of the link."""
    return s.entity.id not in ends and any(
        ctx.topology.is_switch(device_of(x)) and device_of(x) == s.device for x in ends)


def _link_degraded(e: Entity, s: Symptom, ctx: Context) -> float:
    ends = ctx.topology.link_ends(e.id)
    if s.kind == "rx_errors" and s.entity.id in ends:
        return 1.0
    if s.kind == "nic_retransmit" and any(ctx.near(s.device, device_of(x), 3) for x in ends):
        return 0.6
    return 0.0


def _pfc_storm(e: Entity, s: Symptom, ctx: Context) -> float:
    if s.entity.id == e.id and s.family == "pfc":
        return 1.0
    if _sent_by(e, s, ctx):
        return 1.0
    d = _hops(e, s.device, ctx)
    if d is None:
        return 0.0
    if s.family == "pfc" and d <= 4:
        return 0.9
    if s.kind in ("queue_congested", "ecn_marking") and d <= 1:
        return 0.8  # the switch queue toward the storming port fills
    if s.kind in CONGESTION_KINDS and d <= 4 and _toward(e, s, ctx):
        return 0.7  # a paused egress up the pause tree: its queue fills toward the storm
    if s.kind in ("cnp_sender", "cnp_receiver", "nic_retransmit") and d <= 4:
        return 0.3
    return 0.0


def _sent_by(e: Entity, s: Symptom, ctx: Context) -> bool:
    """Whether symptom s is pause that a host NIC `e` sends, counted at the other end of
    its link: its switch port receives that pause frame for frame, and `port_pfc_rx` asks
    what `nic_pfc_tx` asks. A NIC polled slower than its switches is seen storming there
    first (docs/design.md, "Origin versus victim for pause"). Not for a switch port: its
    pause is judged by the pause time it reports (credible.py `_paused_long`)."""
    return (s.kind == "pfc_pause_rx" and s.entity.id == ctx.topology.peer(e.id)
            and not ctx.topology.is_switch(device_of(e.id)))


def _toward(e: Entity, s: Symptom, ctx: Context) -> bool:
    """Whether the port of symptom s sends toward interface e (its peer is closer to e
    than the port's own device): the direction in which pause backs queues up."""
    peer = ctx.topology.peer(s.entity.id)
    if not peer:
        return False
    near, far = _hops(e, device_of(peer), ctx, via=peer), _hops(e, s.device, ctx)
    return near is not None and far is not None and near < far


def _hops(e: Entity, device: str, ctx: Context, via: str | None = None) -> int | None:
    """Hops from interface e to `device` (entered through its interface `via`, if given).
    A host NIC meets the fabric only at its own link's switch: the pause it sends presses
    that switch, and its host's other NICs (on rails, eight NICs to eight leaves) do not
    carry it, so it is one hop from that switch and no nearer to anything else (None: a
    host entered through another of its NICs)."""
    dev, topo = device_of(e.id), ctx.topology
    if topo.is_switch(dev):
        return ctx.dist(dev, device)
    if device == dev:
        return 0 if via is None or via == e.id else None
    peer = topo.peer(e.id)
    d = ctx.dist(dev if peer is None else device_of(peer), device)
    return d if d is None or peer is None else d + 1


def _congestion(e: Entity, s: Symptom, ctx: Context) -> float:
    eid = e.id
    if s.entity.id == eid and s.family == "congestion":
        return 1.0
    peer = ctx.topology.peer(eid)
    if s.kind == "cnp_receiver" and s.entity.id == peer:
        return 1.0
    if s.kind == "storage_latency" and peer and device_of(peer) == s.entity.id:
        return 0.8  # congestion toward a storage host slows its I/O
    d = ctx.dist(device_of(eid), s.device)
    if d is None:
        return 0.0
    if s.kind == "cnp_sender" and d <= 4:
        return 0.6
    if s.kind in CONGESTION_KINDS and d == 0:
        return 0.3
    if s.family == "pfc" and d <= 1:
        return 0.4  # congestion can back-pressure into pause
    return 0.0


def _microburst(e: Entity, s: Symptom, ctx: Context) -> float:
    if s.family == "microburst" and s.entity.id == e.id:
        return 1.0
    if s.family == "microburst" and s.device == device_of(e.id):
        return 0.7
    return 0.0


def _nic_degraded(e: Entity, s: Symptom, ctx: Context) -> float:
    if s.family == "nic" and s.entity.id == e.id:
        return 1.0
    if s.kind == "pfc_pause_tx" and s.entity.id == e.id:
        return 0.5
    if s.kind == "nic_retransmit" and ctx.near(s.device, device_of(e.id), 4):
        return 0.3
    return 0.0


def _storage_slow(e: Entity, s: Symptom, ctx: Context) -> float:
    if s.kind == "storage_latency" and s.entity.id == e.id:
        return 1.0
    if s.family == "pfc" and (s.device == e.id or device_of(ctx.topology.peer(s.entity.id) or "") == e.id):
        return 0.6  # a target that cannot keep up backs up its port: its readers are paused
    return 0.0


def _device_down(e: Entity, s: Symptom, ctx: Context) -> float:
    if s.kind == "switch_silent" and s.entity.id == e.id:
        return 1.0
    if s.family == "link_state":
        if s.device == e.id:
            return 0.2  # it reports its own port down: it is alive
        peer = ctx.topology.peer(s.entity.id)
        if peer and device_of(peer) == e.id:
            return 1.0  # seen from the far end
    if s.kind in CONGESTION_KINDS and ctx.near(s.device, e.id, 2):
        return 0.6  # its traffic moved onto the surviving paths beside it
    if s.family == "pfc" and ctx.near(s.device, e.id, 2):
        return 0.5  # ... and the congestion there pauses the senders
    if s.kind in ("nic_retransmit", "cnp_sender") and ctx.near(s.device, e.id, 2):
        return 0.3
    return 0.0


def _noisy_neighbor(e: Entity, s: Symptom, ctx: Context) -> float:
    if s.kind == "job_traffic_surge" and s.entity.id == e.id:
        return 1.0
    job = ctx.job(e.id)
    if job is None:
        return 0.0
    if s.kind == SATURATED and s.device in job.hosts:
        return 1.0
    if s.family == "congestion" and s.entity.kind == "interface":
        link = ctx.topology.link_of(s.entity.id)
        storage = job.storage if job.storage is not None else ctx.topology.devices("storage")
        links = ctx.topology.job_links(hosts=job.hosts, storage=storage)
        if link in links:
            a, b = ctx.topology.link_ends(link)
            both_switches = ctx.topology.is_switch(device_of(a)) and ctx.topology.is_switch(device_of(b))
            return 1.0 if both_switches else 0.5
        if s.kind in ("cnp_sender", "cnp_receiver"):
            return 0.6
    return 0.0


PHYSICS: dict[str, Callable[[Entity, Symptom, Context], float]] = {
    "link_flap": _link_flap,
    "link_degraded": _link_degraded,
    "pfc_storm": _pfc_storm,
    "congestion": _congestion,
    "microburst": _microburst,
    "nic_degraded": _nic_degraded,
    "storage_slow": _storage_slow,
    "device_down": _device_down,
    "noisy_neighbor": _noisy_neighbor,
}


def explain(cause: str, entity: Entity, s: Symptom, ctx: Context) -> float:
    return PHYSICS[cause](entity, s, ctx)


def plausibility(cause: str, entity: Entity, symptoms: list[Symptom], ctx: Context) -> float:
    """Physics that rules a candidate down whatever it explains."""
    if cause == "pfc_storm":
        return _pause_origin(entity, symptoms, ctx)
    elif cause == "congestion":
        if any(s.kind in PAUSED_KINDS and s.entity.id == entity.id for s in symptoms):
            return 0.35  # its egress is paused: the queue fills behind the pause, a victim
    elif cause == "device_down":
        if not any(s.kind == "switch_silent" and s.entity.id == entity.id for s in symptoms):
            return 0.4  # a switch that still reports is not down
        seen, every = links_seen_down(entity.id, symptoms, ctx.topology)
        if 2 * len(seen) < len(every):
            return 0.4  # most of its links are up at their far ends: silent, but not down
            # (a collector gap while one of its links flaps: contract section 8)
    elif cause == "link_flap":
        if not any(s.kind == "link_flap" for s in symptoms):
            return 0.6  # down once is not yet flapping
    elif cause == "microburst":
        if any(s.kind == "queue_congested" and s.entity.id == entity.id for s in symptoms):
            return 0.5  # sustained occupancy is congestion, not a burst
    elif cause == "noisy_neighbor":
        named = {s.entity.id for s in symptoms if s.kind == "job_traffic_surge" and "share" in s.metrics}
        if named and entity.id not in named:
            return 0.6  # jobs on shared hosts surge alike; the one attribution names is the cause
    elif cause == "storage_slow":
        peers = {ctx.topology.peer(i) for i in ctx.topology.interfaces(entity.id)}
        if any(s.family == "congestion" and s.entity.id in peers for s in symptoms):
            return 0.5  # the network toward it is congested: not the storage's fault
    return 1.0


def links_seen_down(switch: str, symptoms: Iterable[Symptom], topology: Topology) -> tuple[set, set]:
    """(the links of `switch` that `symptoms` show down from their far ends, all its
    links): a dead switch reports nothing, so its links count when their far ends see
    them down (engine/credible.py asks it of a device_down's persistence, the ranking of
    its plausibility)."""
    every = {topology.link_of(i) for i in topology.interfaces(switch)} - {None}
    seen = {topology.link_of(s.entity.id) for s in symptoms if s.family == "link_state" and s.device != switch}
    return seen & every, every


def _pause_origin(entity: Entity, symptoms: list[Symptom], ctx: Context) -> float:
    """How plausible it is that `entity` originates pause (contract section 8). The head
    of a pause tree sends pause without being paused on its own device; a switch port
    relays pause when an egress of its switch is congested or paused, so a switch port is
    an origin only with neither in sight, and even then less likely than a NIC (a NIC
    that stops draining is what starts a storm in practice)."""
    dev = device_of(entity.id)
    switch = ctx.topology.is_switch(dev)
    # a switch forwards between its ports, so pause received on any of them is behind this
    # one; a host's NICs do not (eight rails of one host reach eight leaves): only its own
    if any(s.kind == "pfc_pause_rx" and pressure_key(s, ctx.topology) == pressure_key(entity, ctx.topology)
           for s in symptoms):
        return 0.35  # paused itself: a relay
    if switch and any(s.family == "congestion" and s.kind != "cnp_sender" and s.device == dev for s in symptoms):
        return 0.3  # a congested egress behind it: the pause is that congestion's
    sends = any((s.entity.id == entity.id and s.kind in ("pfc_pause_tx", "pause_storm_event"))
                or _sent_by(entity, s, ctx) for s in symptoms)
    if switch:
        return 0.6 if sends else 0.5
    return 1.0 if sends else 0.8


def pressure_key(x: Symptom | Entity, topology: Topology) -> str:
    """What pause presses: a switch as a whole (its ports share one buffer: an egress
    paused or congested backs up every ingress), a host NIC alone (a host with a NIC per
    rail has a buffer per NIC: pause on one does not stop another)."""
    iface = x.entity.id if isinstance(x, Symptom) else x.id
    dev = device_of(iface)
    return dev if topology.is_switch(dev) else iface


def pressed(symptoms: Iterable[Symptom], topology: Topology) -> dict[str, tuple[tuple[float, float], ...]]:
    """When each switch or NIC (`pressure_key`) was a relay of pause (contract section 8):
    the spans during which it received pause or (a switch) had a congested egress. One
    pressed so sends pause as a victim, whichever incident the pressure's symptoms are in.
    A switch port paused itself is listed under its own name too: its queue fills
    because its egress is stopped, so its congestion is the pause's, not a cause. So is
    every switch port facing a switch seen sending pause (a port of it sending, or a
    port facing it receiving): its ports share one buffer, and a buffer that fills
    pauses what flows into it, so a queue toward it fills behind the pause before that
    port's own pause counters have had the samples to say so (`pause_senders`)."""
    out: dict[str, list[tuple[float, float]]] = {}
    for s in symptoms:
        paused = s.kind in PAUSED_KINDS
        congested = s.kind in CONGESTION_KINDS and topology.is_switch(s.device)
        span = (s.start, s.end if s.end is not None else s.last)
        if (paused or congested) and s.entity.kind == "interface":
            out.setdefault(pressure_key(s, topology), []).append(span)
            if paused and topology.is_switch(s.device):
                out.setdefault(s.entity.id, []).append(span)
        for sender in pause_senders(s, topology):
            for port in topology.interfaces(sender):
                far = topology.peer(port)
                if far is not None and topology.is_switch(device_of(far)):
                    out.setdefault(far, []).append(span)
    return {d: tuple(sorted(v)) for d, v in out.items()}


def pause_senders(s: Symptom, topology: Topology) -> tuple[str, ...]:
    """The switch a pause symptom shows sending pause: the device of a port that sends it
    (`pfc_pause_tx`), or the far end of a switch port that receives it."""
    if s.entity.kind != "interface" or not topology.is_switch(s.device):
        return ()
    if s.kind == "pfc_pause_tx":
        return (s.device,)
    if s.kind in PAUSED_KINDS:
        far = topology.peer(s.entity.id)
        if far is not None and topology.is_switch(device_of(far)):
            return (device_of(far),)
    return ()


def rank(symptoms: list[Symptom], ctx: Context) -> list[RootCause]:
    """Ranked root causes for one incident's symptoms, best first, scores in [0, 1]."""
    if not symptoms:
        return []
    total = sum(s.severity for s in symptoms) or 1.0
    t0 = min(s.start for s in symptoms)
    seen: dict[tuple[str, Entity], None] = {}
    for s in symptoms:
        for h in hypotheses(s, ctx):
            seen.setdefault(h, None)
    scored = []
    for cause, entity in seen:
        parts = [(explain(cause, entity, s, ctx), s) for s in symptoms]
        coverage = sum(x * s.severity for x, s in parts) / total
        direct = [s for x, s in parts if x >= 1.0]
        strength = max((s.severity for s in direct), default=0.0)
        first = min((s.start for s in direct), default=t0 + 30.0)
        earliness = 1.0 - min(1.0, max(0.0, first - t0) / 30.0)
        score = plausibility(cause, entity, symptoms, ctx) * (0.65 * coverage + 0.2 * strength + 0.15 * earliness)
        scored.append((round(min(1.0, max(0.0, score)), 6), cause, entity, parts))
    scored.sort(key=lambda x: (-x[0], x[1], x[2].id))
    return [
        RootCause(rank=i + 1, cause=cause, entity=entity, score=score, evidence=_evidence(parts))
        for i, (score, cause, entity, parts) in enumerate(scored[:MAX_CAUSES])
    ]


def _evidence(parts: list[tuple[float, Symptom]], limit: int = 8) -> tuple[dict, ...]:
    best = sorted((p for p in parts if p[0] >= 0.5), key=lambda p: (-p[0] * p[1].severity, p[1].start, p[1].key))
    return tuple(
        {
            "symptom": s.kind,
            "entity": s.entity.id,
            "at": rfc3339(s.start),
            "explains": round(x, 2),
            "metrics": {k: round(v, 3) for k, v in sorted(s.metrics.items())},
        }
        for x, s in best[:limit]
    )
