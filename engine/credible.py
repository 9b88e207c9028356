"""Persistence: when a candidate incident has evidence enough to be a fault (contract
section 8), in seconds of event time, never in samples.

A published incident has paged someone, so a candidate is published only once the
evidence for its leading cause is credible, and one that never becomes credible is
dropped unseen. The evidence is the candidate's symptoms that its leading cause explains
directly (`explain` = 1: the queue at the congested port, the pause sent by the storming
NIC, the errors on the bad link's ends). Each lasts from its first sign to its last (an
active symptom's last sign comes with the detector's refreshes), and overlapping ones are
joined. An anomaly model's evidence symptom (one that may not open an incident,
`evidence_only`) is none of it: it joins and ranks, but a job ramp's minutes of queue
occupancy do not make a rule's 3 s blip beside it persistent. Per cause:

- **events are instants**: a symptom of a rule on an event measurement (a WJH drop, a
  link event) is evidence at its events' times, not over the time between them (`spans`):
  two isolated tail drops 27 s apart are two blips, not 27 s of drops.
- **sustained**: the longest joined stretch lasts at least `sustained_s[cause]`. Chosen
  above the benign bursts of the same signals: collective phases and checkpoint bursts
  last a few seconds, a PCIe stall or an ECN/CNP burst 1-3 s; a fault that matters lasts
  tens of seconds. Storage latency asks for longer: single I/Os are slow now and then, a
  target that is slow for half a minute is what readers feel. Congestion on a
  switch-to-switch link waits `shared_congestion_s`: the question there is whose traffic
  fills it (noisy neighbour by attribution), and the senders' load is reported on the
  same clocks as the congestion, so the answer needs the same time again. It also waits
  for the port's own pause counters (`_shared_wait`): the samples the pause rules need,
  at the interval its evidence shows, so that a queue filling behind a paused egress is
  seen paused before it is called congested. Congestion at any other switch port waits
  for its pause counters too (`_pause_wait`: 11 s at 1 s polling, 20 s at 10 s).
- **repeated**: causes whose faults show as recurring blips (errors, NIC drops and stalls,
  microbursts) are also credible after `repeats` separate stretches: the same entity
  again and again, where a blip happens once.
- **at once**: symptoms that are already a repetition or a hardware verdict make the
  cause credible as soon as they are seen: a link whose carrier transitions repeat
  (`link_flap`), a NIC's or switch's pause-storm watchdog.
- **loud**: a rule may say its symptom is loud evidence (`at_once: true`: a NIC sending
  pause a quarter of every second, I/O latency ten times a healthy target's: orders of
  magnitude above the few pause frames and the modest scrubbing of section 8; a busy
  egress that marks and drops for 3 s on end, where collective phases mark without
  loss); the cause
  it points at is credible as soon as it is raised, the rule's own `for_s` being the
  wait, so the verdict holds at every interval. Not for congestion on a switch-to-switch
  link, which waits for attribution whatever its loss.
- **corroborated**: independent witnesses of one cause at the same time make it credible
  at once: `witnesses` reports from different rules or different devices, overlapping in
  time (a bad optic's lost frames seen at both ends of the link; a NIC dropping for want
  of buffer while its PCIe stalls; a burst's queue drops, port discards and WJH drop
  events on one port). Every benign case of section 8 is one counter on one device (a
  stray CRC, an out-of-buffer blip, one tail drop or WJH event); each witness has already
  passed its rule's own persistence (hits, `for_s`). Not for the causes whose benign
  look-alikes are many witnesses by nature: a link bounce is seen down from both ends, a
  job's surge and its hosts' saturation are one measurement, congestion on a shared link
  waits for attribution, storage latency is one witness.
- **paused long**: a `pfc_storm` at a switch port needs pause that held its peer a tenth
  of a second per second or more at its peak (`switch_pause_us`), or a watchdog's storm,
  when its exporter reports pause time: a port relaying collective phases sends pause
  frames that pause next to nothing.
- **pressed**: a `pfc_storm` at an interface that was pressed while its pause lasted (a
  switch paused on any port or with a congested egress, a NIC paused: `Context.pressed`,
  from every open candidate) relays pause and is never credible; nor is a `congestion`
  at a switch port that was paused itself (its queue fills behind the stopped egress),
  and such a queue is no evidence of a `noisy_neighbor` (no job's load).
- `device_down` needs the switch's links seen down by their far ends, on half of its
  links and at least two (a dead switch takes all its links down; two hosts rebooting
  under one leaf take two): a switch whose telemetry stops while its peers see their links up is a collector
  gap, and one that reports its own ports down is alive. `link_flap`
  without repeated transitions is a link that went down once (a reboot, a driver reload,
  maintenance): credible for a switch-to-switch link that stays down
  `fabric_link_down_s` (capacity lost), and for a host link whose host keeps reporting
  it down for `host_link_down_s` while the switch's port reports itself oper-down as long,
  neither end admin-down (`Context.admin_down`): a dead cable or
  optic. A reboot silences the host's report, a driver reload or a bounce is over in
  seconds, and a port an operator took down reports admin-down, never oper-down
  (`port_oper_down` excludes it), though the host sees its link go down all the same.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from engine.attribution import shared_link
from engine.detect_parts import proof_samples
from engine.rank import SATURATED, Context, explain, links_seen_down, pressure_key
from engine.samples import interval as sample_interval
from engine.types import Entity, Symptom, device_of

REPEATING = frozenset({"link_degraded", "nic_degraded", "microburst"})
AT_ONCE = frozenset({"link_flap", "pause_storm_event", "pfcwd_storm"})
CORROBORATED = frozenset({"link_degraded", "nic_degraded", "microburst"})
STEADY = "steady_s"  # a surge metric: a steady load the fabric changed under (engine/correlate.py `_new_surge`)
PAUSE_TIME = ("pfc_tx_pause_us_rate", "tx_pause_us_rate")  # a pause symptom's pause time, µs per s (its peak)


def _default_sustained() -> dict[str, float]:
    return {"congestion": 10.0, "pfc_storm": 10.0, "microburst": 10.0, "nic_degraded": 10.0,
            "link_degraded": 10.0, "storage_slow": 30.0, "noisy_neighbor": 10.0}


@dataclass(frozen=True)
class Persistence:
    sustained_s: dict[str, float] = field(default_factory=_default_sustained)
    repeats: int = 3  # separate stretches of evidence that make a repeating cause credible
    repeating: frozenset[str] = REPEATING
    at_once: frozenset[str] = AT_ONCE  # symptom kinds credible as soon as seen
    loud_rules: frozenset[str] = frozenset()  # rules whose symptoms are credible at once (rule `at_once`)
    # Rules that read an event measurement (RuleSet.events: wjh_drop, link_event): each of
    # their symptoms is evidence at its events' instants (`spans`), not over the time
    # between two of them.
    event_rules: frozenset[str] = frozenset()
    corroborated: frozenset[str] = CORROBORATED  # causes that independent witnesses make credible at once
    witnesses: int = 2  # ... this many (rule, entity) reports overlapping in time
    join_gap_s: float = 2.0  # stretches closer than this are one (symptoms of one condition, polled apart)
    fabric_link_down_s: float = 30.0
    host_link_down_s: float = 30.0  # a host link its host reports down this long (and its switch port too)
    shared_congestion_s: float = 20.0  # congestion on a switch-to-switch link waits for attribution
    # ... and for its own pause counters: the pause rules' for_s (port_pfc_rx), which they
    # prove in ceil(for_s / I) + 2 samples of the port's interval I (`_shared_wait`)
    pause_for_s: float = 10.0
    switch_pause_us: float = 100_000.0  # µs paused per s a switch port's pause must reach to originate a storm
    switch_links_down: int = 2  # a switch is down when at least this many of its links ...
    switch_links_share: float = 0.5  # ... and this share of them are seen down by their far ends
    # Rule id -> its symptoms are evidence only (an anomaly model's evidence, which may not
    # open an incident): they join and rank, but their span, repeats and witness make no
    # cause credible (a job ramp's queue-occupancy evidence gave a 1 s congestion blip
    # 300 s). None: every symptom counts.
    evidence_only: Callable[[str], bool] | None = None

    def credible(self, cause: str, entity: Entity, symptoms: list[Symptom], ctx: Context) -> bool:
        """Whether the evidence for `cause` at `entity` among `symptoms` makes a fault."""
        return self.onset(cause, entity, symptoms, ctx) is not None

    def onset(self, cause: str, entity: Entity, symptoms: list[Symptom], ctx: Context) -> float | None:
        """When the credible evidence for `cause` at `entity` began (the fault's first
        symptom), or None while it is not credible."""
        direct = [s for s in symptoms if explain(cause, entity, s, ctx) >= 1.0]
        if self.evidence_only is not None:
            direct = [s for s in direct if not self.evidence_only(s.rule)]
        if not direct or (cause == "pfc_storm" and self._pressed(pressure_key(entity, ctx.topology), direct, ctx)):
            return None
        if cause == "pfc_storm" and ctx.topology.is_switch(device_of(entity.id)) and not self._paused_long(direct):
            return None  # pause frames that paused nothing much: a switch relaying bursts
        if cause == "congestion" and self._pressed(entity.id, direct, ctx):
            return None  # a queue behind a paused egress: the pause's victim
        if cause == "noisy_neighbor":  # (nor is it the job's load)
            direct = [s for s in direct if s.family != "congestion" or not self._pressed(s.entity.id, [s], ctx)]
            if not direct:
                return None
        if any(s.kind in self.at_once for s in direct):
            return min(s.start for s in direct)
        # A steady load's surge (engine/correlate.py `_job_surges`) is the evidence for as
        # long as it hurt a neighbour, its hosts' saturation none (that was the load before
        # anything changed, and goes on after), and it waits as congestion on its shared
        # links waits: a pause tree fills their queues a sample before their own pause
        # counters show them paused.
        steady = cause == "noisy_neighbor" and any(STEADY in s.metrics for s in direct)
        if steady:
            direct = [s for s in direct if s.kind != SATURATED]
        shared = (cause == "congestion" and shared_link(ctx.topology, entity.id) is not None) or steady
        if not shared and any(s.rule in self.loud_rules for s in direct):
            return min(s.start for s in direct)
        if cause == "device_down":
            return self._switch_down(entity.id, direct, ctx)
        stretches = self.stretches(direct)
        if cause == "link_flap":
            ends = ctx.topology.link_ends(entity.id)
            if not all(ctx.topology.is_switch(device_of(x)) for x in ends):
                return self._host_link_down(ends, direct, ctx)
            need = self.fabric_link_down_s
        elif shared:
            need = self._shared_wait(direct)  # whose traffic is it, and is the port paused?
        else:
            need = self.sustained_s.get(cause, 10.0)
            if cause == "congestion" and ctx.topology.is_switch(device_of(entity.id)):
                need = max(need, self._pause_wait(direct, missed=0))  # is the port paused?
            if cause in self.corroborated:
                seen = self._corroborated(direct)
                if seen is not None:
                    return seen
        long = [a for a, b in stretches if b - a >= need]
        if long:
            return long[0]
        if cause in self.repeating and len(stretches) >= self.repeats:
            return stretches[0][0]
        return None

    def _shared_wait(self, direct: list[Symptom]) -> float:
        """How long congestion on a switch-to-switch link must last: `shared_congestion_s`
        (the senders' load is reported on the same clocks as the congestion), and
        `_pause_wait`."""
        return max(self.shared_congestion_s, self._pause_wait(direct))

    def _pause_wait(self, direct: list[Symptom], missed: int = 1) -> float:
        """How long congestion at a switch port must last: as long as the port's own pause
        counters take to show it paused (the pause rules' samples, `missed` missed among
        them), where a queue-occupancy gauge takes a sample less. At 30-60 s polling a
        spine's queue toward the leaf of a weak NIC storm was published as congestion two
        samples in, before anything was seen paused; at 10 s a leaf's queue toward the
        storming NIC itself was (tune-range pfc_storm-23 at 10 s, `--repeats 24`). A
        switch-to-switch link waits for attribution anyway and allows a missed sample; a
        host's port waits no longer than the pause rules' samples take to span, so that a
        minute-long congestion at 30 s polling is still found."""
        iv = sample_interval(direct)
        return (proof_samples(self.pause_for_s, iv) - 1 + missed) * iv

    def _paused_long(self, direct: list[Symptom]) -> bool:
        """Whether a switch port's pause held its peer for long (`switch_pause_us` of every
        second at its peak), or cannot be told: an origin holds its peer paused, where a
        port relaying collective phases sends pause frames that pause a few milliseconds
        (tune-retired congestion-0: 50-65 frames/s over 20 s of all-reduce phases, its
        pause-time counter flat, was named a pfc_storm). A watchdog's storm verdict is
        long pause by definition; a port whose exporter reports no pause time leaves
        frames as all there is (as before)."""
        if any(s.kind in self.at_once for s in direct):
            return True
        times = [s.metrics[f] for s in direct for f in PAUSE_TIME if f in s.metrics]
        return not times or max(times) >= self.switch_pause_us

    def spans(self, s: Symptom) -> list[tuple[float, float]]:
        """When a symptom was seen: from its first sign to its last, but for a symptom of an
        event rule, the instants of its events (its samples' times): two WJH drop events
        27 s apart are two blips, not 27 s of drops. Events closer than `join_gap_s` join
        into a stretch (`stretches`), so drops every second for half a minute still are
        half a minute of them."""
        if s.rule in self.event_rules:
            times = {s.start, s.last}.union(t for series in s.samples.values() for t, _ in series)
            return [(t, t) for t in sorted(times) if s.start <= t <= s.last]
        return [(s.start, s.end if s.end is not None else s.last)]

    def stretches(self, symptoms: list[Symptom]) -> list[tuple[float, float]]:
        """The symptoms' spans (`spans`), overlapping or near ones joined."""
        spans = sorted(x for s in symptoms for x in self.spans(s))
        if not spans:
            return []
        out = [list(spans[0])]
        for a, b in spans[1:]:
            if a <= out[-1][1] + self.join_gap_s:
                out[-1][1] = max(out[-1][1], b)
            else:
                out.append([a, b])
        return [(a, b) for a, b in out]

    def _pressed(self, key: str, direct: list[Symptom], ctx: Context) -> bool:
        """Whether `key` (`Context.pressed`, from every open candidate) was pressed while
        the evidence lasted: a switch paused or with a congested egress, or a NIC paused,
        relays pause and is no pfc_storm however long it sends; a switch port paused
        itself is congested behind the pause."""
        spans = ctx.pressed.get(key, ())
        gap = self.join_gap_s
        return any(a <= d + gap and c <= b + gap for a, b in spans for c, d in self.stretches(direct))

    def _corroborated(self, direct: list[Symptom]) -> float | None:
        """The first start of `witnesses` independent reports (rule, entity) that were
        seen at the same time, or None."""
        spans = sorted((a, b, (s.rule, s.entity.id)) for s in direct for a, b in self.spans(s))
        for i, (t, _, _) in enumerate(spans):
            live = {w for a, b, w in spans[:i + 1] if b + self.join_gap_s >= t}
            if len(live) >= self.witnesses:
                return min(a for a, b, w in spans[:i + 1] if b + self.join_gap_s >= t)
        return None

    def _host_link_down(self, ends: tuple[str, ...], direct: list[Symptom], ctx: Context) -> float | None:
        """A host link that stays down (a dead cable): when its host's own report of it
        down began, or None. See the module's docstring."""
        if ctx.admin_down.intersection(ends) or len(ends) != 2:
            return None
        topo = ctx.topology
        port = next((x for x in ends if topo.is_switch(device_of(x))), None)
        nic = next((x for x in ends if x != port), None)
        if port is None or nic is None:
            return None
        need = self.host_link_down_s
        reported = [s for s in direct if s.entity.id == nic and s.device == device_of(nic)]
        host = [a for a, b in self.stretches(reported) if b - a >= need]
        if not host:
            return None
        # The port must say so itself: a silent switch may be a collector gap over a port
        # taken down, whose admin-down report then stops too (seen on the tune split).
        down = [s for s in direct if s.entity.id == port and s.device == device_of(port)]
        if any(b - a >= need for a, b in self.stretches(down)):
            return host[0]
        return None

    def _switch_down(self, switch: str, direct: list[Symptom], ctx: Context) -> float | None:
        links, every = links_seen_down(switch, direct, ctx.topology)
        if len(links) >= max(self.switch_links_down, self.switch_links_share * len(every)):
            return min(s.start for s in direct if s.family == "link_state" and s.device != switch)
        return None
