"""Stage 1 of the pipeline: raw bytes -> validated `Metric`s (or `Reject`s with a reason).

Contract section 1: Telegraf JSON metrics, single or batched, with timestamps in s, ms,
us or ns (inferred from magnitude) or RFC 3339 strings.
"""
from __future__ import annotations

import json
import math
from datetime import datetime

from engine.types import Metric, Reject

# Plausible event times: 2000-01-01 .. 2100-01-01. Anything else is a unit or clock bug.
MIN_TS = 946_684_800.0
MAX_TS = 4_102_444_800.0

_isfinite = math.isfinite


def seconds(value: object) -> float:
    """Event time in seconds from a Telegraf timestamp; ValueError says why not."""
    if isinstance(value, bool):
        raise ValueError("timestamp is a boolean")
    if isinstance(value, (int, float)):
        ts = float(value)
        if not _isfinite(ts):
            raise ValueError(f"timestamp is {value}")
        mag = abs(ts)
        if mag >= 1e17:
            ts /= 1e9
        elif mag >= 1e14:
            ts /= 1e6
        elif mag >= 1e11:
            ts /= 1e3
    elif isinstance(value, str):
        text = value.strip()
        try:
            ts = datetime.fromisoformat(text.replace("z", "Z")).timestamp()
        except ValueError:
            try:
                return seconds(float(text))
            except ValueError:
                raise ValueError(f"timestamp {value!r} is neither a number nor RFC 3339") from None
        if datetime.fromisoformat(text.replace("z", "Z")).tzinfo is None:
            raise ValueError(f"timestamp {value!r} has no time zone")
    else:
        raise ValueError(f"timestamp has type {type(value).__name__}")
    if not MIN_TS <= ts <= MAX_TS:
        raise ValueError(f"timestamp {value!r} is outside 2000..2100 in every unit")
    return ts


def parse_line(line: bytes | str) -> tuple[list[Metric], list[Reject]]:
    """One line of a recorded file (or one Kafka message value)."""
    try:
        doc = json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        return [], [Reject("bad_json", str(exc), _text(line))]
    return parse_document(doc, line)


def parse_document(doc: object, raw: bytes | str = "") -> tuple[list[Metric], list[Reject]]:
    if isinstance(doc, dict) and "metrics" in doc and "name" not in doc:
        batch = doc["metrics"]
        if not isinstance(batch, list):
            return [], [Reject("bad_batch", "'metrics' is not a list", _text(raw))]
        items = batch
    else:
        items = [doc]
    metrics: list[Metric] = []
    rejects: list[Reject] = []
    for item in items:
        result = parse_metric(item)
        if isinstance(result, Metric):
            metrics.append(result)
        else:
            reason, detail = result
            rejects.append(Reject(reason, detail, _text(raw) if len(items) == 1 else _dump(item)))
    return metrics, rejects


def parse_metric(doc: object) -> Metric | tuple[str, str]:
    """A Metric, or (reason, detail) naming exactly what is wrong."""
    if not isinstance(doc, dict):
        return "not_an_object", f"expected a JSON object, got {type(doc).__name__}"
    name = doc.get("name")
    if not isinstance(name, str) or not name:
        return "missing_name", "'name' is missing or not a non-empty string"
    tags = doc.get("tags")
    if not isinstance(tags, dict):
        return "bad_tags", "'tags' is missing or not an object"
    host = tags.get("host")
    if not isinstance(host, str) or not host:
        return "missing_host", "'tags.host' is missing or not a non-empty string"
    for k, v in tags.items():
        if not isinstance(v, str):
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                tags[k] = str(v)
            else:
                return "bad_tags", f"tag {k!r} is {type(v).__name__}, not a string"
    fields = doc.get("fields")
    if not isinstance(fields, dict) or not fields:
        return "bad_fields", "'fields' is missing, empty or not an object"
    for k, v in fields.items():
        if v.__class__ is float:
            if not _isfinite(v):
                return "non_finite_field", f"field {k!r} is {v}"
        elif not isinstance(v, (int, str, bool)):
            return "bad_fields", f"field {k!r} is {type(v).__name__}"
    if "timestamp" not in doc:
        return "missing_timestamp", "'timestamp' is missing"
    try:
        ts = seconds(doc["timestamp"])
    except ValueError as exc:
        return "bad_timestamp", str(exc)
    series = name + "|" + "|".join(f"{k}={tags[k]}" for k in sorted(tags))
    return Metric(name=name, tags=tags, fields=fields, ts=ts, series=series)


def _text(raw: bytes | str) -> str:
    if isinstance(raw, bytes):
        return raw.decode("utf-8", "replace")
    return raw


def _dump(item: object) -> str:
    try:
        return json.dumps(item, allow_nan=True)
    except (TypeError, ValueError):
        return repr(item)
