"""The engine's own form: `{"devices": [{"id", "role"}], "links": [{"id"?, "a", "b"}]}`,
as `Topology.to_dict` writes it."""
from __future__ import annotations

from engine.topology_load.common import TopologyError, TopologySpec, canonical_role



def parse_own(doc: dict, *, source: str) -> TopologySpec:
    """`{"devices": [{"id", "role"}], "links": [{"id"?, "a", "b"}]}` (see Topology.to_dict)."""
    devices = doc.get("devices") or []
    links = doc.get("links") or []
    if not isinstance(devices, list) or not isinstance(links, list):
        raise TopologyError(f"{source}: 'devices' and 'links' must be lists")
    roles: dict[str, str] = {}
    for i, dev in enumerate(devices):
        if not isinstance(dev, dict) or not isinstance(dev.get("id"), str) or not dev["id"]:
            raise TopologyError(f"{source}: devices[{i}]: needs a string 'id'")
        role = canonical_role(dev.get("role"))
        if role is None:
            raise TopologyError(f"{source}: devices[{i}] ({dev['id']}): unknown role {dev.get('role')!r}")
        roles[dev["id"]] = role
    pairs: list[tuple[str, str]] = []
    where: list[str] = []
    for i, link in enumerate(links):
        a, b = _own_link(link, label=f"{source}: links[{i}]")
        pairs.append((a, b))
        where.append(f"{source}: links[{i}]")
    return TopologySpec(roles=roles, links=pairs, where=where)


def _own_link(link: object, *, label: str) -> tuple[str, str]:
    if not isinstance(link, dict) or not isinstance(link.get("a"), str) or not isinstance(link.get("b"), str):
        raise TopologyError(f"{label}: needs string interface ids 'a' and 'b'")
    a, b = link["a"], link["b"]
    expected = "--".join(sorted((a, b)))
    if link.get("id") is not None and link["id"] != expected:
        raise TopologyError(f"{label}: id {link['id']!r} does not match its ends (expected {expected!r})")
    return a, b
