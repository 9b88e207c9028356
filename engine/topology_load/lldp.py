"""`lldpctl -f json` (or `-f json0`) neighbours of every device, read as a topology.

Input: a folder with one file per device, named after it (`leaf01.json`), or one file
of documents one after another. A neighbours document does not name the device it was
taken on, so in one file each device's `lldpcli -f json show chassis` document
(`{"local-chassis": ...}`) comes before its neighbours; a document may also carry the
name itself (`{"hostname": "leaf01", "lldp": ...}`), and a file with one device's
neighbours only is named after that device.

Every local interface with exactly one neighbour is a cable `local:ifname --
remote:port`; both ends usually report it, and when they disagree neither is kept (a
warning names both). An interface with several neighbours is a shared segment, not a
cable. The remote port is the port id when its type is `ifname`, else its description
(Linux hosts send a MAC id and the interface name as description, Junos an ifIndex).
A remote chassis named `ns-2.example.com` is the device `ns-2` when that is the name
a document was taken on.

LLDP carries no roles: a name that gives one wins (spine01, leaf-1a, stor3); otherwise
a device that announces the Bridge or Router capability is a switch (leaf when a host
hangs off it, else spine), anything else a host; every such guess is a warning. Links
on a switch's management port (eth0, mgmt0, ma1, Management0/1, em0, fxp0) and devices
named like the out-of-band network (oob*, *mgmt*) are left out, with a warning.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from engine.jsonstream import JSONStreamError, documents
from engine.topology_load.common import (
    SWITCH_ROLES,
    TopologyError,
    TopologySpec,
    Warnings,
    names,
    role_from_name,
)

MANAGEMENT_PORTS = frozenset({"eth0", "mgmt0", "ma1", "management0", "management1", "em0", "fxp0"})
SWITCH_CAPABILITIES = frozenset({"bridge", "router"})


def is_lldp_document(doc: object) -> bool:
    return isinstance(doc, dict) and ("lldp" in doc or "local-chassis" in doc)


@dataclass
class _Port:
    """What one local interface sees: its neighbours (device, port, where)."""

    neighbours: list[tuple[str, str]] = field(default_factory=list)
    where: str = ""


@dataclass
class _Survey:
    """Everything read from the documents, before links and roles are decided."""

    ports: dict[tuple[str, str], _Port] = field(default_factory=dict)  # (device, ifname) -> neighbours
    caps: dict[str, set[str]] = field(default_factory=dict)  # device -> capabilities enabled
    local: list[str] = field(default_factory=list)  # devices a document was taken on, in order
    warnings: Warnings = field(default_factory=Warnings)


# --------------------------------------------------------------------- reading


def read_lldp(path: Path) -> TopologySpec:
    """The topology of a folder of per-device files, or of one file (module docstring)."""
    survey = _Survey()
    files = sorted(f for f in path.iterdir() if f.is_file() and not f.name.startswith(".")) if path.is_dir() else [path]
    if not files:
        raise TopologyError(f"{path}: no lldpctl JSON files in this folder")
    for f in files:
        _read_file(f, survey)
    return _spec(survey, source=str(path))


def lldp_spec(docs: list[tuple[object, int]], *, source: str, device: str | None) -> TopologySpec:
    """The topology of documents already read from `source` (`device`: its file's
    device, for a single neighbours document)."""
    survey = _Survey()
    _read_documents(docs, survey, source=source, device=device)
    return _spec(survey, source=source)


def _read_file(f: Path, survey: _Survey) -> None:
    try:
        text = f.read_text(encoding="utf-8")
        docs = list(documents(text))
    except (OSError, UnicodeDecodeError) as exc:
        raise TopologyError(f"{f}: cannot read lldpctl JSON: {exc}") from None
    except JSONStreamError as exc:
        raise TopologyError(f"{f}, line {exc.line}: {exc.message}") from None
    if not docs or not all(is_lldp_document(d) for d, _ in docs):
        raise TopologyError(f"{f}: not lldpctl JSON (expected 'lldp' or 'local-chassis' documents)")
    _read_documents(docs, survey, source=str(f), device=f.stem)


def _read_documents(docs: list[tuple[object, int]], survey: _Survey, *, source: str, device: str | None) -> None:
    neighbour_docs = sum(1 for d, _ in docs if isinstance(d, dict) and "lldp" in d)
    current: str | None = None
    for doc, line in docs:
        where = f"{source}, line {line}"
        if not is_lldp_document(doc):
            raise TopologyError(f"{where}: not an lldpctl JSON document (no 'lldp' or 'local-chassis')")
        if "local-chassis" in doc:
            held = _one(doc["local-chassis"])
            name, caps = _chassis(_one(held.get("chassis")) if isinstance(held, dict) else None, where=where)
            if name is None:
                raise TopologyError(f"{where}: local-chassis without a name")
            current = name
            survey.caps.setdefault(name, set()).update(caps)
        if "lldp" in doc:
            local = doc.get("hostname") or current or (device if neighbour_docs == 1 else None)
            if not isinstance(local, str) or not local:
                raise TopologyError(
                    f"{where}: which device are these neighbours of? Put its `lldpcli -f json show chassis` "
                    "before it, or give one file per device named after it"
                )
            _read_neighbours(doc["lldp"], local, survey, where=where)
            current = None


def _read_neighbours(lldp: object, local: str, survey: _Survey, *, where: str) -> None:
    survey.local.append(local)
    survey.caps.setdefault(local, set())
    for ifname, body in _interfaces(lldp, where=where):
        if not isinstance(body, dict):
            raise TopologyError(f"{where}: interface {ifname}: not an object")
        remote, caps = _chassis(_one(body.get("chassis")), where=f"{where}: interface {ifname}")
        port = _port_name(_one(body.get("port")))
        if remote is None or port is None:
            survey.warnings.add("neighbours without a chassis name or port, skipped", f"{local}:{ifname}")
            continue
        survey.caps.setdefault(remote, set()).update(caps)
        seen = survey.ports.setdefault((local, ifname), _Port(where=where))
        seen.neighbours.append((remote, port))


def _interfaces(lldp: object, *, where: str):
    """(ifname, body) of every neighbour entry, in `-f json` (keyed by name, a list when
    there are several) or `-f json0` (lists with a `name` attribute) form."""
    lldp = _one(lldp)
    if not isinstance(lldp, dict):
        raise TopologyError(f"{where}: 'lldp' must be an object")
    found = lldp.get("interface")
    if found is None:
        return  # no neighbours at all
    for item in found if isinstance(found, list) else [found]:
        if not isinstance(item, dict):
            raise TopologyError(f"{where}: an 'interface' entry is not an object")
        if isinstance(item.get("name"), str) and ("chassis" in item or "port" in item):
            yield item["name"], item
        else:
            yield from item.items()


def _chassis(chassis: object, *, where: str) -> tuple[str | None, set[str]]:
    """The chassis' name (its id when it has none) and enabled capabilities."""
    if not isinstance(chassis, dict):
        return None, set()
    if "id" in chassis or "name" in chassis and not isinstance(chassis.get("name"), dict):
        body, name = chassis, _text(chassis.get("name"))  # unnamed in -f json, or -f json0
    elif len(chassis) == 1:
        name, body = next(iter(chassis.items()))
    else:
        raise TopologyError(f"{where}: chassis is neither named nor has an id")
    if not isinstance(body, dict):
        raise TopologyError(f"{where}: chassis {name}: not an object")
    name = name or _text(_one(body.get("id")))
    caps = set()
    for cap in _many(body.get("capability")):
        if isinstance(cap, dict) and cap.get("enabled") in (True, "true", "on") and isinstance(cap.get("type"), str):
            caps.add(cap["type"].lower())
    return (name.strip() if isinstance(name, str) and name.strip() else None), caps


