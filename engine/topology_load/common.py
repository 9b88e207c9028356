"""What every topology reader shares: the roles, the spec a reader returns, its errors
and the warnings it collects."""
from __future__ import annotations

from dataclasses import dataclass, field

ROLES = ("superspine", "spine", "leaf", "host", "storage")
SWITCH_ROLES = frozenset({"superspine", "spine", "leaf"})
ROLE_ALIASES = {"server": "host", "tor": "leaf", "exit": "leaf", "border": "leaf"}
EXPECTED = f"expected one of {', '.join(ROLES)}"
_SHOWN = 8  # device names a warning lists before "(+N more)"


class TopologyError(ValueError):
    """A topology that cannot be read; the message names the file, line or item."""


@dataclass(frozen=True, slots=True)
class TopologySpec:
    """Devices with roles and links as interface-id pairs, plus where each link came
    from (so a later check can point at the offending line). `excluded` names the
    devices a file holds that are not part of the data fabric (why, e.g. the Air
    function), `warnings` what a reader guessed or left out, `surveyed` the devices
    whose own view of their cabling this is (lldpctl; empty for a declared file)."""

    roles: dict[str, str]
    links: list[tuple[str, str]]
    where: list[str]
    warnings: tuple[str, ...] = ()
    excluded: dict[str, str] = field(default_factory=dict)
    surveyed: tuple[str, ...] = ()


def canonical_role(value: object) -> str | None:
    """The engine's role for a role/function/group value, None if not one we know."""
    if not isinstance(value, str):
        return None
    role = value.strip().lower()
    role = ROLE_ALIASES.get(role, role)
    return role if role in ROLES else None


def role_from_name(name: str) -> str:
    """Role guessed from a device name, for devices no file gives a role:
    superspine*/super-spine* -> superspine, spine* -> spine, leaf*/tor*/exit*/border*
    -> leaf, stor* -> storage, anything else -> host."""
    low = name.lower()
    if low.startswith(("superspine", "super-spine")):
        return "superspine"
    if low.startswith("spine"):
        return "spine"
    if low.startswith(("leaf", "tor", "exit", "border")):
        return "leaf"
    if low.startswith("stor"):
        return "storage"
    return "host"


def switch_tier_from_name(name: str) -> str | None:
    """The switch role a name gives (spine01 -> spine), None when it names no tier."""
    role = role_from_name(name)
    return role if role in SWITCH_ROLES else None


class Warnings:
    """Warnings grouped by what happened, each listing the devices it concerns
    (`add("roles guessed from names", "nix (host)")`), so a fabric of 2,000 unnamed
    hosts gives one line, not 2,000."""

    def __init__(self) -> None:
        self._groups: dict[str, list[str]] = {}

    def add(self, what: str, item: str) -> None:
        self._groups.setdefault(what, []).append(item)

    def lines(self, source: str) -> tuple[str, ...]:
        return tuple(f"{source}: {what}: {names(items)}" for what, items in self._groups.items())


def names(items: list[str]) -> str:
    """`a, b, c` or `a, b, ... (+12 more)`."""
    shown = ", ".join(items[:_SHOWN])
    return shown if len(items) <= _SHOWN else f"{shown} (+{len(items) - _SHOWN} more)"
