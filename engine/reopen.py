"""Recently resolved incidents, kept for a while so that a fault that comes back continues
its incident instead of paging again (contract section 8: a fault is persistent or
repeated, the same entity again and again within minutes, and one fault is one incident).

A weak pause storm polled every 30 s lets its sustained-pause verdict drop for a sample
or two; its incident resolves a minute later and the verdict's return, two samples
after that, would open a second incident of the same cause on the same NIC. Instead,
a candidate whose leading cause and entity are those of an incident resolved less than
`within` seconds before the candidate's first evidence reopens that incident (same id,
status open again, the new symptoms beside the old ones). Pure: no clock, no I/O; its
state is a list of `IncidentState` in the correlator's checkpoint (`snapshot`; the
correlator restores them with `add`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from engine.incidents import Incident, IncidentState


def lead(inc: Incident) -> tuple[str, str] | None:
    """(cause, entity id) of an incident's leading root cause, or None."""
    if not inc.root_causes:
        return None
    top = inc.root_causes[0]
    return top.cause, top.entity.id


@dataclass
class Recent:
    """Resolved incidents by their leading cause and entity (the latest of each)."""

    by_lead: dict[tuple[str, str], Incident] = field(default_factory=dict)

    def add(self, inc: Incident) -> None:
        key = lead(inc)
        if key is not None and inc.resolved_at is not None:
            self.by_lead[key] = inc

    def take(self, candidate: Incident, *, within: float) -> Incident | None:
        """The resolved incident `candidate` continues (removed from here), or None: same
        leading cause and entity, resolved no more than `within` s before the
        candidate's first evidence."""
        key = lead(candidate)
        old = self.by_lead.get(key) if key is not None else None
        if old is None or candidate.opened_at > old.resolved_at + within:  # (`add` keeps resolved ones only)
            return None
        del self.by_lead[key]
        return old

    def expire(self, watermark: float, *, within: float) -> None:
        """Forget the incidents no candidate can continue any more: resolved more than
        2 x `within` s before `watermark` (a candidate is judged by its first evidence,
        which a verdict taken late dates back, by up to a level rule's window)."""
        for key in [k for k, inc in self.by_lead.items() if inc.resolved_at + 2 * within < watermark]:
            del self.by_lead[key]

    def snapshot(self) -> list[IncidentState]:
        return [inc.snapshot() for inc in self.by_lead.values()]