def _port_name(port: object) -> str | None:
    if not isinstance(port, dict):
        return None
    pid = _one(port.get("id"))
    kind, value = (pid.get("type"), _text(pid)) if isinstance(pid, dict) else (None, _text(pid))
    descr = _text(port.get("descr"))
    if kind == "ifname" and value:
        return value
    if descr and " " not in descr.strip():
        return descr.strip()
    return value or None


def _one(value: object) -> object:
    return (value[0] if value else None) if isinstance(value, list) else value


def _many(value: object) -> list:
    return value if isinstance(value, list) else ([] if value is None else [value])


def _text(value: object) -> str | None:
    value = _one(value)
    if isinstance(value, dict):
        value = value.get("value")
    return value if isinstance(value, str) else None


# -------------------------------------------------------------------- deciding


def _spec(survey: _Survey, *, source: str) -> TopologySpec:
    rename = _renames(survey)
    links, where = _links(survey, rename)
    devices = set(survey.local) | {rename(d) for d, _ in survey.ports} | {
        rename(r) for p in survey.ports.values() for r, _ in p.neighbours}
    caps: dict[str, set[str]] = {}
    for dev, found in survey.caps.items():
        caps.setdefault(rename(dev), set()).update(found)
    excluded = {d: "named like the management network" for d in sorted(devices) if _management_name(d)}
    roles = _roles(sorted(devices - set(excluded)), caps, links, survey.warnings)
    kept: list[tuple[str, str]] = []
    kept_where: list[str] = []
    for (a, b), place in zip(links, where, strict=True):
        ends = (a, b)
        if any(e.split(":", 1)[0] in excluded for e in ends):
            continue
        mgmt = [e for e in ends if roles.get(e.split(":", 1)[0]) in SWITCH_ROLES
                and e.split(":", 1)[1].lower() in MANAGEMENT_PORTS]
        if mgmt:
            survey.warnings.add("links on a switch's management port, left out", f"{a}--{b}")
            continue
        kept.append((a, b))
        kept_where.append(place)
    surveyed = tuple(dict.fromkeys(rename(d) for d in survey.local))
    cabled = set(surveyed) | {e.split(":", 1)[0] for link in kept for e in link}
    roles = {d: r for d, r in roles.items() if d in cabled}  # not those seen only on what was left out
    notes = survey.warnings.lines(source)
    if excluded:
        notes = (f"{source}: left out of the data fabric with their links: {names(sorted(excluded))}",) + notes
    return TopologySpec(roles=roles, links=kept, where=kept_where, warnings=notes, excluded=excluded,
                        surveyed=surveyed)


