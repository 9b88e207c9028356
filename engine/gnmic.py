"""gnmic's `event` output format -> the documents the JSON path reads.

A message is a JSON array of events `{name, timestamp (ns), tags, values {path: value}}`.
Each event becomes one record: measurement = the event's name (gnmic's subscription name),
tags = the event's tags plus `path` (the values' common parent path, keys `[...]` and
module prefixes `openconfig-interfaces:` removed), fields = the paths' leaf names with `-`
written `_` (`/interfaces/interface/state/counters/in-octets` -> `in_octets`). gnmic has
no collector `host` tag: when an event has none, `host` is its `source` with any `:port`
stripped. Mappings (engine/mapping.py) then turn the record into a contract measurement.
"""
from __future__ import annotations

import re

_KEYS = re.compile(r"\[[^\]]*\]")


def is_events(doc: object) -> bool:
    """A gnmic event array (a list whose first item is an object with `values`)."""
    return doc.__class__ is list and bool(doc) and isinstance(doc[0], dict) and "values" in doc[0]


def event_document(event: object) -> dict | tuple[str, str]:
    """One event as a document, or (reason, detail)."""
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
    fields = {p[-1].replace("-", "_"): v for p, v in zip(paths, values.values())}
    tags["path"] = "/" + "/".join(_common_parent(paths))
    if not tags.get("host") and isinstance(tags.get("source"), str):
        tags["host"] = strip_port(tags["source"])
    doc = {"name": event.get("name"), "tags": tags, "fields": fields}
    if "timestamp" in event:
        doc["timestamp"] = event["timestamp"]
    return doc


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
    elements = (e.rpartition(":")[2] for e in path.split("/"))  # (`module:` prefixes dropped)
    return [e for e in elements if e]


def _common_parent(paths: list[list[str]]) -> list[str]:
    first = paths[0][:-1]
    n = len(first)
    for p in paths[1:]:
        parent = p[:-1]
        n = min(n, len(parent))
        for i in range(n):
            if parent[i] != first[i]:
                n = i
                break
    return first[:n]
