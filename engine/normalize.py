"""Stage 1 of the pipeline: raw bytes -> validated `Metric`s (or `Reject`s with a reason).

Contract section 1: Telegraf JSON metrics, single or batched, with timestamps in s, ms,
us or ns (inferred from magnitude) or RFC 3339 strings.
"""
from __future__ import annotations

import json
import math
from typing import Annotated, Callable

import msgspec

try:  # orjson is several times faster; the standard parser is the fallback and the judge
    from orjson import loads as _fast_loads
except ImportError:  # pragma: no cover
    _fast_loads = json.loads
_CHECK_FLOATS = _fast_loads is json.loads  # orjson refuses NaN and Infinity itself

from contract import times
from engine.bounds import (
    MAX_BATCH,
    MAX_FIELDS,
    MAX_KEY_CHARS,
    MAX_LINE_BYTES,
    MAX_STRING_CHARS,
    MAX_TAG_CHARS,
    MAX_TAGS,
    check_sizes,
    check_strings,
    detail,
    line_size,
    too_deep,
)
from engine import gnmic, lineproto
from engine.jobs import JobError, job_from_placement
from engine.types import Metric, Reject

# Plausible event times: 2000-01-01 .. 2100-01-01. Anything else is a unit or clock bug.
MIN_TS, MAX_TS = times.MIN_TS, times.MAX_TS

_isfinite = math.isfinite
_I64_MIN, _U64_MAX = -(2**63), 2**64 - 1  # the integers orjson keeps as integers


def seconds(value: object) -> float:
    """Event time in seconds from a Telegraf timestamp; ValueError says why not."""
    if isinstance(value, bool):
        raise ValueError("timestamp is a boolean")
    if isinstance(value, (int, float)):
        if value.__class__ is int and not -1e30 < value < 1e30:  # (float() of a 400-digit int overflows)
            raise ValueError(f"timestamp is an integer of {value.bit_length()} bits, beyond any unit")
        ts = float(value)
        if not _isfinite(ts):
            raise ValueError(f"timestamp is {value}")
        ts = times.epoch_seconds(ts)
    elif isinstance(value, str):
        text = value.strip()
        if not text.isascii():  # float() and fromisoformat() read other scripts' digits too
            raise ValueError(f"timestamp {detail(value)!r} has characters other than ASCII")
        try:
            ts = times.parse_rfc3339(text)
        except times.NoTimeZone:
            raise ValueError(f"timestamp {detail(value)!r} has no time zone") from None
        except ValueError:
            try:
                return seconds(float(text))
            except ValueError:
                raise ValueError(f"timestamp {detail(value)!r} is neither a number nor RFC 3339") from None
    else:
        raise ValueError(f"timestamp has type {type(value).__name__}")
    if not MIN_TS <= ts <= MAX_TS:
        raise ValueError(f"timestamp {detail(repr(value))} is outside 2000..2100 in every unit")
    return ts


