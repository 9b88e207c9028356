"""A declared topology against the cabling devices report (lldpctl): which declared links
are there, missing or miswired, and which cables no file declares.

Names are matched loosely before links are compared: a device by its exact name, else
its short name (`leaf01.example.com` -> `leaf01`), else case-insensitively; an
interface by its exact name, else by its SR Linux long form (`ethernet-1/1` is
containerlab's `e1-1`). What a device cannot see is not held against the file: a
declared link neither of whose devices reported is `unverified`, never `missing`.

Verdicts, per declared link: `matching` (the two ends see each other), `miswired`
(one end or both see something else: the cables seen there are listed, and per end
what it was declared and seen cabled to, and where LLDP said so), `missing`
(a device on it reported, and neither end sees a neighbour), `unverified`. Per
reported cable no link declares, and not already part of a miswiring: `extra`, or
`non_fabric` when it touches a device the declared file leaves out of the fabric.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from engine.topology import Topology
from engine.topology_load import TopologySpec
from engine.types import device_of, link_id

_SRL_LONG = re.compile(r"ethernet-(\d+)/(\d+)")


@dataclass
class _Names:
    """Observed names onto declared ones."""

    devices: dict[str, str]  # every spelling -> the declared name
    interfaces: dict[str, dict[str, str]] = field(default_factory=dict)  # device -> canonical -> declared

    @classmethod
    def of(cls, declared: Topology) -> _Names:
        known = declared.devices() + sorted(declared.excluded)
        devices: dict[str, str] = {}
        for name in known:
            devices.setdefault(name.lower(), name)
            devices.setdefault(name.split(".", 1)[0].lower(), name)
        names = cls(devices=devices)
        for dev in declared.devices():
            for iface in declared.interfaces(dev):
                names.interfaces.setdefault(dev, {})[_canonical(iface.split(":", 1)[1])] = iface.split(":", 1)[1]
        return names

    def device(self, name: str) -> str:
        low = name.lower()
        return self.devices.get(low) or self.devices.get(low.split(".", 1)[0]) or name

    def interface(self, iface: str) -> str:
        dev, name = iface.split(":", 1)
        dev = self.device(dev)
        return f"{dev}:{self.interfaces.get(dev, {}).get(_canonical(name), name)}"


def _canonical(ifname: str) -> str:
    m = _SRL_LONG.fullmatch(ifname.lower())
    return f"e{m.group(1)}-{m.group(2)}" if m else ifname.lower()


def cross_check(declared: Topology, observed: TopologySpec) -> dict:
    """The report (module docstring) of `observed` cabling, as seen by the devices it
    surveyed, against `declared`."""
    names = _Names.of(declared)
    seen: dict[str, str] = {}  # interface -> the peer it was seen cabled to
    where: dict[str, str] = {}
    for (a, b), place in zip(observed.links, observed.where, strict=True):
        a, b = names.interface(a), names.interface(b)
        seen[a], seen[b] = b, a
        where[link_id(a, b)] = place
    reporters = {names.device(d) for d in observed.surveyed}
    report: dict[str, list] = {k: [] for k in ("matching", "miswired", "missing", "unverified", "extra", "non_fabric")}
    explained: set[str] = set()  # observed links reported as part of a miswiring
    for link in declared.links():
        a, b = declared.link_ends(link)
        if seen.get(a) == b:
            report["matching"].append(link)
        elif a in seen or b in seen:
            found = sorted({link_id(x, seen[x]) for x in (a, b) if x in seen})
            explained.update(found)
            report["miswired"].append({"link": link, "observed": found, "where": [where[f] for f in found],
                                       "ends": [_end(x, declared.peer(x), seen, where) for x in (a, b)]})
        elif device_of(a) in reporters or device_of(b) in reporters:
            by = sorted({device_of(x) for x in (a, b)} & reporters)
            report["missing"].append({"link": link, "not_seen_by": by})
        else:
            report["unverified"].append(link)
    declared_links = set(declared.links())
    for link in sorted(where):
        if link in declared_links or link in explained:
            continue
        a, b = link.split("--")
        item = {"link": link, "where": where[link]}
        off = sorted({device_of(x) for x in (a, b)} & set(declared.excluded))
        if off:
            report["non_fabric"].append(item | {"devices": off})
        else:
            unknown = sorted({device_of(x) for x in (a, b)} - set(declared.devices()))
            report["extra"].append(item | ({"unknown_devices": unknown} if unknown else {}))
    summary = {k: len(v) for k, v in report.items()}
    summary |= {"declared_links": len(declared_links), "observed_links": len(where), "reporting_devices": len(reporters)}
    consistent = not (report["miswired"] or report["missing"] or report["extra"])
    return {"consistent": consistent, "summary": summary, **report}


def _end(iface: str, declared_peer: str | None, seen: dict[str, str], where: dict[str, str]) -> dict:
    """One end of a miswired link: its declared peer against the one LLDP reports (None:
    no neighbour seen there) and the lldpctl document that reported it."""
    observed = seen.get(iface)
    return {"interface": iface, "declared_peer": declared_peer, "observed_peer": observed,
            "lldp": where[link_id(iface, observed)] if observed is not None else None}
