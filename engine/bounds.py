"""The bounds of one input record, checked before any work is spent on it.

A record that passes these is small enough to parse, keep, re-encode (the publisher) and
send to Kafka (under the broker's 1 MiB message limit). Each bound has its own reject
reason, and every reject's detail is cut to DETAIL_CHARS, never the whole bad value.
"""
from __future__ import annotations

MAX_LINE_BYTES = 1_000_000  # a line / message; under the broker's max.message.bytes (1 MiB + 12)
MAX_BATCH = 10_000  # members of one {"metrics": [...]} batch (Telegraf sends 1000 by default)
MAX_DEPTH = 3  # containers nested in one metric: the metric, its tags/fields, one level more
MAX_FIELDS = 1024  # fields of one metric (an mlx5 NIC has about 300 counters)
MAX_TAGS = 64
MAX_KEY_CHARS = 256  # a measurement name, a tag or field key
MAX_TAG_CHARS = 4096  # a tag value
MAX_STRING_CHARS = 65_536  # a string field (a job's expanded node list, a syslog message)
MAX_MESSAGE_HOSTS = 262_144  # hosts the jobs of one scheduler document (squeue, pods) place, together
DETAIL_CHARS = 200

_CONTAINERS = (dict, list)


def detail(text: str) -> str:
    """A reject's detail, bounded."""
    return text if len(text) <= DETAIL_CHARS else text[: DETAIL_CHARS - 3] + "..."


def line_size(line: bytes | str) -> int:
    """Bytes of a line without its trailing whitespace (a str is measured as UTF-8)."""
    if line.__class__ is not bytes:
        line = str(line).encode("utf-8", "surrogatepass")
    return len(line.rstrip())


def too_deep(doc: object, limit: int = MAX_DEPTH) -> bool:
    """Whether containers nest in `doc` deeper than `limit` (doc itself is level 1); walks
    no further than the limit."""
    level = [doc] if doc.__class__ in _CONTAINERS else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        nxt = []
        for c in level:
            for v in (c.values() if c.__class__ is dict else c):
                if v.__class__ in _CONTAINERS:
                    nxt.append(v)
        level = nxt
    return False


def has_surrogate(text: str) -> bool:
    """A lone UTF-16 surrogate (only the standard parser lets one through a \\ud800 escape)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def check_sizes(name: str, tags: dict, fields: dict) -> tuple[str, str] | None:
    """(reason, detail) of the first size bound a metric breaks, or of a lone surrogate
    in one of its strings; None when it keeps them all."""
    if len(name) > MAX_KEY_CHARS:
        return "key_too_long", f"measurement name of {len(name)} characters (at most {MAX_KEY_CHARS})"
    if len(tags) > MAX_TAGS:
        return "too_many_tags", f"{len(tags)} tags (at most {MAX_TAGS})"
    if len(fields) > MAX_FIELDS:
        return "too_many_fields", f"{len(fields)} fields (at most {MAX_FIELDS})"
    for where, items, most in (("tag", tags, MAX_TAG_CHARS), ("field", fields, MAX_STRING_CHARS)):
        for k, v in items.items():
            if len(k) > MAX_KEY_CHARS:
                return "key_too_long", f"{where} key {k[:40]!r}... of {len(k)} characters (at most {MAX_KEY_CHARS})"
            if v.__class__ is str and len(v) > most:
                return "string_too_long", f"{where} {k[:40]!r} is a string of {len(v)} characters (at most {most})"
    return None


def check_strings(name: str, tags: dict, fields: dict) -> tuple[str, str] | None:
    """(reason, detail) when a name, key or string value holds a lone surrogate."""
    if has_surrogate(name):
        return "bad_string", "the measurement name holds a lone UTF-16 surrogate"
    for where, items in (("tag", tags), ("field", fields)):
        for k, v in items.items():
            if has_surrogate(k) or (v.__class__ is str and has_surrogate(v)):
                return "bad_string", f"{where} {k.encode('utf-8', 'replace')[:40]!r} holds a lone UTF-16 surrogate"
    return None