def _renames(survey: _Survey):
    """Remote chassis names onto the names documents were taken on (FQDN -> short)."""
    local = set(survey.local)
    short = {}
    for name in local:
        short.setdefault(name.split(".", 1)[0], name)

    def rename(name: str) -> str:
        if name in local:
            return name
        return short.get(name.split(".", 1)[0], name)
    return rename


def _links(survey: _Survey, rename) -> tuple[list[tuple[str, str]], list[str]]:
    """Each cable once; both ends must agree where both report."""
    claims: dict[str, str] = {}  # interface -> the peer it reports
    where: dict[str, str] = {}
    for (dev, ifname), port in survey.ports.items():
        me = f"{rename(dev)}:{ifname}"
        if len(port.neighbours) > 1:
            survey.warnings.add("interfaces with several neighbours (a shared segment, not a cable), left out", me)
            continue
        remote, rport = port.neighbours[0]
        claims[me], where[me] = f"{rename(remote)}:{rport}", port.where
    links: list[tuple[str, str]] = []
    places: list[str] = []
    taken: set[str] = set()
    for me, peer in claims.items():
        if me in taken or peer in taken:
            if me not in taken:
                survey.warnings.add("interfaces whose neighbour is already cabled elsewhere, left out", f"{me} -> {peer}")
            continue
        back = claims.get(peer)
        if back is not None and back != me:
            survey.warnings.add("cables whose two ends disagree, left out",
                                f"{me} sees {peer}, {peer} sees {back}")
            taken.update((me, peer))
            continue
        if peer == me:
            continue
        taken.update((me, peer))
        links.append((me, peer))
        places.append(where[me])
    return links, places


def _management_name(device: str) -> bool:
    low = device.lower()
    return low.startswith("oob") or "mgmt" in low


def _roles(devices: list[str], caps: dict[str, set[str]], links: list[tuple[str, str]],
           warnings: Warnings) -> dict[str, str]:
    neighbours: dict[str, set[str]] = {}
    for a, b in links:
        da, db = a.split(":", 1)[0], b.split(":", 1)[0]
        neighbours.setdefault(da, set()).add(db)
        neighbours.setdefault(db, set()).add(da)
    roles: dict[str, str] = {}
    switches: list[str] = []
    for dev in devices:
        named = role_from_name(dev)
        if named != "host":
            roles[dev] = named
        elif caps.get(dev, set()) & SWITCH_CAPABILITIES:
            switches.append(dev)
        else:
            roles[dev] = "host"
            if "station" not in caps.get(dev, ()):
                warnings.add("no role in the name and no capability announced: loaded as hosts", dev)
    for dev in switches:
        below = any(roles.get(n) in ("host", "storage") for n in neighbours.get(dev, ()))
        roles[dev] = "leaf" if below else "spine"
        warnings.add("switches by their LLDP capability, tier guessed from what hangs off them",
                     f"{dev} ({roles[dev]})")
    return roles