class _NonFinite:
    """Stands in for a NaN/Infinity literal so the record is rejected with that reason."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


JOB_PLACEMENT = "job_placement"
_MISSING = object()
_S_FIRST, _S_LAST = int(MIN_TS), int(MAX_TS)
_MS_FIRST, _MS_LAST = _S_FIRST * 10**3, _S_LAST * 10**3
_US_FIRST, _US_LAST = _S_FIRST * 10**6, _S_LAST * 10**6
_NS_FIRST, _NS_LAST = _S_FIRST * 10**9, _S_LAST * 10**9
_SERIES_MEMO = 200_000  # series a Parser remembers at most (then forgets all at once)
_KEYS_MEMO = 100_000  # field keys a Parser remembers checked at most (likewise)
_SCALARS = frozenset((int, float, str, bool))
_STRINGS = frozenset((str,))


# The hot path: a typed msgspec decode of the common record (alone or in a batch). msgspec
# checks the types in C while parsing (scalar fields, a numeric timestamp, no other keys;
# the tags' text is checked as an object of strings the first time it is seen), so a
# record it accepts needs none of parse_metric's type checks. It accepts a subset of what
# parse_metric accepts, with the same values: anything else (a batch, a numeric tag, an
# empty name or host, NaN, invalid JSON, ...) falls back to orjson + parse_metric, which
# alone decides every reject. Integers are bounded to int64 because orjson turns integers
# beyond 64 bits into floats (msgspec would keep them ints); msgspec refuses NaN, Infinity
# and numbers that overflow a double, as orjson does.
# The size bounds of engine.bounds are msgspec constraints here (checked in C, the same
# as check_sizes: a record breaking one goes to the general path, which names it).
_Int64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
_Key = Annotated[str, msgspec.Meta(max_length=MAX_KEY_CHARS)]
_Name = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_KEY_CHARS)]
_FieldText = Annotated[str, msgspec.Meta(max_length=MAX_STRING_CHARS)]
_TagText = Annotated[str, msgspec.Meta(max_length=MAX_TAG_CHARS)]


class _Record(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    name: _Name
    tags: msgspec.Raw  # its JSON text: checked and decoded once per distinct text (`_typed`)
    # (its keys are measured in `_typed`: a key with a constraint is decoded anew each
    # time, one unconstrained is taken from msgspec's cache of short keys, shared by records)
    fields: Annotated[dict[str, _Int64 | float | _FieldText | bool], msgspec.Meta(max_length=MAX_FIELDS)]
    timestamp: _Int64 | float


class _Batch(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    metrics: Annotated[list[_Record], msgspec.Meta(max_length=MAX_BATCH)]


_decode_record = msgspec.json.Decoder(_Record).decode
_decode_batch = msgspec.json.Decoder(_Batch).decode  # Telegraf's batch format, what the publisher sends
_decode_tags = msgspec.json.Decoder(Annotated[dict[_Key, _TagText], msgspec.Meta(max_length=MAX_TAGS)]).decode
class Parser:
    """The one judge of input lines, with the memo its owner keeps: (measurement, tags'
    JSON text) -> (tags, series key) of checked tags. Every record of a series shares one
    tags dict (read-only from here on): its text is hashed, not rebuilt and hashed as a
    dict of fresh strings, about a tenth of a worker's parse time. Whoever parses a stream
    owns one (a detect stage, the publisher, training); the memo forgets everything at
    `_SERIES_MEMO` series, so hostile tags cannot grow it without bound. A second memo
    keeps each measurement's field keys found within MAX_KEY_CHARS (`_short`, up to
    `_KEYS_MEMO` keys), so a record's keys are measured only when one is new."""

    __slots__ = ("_tags", "_keys", "_key_count", "_heads", "_read_fields")

    def __init__(self) -> None:
        self._tags: dict[tuple[str, bytes], tuple[dict[str, str], str]] = {}
        self._keys: dict[str, set[str]] = {}  # measurement -> field keys seen within MAX_KEY_CHARS
        self._key_count = 0
        self._heads: dict[str, tuple[str, dict[str, str], str]] = {}  # line protocol's: head text -> name, tags, key
        self._read_fields = lineproto.Layouts().read  # line protocol's common lines, by their heads' field layouts

    def parse_line(self, line: bytes | str) -> tuple[list[Metric], list[Reject]]:
        """One line of a recorded file (or one Kafka message value)."""
        size = len(line)
        if size > MAX_LINE_BYTES or (line.__class__ is not bytes and 4 * size > MAX_LINE_BYTES):
            size = line_size(line)
            if size > MAX_LINE_BYTES:  # refused before it is parsed (a str is measured as UTF-8)
                return [], [Reject("line_too_long", f"a line of {size:,} bytes (at most {MAX_LINE_BYTES:,})", _text(line))]
        first = line[:1]
        if first.__class__ is bytes and first and first[0] in _LP_FIRST and b"=" in line:
            return _parse_lineproto(line, line, self._heads, self._read_fields)  # (a name's first character: never JSON)
        try:
            records = (_decode_record(line),)
        except Exception:  # any refusal (also a str msgspec cannot encode): a batch, or the general path
            try:
                records = _decode_batch(line).metrics
            except Exception:
                return _parse_line(line, self._heads)
        metrics = self._typed(records)
        return (metrics, []) if metrics is not None else _parse_line(line, self._heads)

    def _typed(self, records: list[_Record] | tuple[_Record, ...]) -> list[Metric] | None:
        """The metrics of typed records, or None when one of them fails a check of
        parse_metric (the general path then parses the line again and names each reject)."""
        out = []
        append = out.append
        known, checked = self._tags.get, self._keys.get
        for rec in records:
            name = rec.name
            fields = rec.fields
            key = (name, bytes(rec.tags))
            seen = known(key)
            if seen is None:
                seen = self._check_tags(key)
                if seen is None:
                    return None
            if not fields or name == JOB_PLACEMENT:  # (a job is checked by the general path)
                return None
            short = checked(name)
            if short is None or not short.issuperset(fields):  # (a set's lookups: faster than len of each)
                if max(map(len, fields)) > MAX_KEY_CHARS:
                    return None
                self._short(name, fields)
            ts = _event_time(rec.timestamp)
            if ts.__class__ is not float:
                return None
            append(Metric(name, seen[0], fields, ts, seen[1]))
        return out

    def _short(self, name: str, fields: dict) -> None:
        """Remember a measurement's field keys, checked short; forgets all at `_KEYS_MEMO`
        keys, so hostile keys cannot grow it without bound."""
        keys = self._keys.setdefault(name, set())
        before = len(keys)
        keys.update(fields)
        self._key_count += len(keys) - before
        if self._key_count >= _KEYS_MEMO:
            self._keys.clear()
            self._key_count = 0

    def _check_tags(self, key: tuple[str, bytes]) -> tuple[dict[str, str], str] | None:
        """(tags, series key) of a measurement's tags text not seen before, remembered; None
        when parse_metric would refuse them (not an object of strings, no host)."""
        name, text = key
        try:
            tags = _decode_tags(text)
        except msgspec.DecodeError:
            return None
        if not (name and (tags.get("host") or name == JOB_PLACEMENT)):
            return None
        if len(self._tags) >= _SERIES_MEMO:
            self._tags.clear()
        seen = self._tags[key] = (tags, _series_key(name, tags))
        return seen


