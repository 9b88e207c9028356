"""gnmic's `event` output format -> the documents the JSON path reads.

A message is a JSON array of events `{name, timestamp (ns), tags, values {path: value}}`.
Each event becomes one record per parent path of its values (one, mostly; a sonic-gnmi
answer for `COUNTERS/Ethernet*/Queues` holds every queue's hash, `.../Queues/Ethernet0:3/
SAI_QUEUE_STAT_PACKETS`, one record each): measurement = the event's name (gnmic's
subscription name), tags = the event's tags plus `path` (that parent, keys `[...]` and
module prefixes `openconfig-interfaces:` removed; `Ethernet0:3` is a key, not a prefix: a
YANG name never starts with a digit), fields = the paths' leaf names with `-` written `_`
(`/interfaces/interface/state/counters/in-octets` -> `in_octets`). gnmic has
no collector `host` tag: when an event has none, `host` is its `source` with any `:port`
stripped. Mappings (engine/mapping.py) then turn the record into a contract measurement.
"""
from __future__ import annotations

import re

_KEYS = re.compile(r"\[[^\]]*\]")
_PREFIX = re.compile(r"^[^:]*:(?=[A-Za-z_]|$)")  # `module:` before a YANG name (never before a digit)


def is_events(doc: object) -> bool:
    """A gnmic event array (a list whose first item is an object with `values`)."""
    return doc.__class__ is list and bool(doc) and isinstance(doc[0], dict) and "values" in doc[0]


def event_documents(event: object) -> list[dict] | tuple[str, str]:
    """One event as documents (one per parent path), or (reason, detail)."""
    if not isinstance(event, dict):
        return "bad_gnmic_event", f"an event is a {type(event).__name__}, not an object"
    values = event.get("values")
    if not isinstance(values, dict) or not values:
        return "bad_gnmic_event", "'values' is missing, empty or not an object"
    tags = event.get("tags", {})
    if not isinstance(tags, dict):
        return "bad_gnmic_event", "'tags' is not an object"
    tags = dict(tags)
    paths = [_elements(p) for p in values]
    if not all(paths):
        return "bad_gnmic_event", "a value's path is empty"
    if not tags.get("host") and isinstance(tags.get("source"), str):
        tags["host"] = strip_port(tags["source"])
    by_parent: dict[str, dict] = {}
    for p, v in zip(paths, values.values()):
        by_parent.setdefault("/" + "/".join(p[:-1]), {})[p[-1].replace("-", "_")] = v
    docs = []
    for parent, fields in by_parent.items():
        doc = {"name": event.get("name"), "tags": {**tags, "path": parent}, "fields": fields}
        if "timestamp" in event:
            doc["timestamp"] = event["timestamp"]
        docs.append(doc)
    return docs


def strip_port(address: str) -> str:
    """`172.17.0.100:57400` -> `172.17.0.100`; `[fe80::1]:830` -> `fe80::1`; a bare IPv6 stays."""
    if address.startswith("[") and "]" in address:
        return address[1:address.index("]")]
    host, sep, port = address.rpartition(":")
    if sep and port.isdigit() and ":" not in host:
        return host
    return address


def _elements(path: str) -> list[str]:
    if not isinstance(path, str):
        return []
    path = _KEYS.sub("", path)
    elements = (_PREFIX.sub("", e) for e in path.split("/"))
    return [e for e in elements if e]
