"""Is an incident's root cause under maintenance? Pure: windows come in as data.

Two ways a root cause is in maintenance:

- a window (`Window`: an entity, a time range) names the cause's entity, one of its
  interfaces, or the device of one of them (a window on `leaf03` covers `leaf03`,
  `leaf03:swp1` and every link with an end on `leaf03`; a window on `leaf03:swp1` covers
  that interface and its link), and the incident opened within the window;
- an interface of the cause (or, for an interface, its link's peer) reports admin-down:
  an operator took it down (`switch_port` `admin_status == "down"`, rule `port_admin_down`).

The correlator asks once per published change; a mark sticks to the incident (an
incident opened by maintenance work stays marked after the port comes back up).
"""
from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from contract.entities import INTERFACE, LINK, device_of
from contract.times import rfc3339
from engine.types import Entity

ADMIN_DOWN_FAMILY = "maintenance"  # symptoms of this family say "taken down by an operator"


@dataclass(frozen=True, slots=True)
class Window:
    id: str
    entity: str  # a device, an interface (`dev:port`) or a link id (`a--b`)
    start: float  # seconds since the epoch
    end: float
    note: str = ""

    def covers(self, at: float) -> bool:
        return self.start <= at <= self.end


def interfaces_of(entity: Entity, peer=None) -> set[str]:
    """The interfaces an entity is made of: a link's two ends; an interface and its peer
    (when `peer`, e.g. `Topology.peer`, knows it); nothing for devices and jobs."""
    if entity.kind == LINK:
        return set(entity.id.split("--", 1))
    if entity.kind == INTERFACE:
        other = peer(entity.id) if peer is not None else None
        return {entity.id} | ({other} if other else set())
    return set()


def scope(entity: Entity, peer=None) -> set[str]:
    """Every id a window may name to cover `entity`: itself, its interfaces, their devices."""
    interfaces = interfaces_of(entity, peer)
    return {entity.id} | interfaces | {device_of(i) for i in interfaces}


def window_reason(entity: Entity, opened_at: float, windows: Iterable[Window], peer=None) -> str | None:
    """Why `entity` is in maintenance by a window covering `opened_at`, or None."""
    ids = scope(entity, peer)
    for w in sorted(windows, key=lambda w: (w.start, w.id)):
        if w.entity in ids and w.covers(opened_at):
            note = f": {w.note}" if w.note else ""
            return f"maintenance window {w.id} on {w.entity} until {rfc3339(w.end)}{note}"
    return None


def admin_down_reason(entity: Entity, admin_down: Collection[str] | Mapping[str, object], peer=None) -> str | None:
    """Why `entity` is in maintenance by an admin-down interface, or None."""
    down = sorted(i for i in interfaces_of(entity, peer) if i in admin_down)
    return f"{', '.join(down)} admin-down" if down else None


@dataclass(frozen=True)
class StaticWindows:
    """The `engine.ports.MaintenanceSource` of a fixed list (tests, `evaluate`)."""

    items: tuple[Window, ...] = ()

    def windows(self) -> tuple[Window, ...]:
        return self.items