def parse_line(line: bytes | str) -> tuple[list[Metric], list[Reject]]:
    """One line judged on its own, by a parser that remembers nothing (for a line now and
    then: a dead letter's member, a job message; a stream's reader owns a `Parser`)."""
    return Parser().parse_line(line)


_LP_FIRST = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_#")
_BLANK = b" \t\r\n"


def _parse_line(line: bytes | str, heads: dict | None = None) -> tuple[list[Metric], list[Reject]]:
    """parse_line without the typed fast path: chooses by the first non-blank byte. `{`
    (or anything else) is JSON; `[` is JSON too (a gnmic event array, engine/gnmic.py);
    a name's character on a line holding `=` is Influx line protocol (engine/lineproto.py).
    Text that is neither stays `bad_json`, as before line protocol was read."""
    raw = line if line.__class__ is bytes else line.encode("utf-8", "surrogatepass")
    first = raw.lstrip(_BLANK)[:1]
    if first and first[0] in _LP_FIRST and (b"=" in raw or first == b"#"):
        return _parse_lineproto(raw, line, {} if heads is None else heads)
    return _parse_json(line)


def _parse_lineproto(raw: bytes, line: bytes | str, heads: dict,
                     read: Callable[[bytes], tuple | None] = lineproto.common_bytes) -> tuple[list[Metric], list[Reject]]:
    """Each line in a common form (`read`: lineproto.common_bytes, or a reader's
    lineproto.Layouts, on its bytes, else lineproto.common) straight to a Metric, its
    head's checked tags remembered in `heads`; any other line through lineproto.parse and
    parse_metric, which name what is wrong."""
    if not raw.isascii():
        try:
            raw.decode("utf-8")  # (strict: no lone surrogate gets past, so none is looked for)
        except UnicodeDecodeError as exc:
            return [], [Reject("lp_syntax", detail(f"not UTF-8: {exc}"), _text(line))]
    metrics: list[Metric] = []
    rejects: list[Reject] = []
    lines: list[bytes | str] = []
    for b in raw.split(b"\n"):
        b = b.strip()
        if b and not (32 < b[0] < 127 and 32 < b[-1] < 127):  # (a border str.strip may read as blank)
            b = b.decode("utf-8").strip()
        if b and b[0] not in (35, "#"):  # (a comment)
            lines.append(b)
    for b in lines:
        common = read(b) if b.__class__ is bytes else None
        s = b if b.__class__ is str else None
        if common is None:
            s = b.decode("utf-8") if s is None else s
            common = lineproto.common(s)
        if common is not None:
            seen = heads.get(common[0]) or _common_head(common[0], heads)
            ts = _event_time(common[2]) if seen is not None else None
            if ts.__class__ is float:
                metrics.append(Metric(seen[0], seen[1], common[1], ts, seen[2]))
                continue
        try:
            doc = lineproto.parse(b.decode("utf-8") if s is None else s)
        except lineproto.LineError as exc:
            rejects.append(Reject(exc.reason, detail(exc.detail), _text(line)))
            continue
        tags = doc["tags"]
        if "host" not in tags:  # (gNMI and SNMP inputs name the device in `source` / `agent_host`)
            device = tags.get("source") or tags.get("agent_host")
            if device:
                tags["host"] = gnmic.strip_port(device)
        result = parse_metric(doc)
        if result.__class__ is Metric:
            metrics.append(result)
        else:
            rejects.append(Reject(result[0], detail(result[1]), _text(line) if len(lines) == 1 else _dump(doc)))
    return metrics, rejects


def _common_head(head: bytes | str, heads: dict) -> tuple[str, dict[str, str], str] | None:
    """(name, tags, series key) of a line-protocol head parse_metric accepts, remembered
    under its text; None for any other (the general path then names what is wrong)."""
    try:
        name, tags = lineproto.head(head.decode("utf-8") if head.__class__ is bytes else head)
    except lineproto.LineError:
        return None
    if "host" not in tags and (tags.get("source") or tags.get("agent_host")):
        tags["host"] = gnmic.strip_port(tags.get("source") or tags["agent_host"])
    if not tags.get("host") or name == JOB_PLACEMENT or check_sizes(name, tags, {}) is not None:
        return None
    if len(heads) >= _SERIES_MEMO:
        heads.clear()
    seen = heads[head] = (name, tags, _series_key(name, tags))
    return seen


def _parse_gnmic(events: list, raw: bytes | str, check_floats: bool) -> tuple[list[Metric], list[Reject]]:
    if len(events) > MAX_BATCH:
        return [], [Reject("batch_too_large", f"{len(events):,} gnmic events (at most {MAX_BATCH:,})", _text(raw))]
    metrics: list[Metric] = []
    rejects: list[Reject] = []
    for event in events:
        docs = gnmic.event_documents(event)
        results = [docs] if docs.__class__ is tuple else [parse_metric(d, check_floats=check_floats) for d in docs]
        for result in results:
            if result.__class__ is Metric:
                metrics.append(result)
            else:
                rejects.append(Reject(result[0], detail(result[1]), _text(raw) if len(events) == 1 else _dump(event)))
    return metrics, rejects


def _parse_json(line: bytes | str) -> tuple[list[Metric], list[Reject]]:
    """orjson (or json) + parse_metric."""
    try:
        doc = _fast_loads(line)
    except ValueError:
        # Not strict JSON. NaN/Infinity literals parse here so the reject can say so.
        try:
            doc = json.loads(line, parse_constant=_NonFinite)
        except (ValueError, UnicodeDecodeError) as exc:
            return [], [Reject("bad_json", detail(str(exc)), _text(line))]
        except RecursionError:  # orjson refuses nesting past 1024; json may run out of stack first
            return [], [Reject("bad_json", "nested too deeply to parse", _text(line))]
        return parse_document(doc, line, check_floats=True)
    if doc.__class__ is dict and "name" in doc:  # the common case, without a call more
        result = parse_metric(doc, check_floats=_CHECK_FLOATS)
        if result.__class__ is Metric:
            return [result], []
        return [], [Reject(result[0], detail(result[1]), _text(line))]
    return parse_document(doc, line, check_floats=_CHECK_FLOATS)


def parse_document(doc: object, raw: bytes | str = "", *, check_floats: bool = True) -> tuple[list[Metric], list[Reject]]:
    if doc.__class__ is dict and "name" in doc:  # the common case: one metric
        result = parse_metric(doc, check_floats=check_floats)
        if result.__class__ is Metric:
            return [result], []
        return [], [Reject(result[0], detail(result[1]), _text(raw))]
    if gnmic.is_events(doc):
        return _parse_gnmic(doc, raw, check_floats)
    if not _is_batch(doc):
        result = parse_metric(doc, check_floats=check_floats)
        return ([result], []) if result.__class__ is Metric else ([], [Reject(result[0], detail(result[1]), _text(raw))])
    items = doc["metrics"]
    if not isinstance(items, list):
        return [], [Reject("bad_batch", "'metrics' is not a list", _text(raw))]
    if len(items) > MAX_BATCH:
        return [], [Reject("batch_too_large", f"a batch of {len(items):,} metrics (at most {MAX_BATCH:,})", _text(raw))]
    metrics: list[Metric] = []
    rejects: list[Reject] = []
    for item in items:
        if _is_batch(item):  # Telegraf never nests batches: the publisher and the workers neither
            result = "nested_batch", "a batch inside a batch"
        else:
            result = parse_metric(item, check_floats=check_floats)
        if isinstance(result, Metric):
            metrics.append(result)
        else:
            rejects.append(Reject(result[0], detail(result[1]), _text(raw) if len(items) == 1 else _dump(item)))
    return metrics, rejects


def _is_batch(item: object) -> bool:
    return item.__class__ is dict and "metrics" in item and "name" not in item


def parse_metric(doc: object, *, check_floats: bool = True) -> Metric | tuple[str, str]:
    """A Metric, or (reason, detail) naming exactly what is wrong.

    `check_floats=False` skips the scan for infinite floats (and integers beyond a
    double's range) when the strict parser has already refused them (the hot path)."""
    if not isinstance(doc, dict):
        return "not_an_object", f"expected a JSON object, got {type(doc).__name__}"
    name = doc.get("name")
    if not isinstance(name, str) or not name:
        return "missing_name", "'name' is missing or not a non-empty string"
    tags = doc.get("tags")
    if not isinstance(tags, dict):
        return "bad_tags", "'tags' is missing or not an object"
    host = tags.get("host")
    if (not isinstance(host, str) or not host) and name != JOB_PLACEMENT:  # a job is not a device's record
        if host is None or host == "":
            return "missing_host", "'tags.host' is missing or empty"
        return "bad_host", f"'tags.host' is {type(host).__name__}, not a string"
    if not _STRINGS.issuperset(map(type, tags.values())):
        for k, v in tags.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                tags[k] = str(v)
            elif not isinstance(v, str):
                return "bad_tags", f"tag {k!r} is {type(v).__name__}, not a string"
    fields = doc.get("fields")
    if not isinstance(fields, dict) or not fields:
        return "bad_fields", "'fields' is missing, empty or not an object"
    if not _SCALARS.issuperset(map(type, fields.values())):
        for k, v in fields.items():
            if isinstance(v, _NonFinite):
                return "non_finite_field", f"field {k!r} is {v}"
            if not isinstance(v, (int, float, str, bool)):
                return "bad_fields", f"field {k!r} is {type(v).__name__}"
    if check_floats:
        for k, v in fields.items():
            if v.__class__ is float and not _isfinite(v):
                return "non_finite_field", f"field {k!r} is {v}"
            # The standard parser keeps every digit of an integer; orjson reads one beyond
            # 64 bits as a double, and refuses one beyond a double's range. The same here,
            # so that no path hands the engine an integer whose rate cannot be a float
            # ((x - o) / dt raised OverflowError and stopped the stage).
            if v.__class__ is int and not _I64_MIN <= v <= _U64_MAX:
                try:
                    fields[k] = float(v)
                except OverflowError:
                    return "non_finite_field", f"field {k!r} is an integer of {v.bit_length()} bits, beyond a double's range"
        # Only the standard parser lets a lone surrogate through (\ud800): never stored.
        broken = check_strings(name, tags, fields)
        if broken is not None:
            return broken
    broken = check_sizes(name, tags, fields)
    if broken is not None:
        return broken
    if len(doc) > 4 and too_deep(doc):  # keys besides the envelope's are ignored, but bounded
        return "too_deep", "containers nested deeper than a metric's envelope needs"
    ts = doc.get("timestamp", _MISSING)
    if ts is _MISSING:
        return "missing_timestamp", "'timestamp' is missing"
    ts = _event_time(ts)
    if ts.__class__ is tuple:
        return ts
    if name == JOB_PLACEMENT:  # checked here, so a bad job is booked to its own line
        try:
            job_from_placement(tags=tags, fields=fields, ts=ts)
        except JobError as exc:
            return "bad_job", detail(str(exc))
    return Metric(name, tags, fields, ts, _series_key(name, tags))  # positional: measurably faster here


def _event_time(ts: object) -> float | tuple[str, str]:
    """Seconds, or (reason, detail). An integer time of 2000..2100 in s, ms, us or ns
    needs no more than a division (the same float arithmetic as `seconds`); anything
    else goes through `seconds`."""
    if ts.__class__ is int:
        if _NS_FIRST <= ts <= _NS_LAST:
            return ts / 1e9
        if _MS_FIRST <= ts <= _MS_LAST:
            return ts / 1e3
        if _S_FIRST <= ts <= _S_LAST:
            return float(ts)
        if _US_FIRST <= ts <= _US_LAST:
            return ts / 1e6
    return _timestamp(ts)


def _timestamp(value: object) -> float | tuple[str, str]:
    try:
        return seconds(value)
    except ValueError as exc:
        return "bad_timestamp", str(exc)


def _series_key(name: str, tags: dict) -> str:
    """Measurement and sorted tags: a series' key (built once per tags text by a Parser)."""
    return "|".join([name, *map("=".join, sorted(tags.items()))])


def _text(raw: bytes | str) -> str:
    if isinstance(raw, bytes):
        return raw.decode("utf-8", "replace")
    return raw


def _dump(item: object) -> str:
    try:
        return json.dumps(item, allow_nan=True)
    except (TypeError, ValueError):
        return repr(item)
    except RecursionError:  # parsed (orjson allows 1024 levels), too deep for json/repr to write
        return f"<a {type(item).__name__} nested too deeply to show>"
