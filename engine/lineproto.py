"""Influx line protocol (Telegraf's default `data_format`) -> the documents the JSON path reads.

    measurement[,tag=value...] field=value[,field=value...] [timestamp]

One line becomes `{"name", "tags", "fields", "timestamp"}` (timestamp left out when the
line has none: parse_metric then rejects it as `missing_timestamp`, since the engine
reasons in event time only). Escapes: `\\,` and `\\ ` in the measurement; `\\,` `\\=` `\\ `
in tag keys, tag values and field keys; `\\"` and `\\\\` inside string field values.
Field values: `"..."` strings, `1i` integers, `1u` unsigned integers, booleans
(t/T/true/True/TRUE, f/F/false/False/FALSE), anything else a float. Blank lines and
`#` comments are skipped. A bad line is a `LineError(reason, detail)`.

A stream's reader (engine/normalize.py) tries `common_bytes` and `common` first: the
common line, as Telegraf writes it, read in a few C calls, with the values `parse` gives
(property tests hold them to it); any other line gets None and goes to `parse`.
"""
from __future__ import annotations

import math
import re

import msgspec

from engine.bounds import MAX_FIELDS, MAX_KEY_CHARS, MAX_STRING_CHARS

_TRUE = frozenset(("t", "T", "true", "True", "TRUE"))
_FALSE = frozenset(("f", "F", "false", "False", "FALSE"))
_KEY_ESCAPE = re.compile(r"\\([,= ])")
_NAME_ESCAPE = re.compile(r"\\([, ])")
_STRING_ESCAPE = re.compile(r'\\(["\\])')
_INT = re.compile(r"-?[0-9]+\Z")
_UINT = re.compile(r"[0-9]+\Z")
_FLOAT = re.compile(r"[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?\Z")
_I64_MIN, _I64_MAX, _U64_MAX = -(2**63), 2**63 - 1, 2**64 - 1


# The common field set, as Telegraf writes contract records: integers with `i` (within
# int64) or `u`, floats with a point or an exponent, booleans `true`/`false`, strings without
# `"`, `,`, `=`, a backslash or a control character. Checked whole by one regex (on the
# line's bytes), it is JSON once its `=` and `,` are rewritten, and msgspec reads that in C,
# checking its UTF-8, with the values `parse` gives. (A bare `5` is a float in line
# protocol and an integer in JSON: a field set with one takes `common`, on str.)
_KEY = rb'[^,="\\\x00-\x1f ]{1,%d}+' % MAX_KEY_CHARS
_VALUE = (rb'(?:-?+(?:0|[1-9][0-9]{0,17}+)i|(?:0|[1-9][0-9]{0,18}+)u|true|false'
          + rb'|"[^",=\\\x00-\x1f]{0,%d}+"' % MAX_STRING_CHARS
          + rb'|-?+(?:0|[1-9][0-9]*+)(?:\.[0-9]++(?:[eE][-+]?[0-9]++)?|[eE][-+]?[0-9]++))')
_json_fields = re.compile(_KEY + b"=" + _VALUE + b"(?:," + _KEY + b"=" + _VALUE + b")*+").fullmatch
_decode_fields = msgspec.json.Decoder(dict[str, int | float | str | bool]).decode


# Layouts (`Layouts`): the value of each kind `_VALUE` reads, as a group without the
# integer's suffix (JSON reads the group as `_decode_fields` reads the value).
_LAYOUT_KINDS = {
    "i": rb"(-?+(?:0|[1-9][0-9]{0,17}+))i",
    "u": rb"((?:0|[1-9][0-9]{0,18}+))u",
    "b": rb"(true|false)",
    "s": rb'("[^",=\\\x00-\x1f]{0,%d}+")' % MAX_STRING_CHARS,
    "f": rb"(-?+(?:0|[1-9][0-9]*+)(?:\.[0-9]++(?:[eE][-+]?[0-9]++)?|[eE][-+]?[0-9]++))",
}
_decode_values = msgspec.json.Decoder(tuple).decode
_LAYOUT_HEADS = 200_000  # heads remembered (as the reader's other memos: hostile heads cannot grow it)
_LAYOUTS = 4096  # distinct layouts compiled


def _kind(value: bytes) -> str:
    last = value[-1:]
    if last == b"i" or last == b"u":
        return last.decode()
    if value[:1] == b'"':
        return "s"
    return "b" if value in (b"true", b"false") else "f"


class Layouts:
    """`common_bytes` with a memo its reader owns: per line head, the layout of the field
    sets of its last lines (keys in order, each value's kind) as a regex of literal keys
    and one group per value. A line that fits a layout of its head is read by that match
    and one decode of its values (about 0.6 of `common_bytes`' time on the benchmark's
    lines, docs/design.md "Speed tricks"); any other line by `common_bytes`, whose
    reading then teaches its head that layout (two kept per head: a head whose lines
    alternate between two field sets, as SNMP's two tables, keeps both). A layout is
    learned only from a line `common_bytes` read, so a line that fits it is one
    `common_bytes` reads, read the same (tests/test_lineproto.py holds them to it)."""

    __slots__ = ("_heads", "_compiled")

    def __init__(self) -> None:
        self._heads: dict[bytes, tuple] = {}  # head -> its layouts, newest first
        self._compiled: dict[tuple, tuple] = {}  # (keys, kinds) -> (fullmatch, keys as str)

    def read(self, line: bytes) -> tuple[bytes, dict, int] | None:
        """`common_bytes(line)`."""
        i = line.find(b" ")
        layouts = self._heads.get(line[:i]) if i > 0 else None
        if layouts is not None:
            j = line.rfind(b" ")
            ts = line[j + 1:]
            if ts.isdigit():
                for fullmatch, keys in layouts:
                    got = fullmatch(line, i + 1, j)
                    if got is not None:
                        try:
                            values = _decode_values(b"[" + b",".join(got.groups()) + b"]")
                        except msgspec.DecodeError:  # (as common_bytes': a float beyond a double's range)
                            return None
                        return line[:i], dict(zip(keys, values)), int(ts)
        got = common_bytes(line)
        if got is not None:
            self._learn(line, i, layouts)
        return got

    def _learn(self, line: bytes, i: int, layouts: tuple | None) -> None:
        """The layout of a line `common_bytes` read (its field set holds no `,` or `=`
        but between fields and at each key's end), first among its head's."""
        pieces = [piece.partition(b"=") for piece in line[i + 1:line.rfind(b" ")].split(b",")]
        signature = (tuple(k for k, _, _ in pieces), "".join(_kind(v) for _, _, v in pieces))
        layout = self._compiled.get(signature)
        if layout is None:
            if len(self._compiled) >= _LAYOUTS:
                self._compiled.clear()
            pattern = b",".join(re.escape(k) + b"=" + _LAYOUT_KINDS[c] for k, c in zip(*signature))
            layout = self._compiled[signature] = (re.compile(pattern).fullmatch,
                                                  tuple(k.decode("utf-8") for k in signature[0]))
        if len(self._heads) >= _LAYOUT_HEADS:
            self._heads.clear()
        self._heads[line[:i]] = (layout,) if layouts is None else (layout, layouts[0])


class LineError(ValueError):
    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def parse_lines(text: str) -> list[dict | LineError]:
    """Every line of `text` (one Kafka message may hold many) as a document or an error."""
    out: list[dict | LineError] = []
    for raw in text.split("\n"):
        line = raw.strip()
        if not line or line[0] == "#":
            continue
        try:
            out.append(parse(line))
        except LineError as exc:
            out.append(exc)
    return out


def parse(line: str) -> dict:
    """One stripped, non-empty line as a document; LineError says what is wrong. Without a
    backslash (nearly every line) the sections and fields are cut with str methods, also
    around quoted strings (`_split_quoted`); with one, character by character
    (`parse_escaped`, which reads any line the same way)."""
    if "\\" in line:
        return parse_escaped(line)
    head, sep, rest = line.partition(" ")
    quoted = '"' in rest
    parts = (_split_quoted(rest, " ") if quoted else rest.split(" ")) if sep else []
    return _document(head, parts, True, quoted)


def common_bytes(line: bytes) -> tuple[bytes, dict, int] | None:
    """(head, fields, timestamp) of a stripped line whose fields are all `_json_fields`
    reads (within the bounds), the head left as bytes (a reader keeps its tags by that
    text); None for any other line (`common`, then `parse`, read it)."""
    if b"\\" in line:
        return None
    i, j = line.find(b" "), line.rfind(b" ")
    if i < 0 or j <= i + 1 or not line[j + 1:].isdigit() or not _json_fields(line, i + 1, j):
        return None
    body = line[i + 1:j].replace(b"i,", b",")  # (only an integer's suffix stands before a comma)
    if b"u," in body:
        body = body.replace(b"u,", b",")
    if body[-1] in b"iu":
        body = body[:-1]
    try:
        fields = _decode_fields(b'{"' + body.replace(b",", b',"').replace(b"=", b'":') + b"}")
    except msgspec.DecodeError:  # (not UTF-8, a float beyond a double's range)
        return None
    return (line[:i], fields, int(line[j + 1:])) if len(fields) <= MAX_FIELDS else None


def common(line: str) -> tuple[str, dict, int] | None:
    """`common_bytes` for any line without backslashes, by str methods (fields with a bare
    number: Prometheus' through Telegraf); None where `parse` would say more."""
    if "\\" in line:
        return None
    head, _, rest = line.partition(" ")
    text, _, ts = rest.rpartition(" ")
    if not (ts.isdigit() and ts.isascii()) or not text:
        return None
    try:
        if " " in text and ('"' not in text or len(_split_quoted(text, " ")) > 1):
            return None  # (a blank outside a string: more than one space between sections)
        fields = _quoted_fields(text) if '"' in text else _fields(text, True)
    except LineError:
        return None
    if len(fields) > MAX_FIELDS or max(map(len, fields)) > MAX_KEY_CHARS or any(
            v.__class__ is str and len(v) > MAX_STRING_CHARS for v in fields.values()):
        return None
    return head, fields, int(ts)


def parse_escaped(line: str) -> dict:
    """`parse` for a line with escapes (`\\,`, `\\ `, `\\=`, `\\"`)."""
    head = _split_head(line)
    rest = line[len(head) + 1:] if len(head) < len(line) else ""
    return _document(head, _split(rest, " ", quotes=True) if rest else [], False, True)


def _document(head: str, parts: list[str], simple: bool, quoted: bool) -> dict:
    if len(parts) > 2 or (len(parts) == 2 and not parts[1]):
        raise LineError("lp_syntax", "more than one space between sections, or text after the timestamp")
    if not parts or not parts[0]:
        raise LineError("lp_no_fields", f"no field set after {head[:80]!r}")
    name, tags = _head(head, simple)
    fields = _fields(parts[0], simple) if not (simple and quoted) else _quoted_fields(parts[0])
    doc: dict = {"name": name, "tags": tags, "fields": fields}
    if len(parts) == 2:
        doc["timestamp"] = _timestamp(parts[1])
    return doc


def _unescaped(text: str, char: str, *, stop_at_quote: bool = False) -> int:
    """Index of the first `char` not escaped by a backslash, or -1 (also at a `"` when
    `stop_at_quote`: what follows is a string value)."""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == char:
            return i
        if stop_at_quote and c == '"':
            return -1
        i += 1
    return -1


def _split_head(line: str) -> str:
    """The measurement and tags: everything up to the first unescaped space."""
    i = _unescaped(line, " ")
    return line if i < 0 else line[:i]


def _split(text: str, sep: str, *, quotes: bool) -> list[str]:
    """`text` cut at each unescaped `sep` (outside double quotes when `quotes`)."""
    out, start, i, n, inside = [], 0, 0, len(text), False
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if quotes and c == '"':
            inside = not inside
        elif c == sep and not inside:
            out.append(text[start:i])
            start = i + 1
        i += 1
    if inside:
        raise LineError("lp_bad_string", f"a string field value is not closed: {text[:80]!r}")
    out.append(text[start:])
    return out


def _split_quoted(text: str, sep: str) -> list[str]:
    """`_split(text, sep, quotes=True)` for a text without backslashes: cut at each `sep`
    outside double quotes, by str.split on the pieces between quotes."""
    chunks = text.split('"')
    if len(chunks) % 2 == 0:
        raise LineError("lp_bad_string", f"a string field value is not closed: {text[:80]!r}")
    out: list[str] = []
    current = ""
    for i, chunk in enumerate(chunks):
        if i % 2:  # inside quotes
            current += '"' + chunk + '"'
            continue
        pieces = chunk.split(sep)
        current += pieces[0]
        if len(pieces) > 1:
            out.append(current)
            out.extend(pieces[1:-1])
            current = pieces[-1]
    out.append(current)
    return out


def _quoted_fields(text: str) -> dict[str, object]:
    """`_fields(text, simple=False)` for a field set without backslashes."""
    fields: dict[str, object] = {}
    for piece in _split_quoted(text, ","):
        key, sep, value = piece.partition("=")
        if not sep or not key or '"' in key:  # (a quote before the first `=`: no key)
            raise LineError("lp_bad_field", f"field {piece[:80]!r} is not key=value")
        digits = value[:-1]
        if value[-1:] == "i" and digits.isdigit() and len(digits) < 19 and digits.isascii():  # (as in _fields)
            fields[key] = int(digits)
        else:
            fields[key] = _value(key, value)
    return fields


def head(text: str) -> tuple[str, dict[str, str]]:
    """The measurement and tags of a head without backslashes (`common`'s), or LineError."""
    return _head(text, True)


def _head(head: str, simple: bool) -> tuple[str, dict[str, str]]:
    pieces = head.split(",") if simple else _split(head, ",", quotes=False)
    name = pieces[0] if simple else _NAME_ESCAPE.sub(r"\1", pieces[0])
    if not name:
        raise LineError("lp_syntax", "the measurement name is empty")
    tags: dict[str, str] = {}
    for piece in pieces[1:]:
        kv = piece.split("=") if simple else _split(piece, "=", quotes=False)
        if len(kv) != 2 or not kv[0] or not kv[1]:
            raise LineError("lp_bad_tag", f"tag {piece[:80]!r} is not key=value")
        key, value = (kv[0], kv[1]) if simple else (_KEY_ESCAPE.sub(r"\1", kv[0]), _KEY_ESCAPE.sub(r"\1", kv[1]))
        tags[key] = value
    return name, tags


def _fields(text: str, simple: bool) -> dict[str, object]:
    fields: dict[str, object] = {}
    for piece in (text.split(",") if simple else _split(text, ",", quotes=True)):
        key, sep, value = piece.partition("=") if simple else _key_value(piece)
        if not sep or not key:
            raise LineError("lp_bad_field", f"field {piece[:80]!r} is not key=value")
        digits = value[:-1]
        if value[-1:] == "i" and digits.isdigit() and len(digits) < 19 and digits.isascii():  # (within int64)
            fields[key if simple else _KEY_ESCAPE.sub(r"\1", key)] = int(digits)
        else:
            fields[key if simple else _KEY_ESCAPE.sub(r"\1", key)] = _value(key, value)
    return fields


def _key_value(piece: str) -> tuple[str, str, str]:
    """A field split at its first unescaped `=` (the value may hold more in a string)."""
    i = _unescaped(piece, "=", stop_at_quote=True)
    return (piece, "", "") if i < 0 else (piece[:i], "=", piece[i + 1:])


def _value(key: str, text: str) -> object:
    if not text:
        raise LineError("lp_bad_field", f"field {key!r} has no value")
    last = text[-1]
    if text[0] == '"':
        if len(text) < 2 or last != '"':
            raise LineError("lp_bad_string", f"field {key!r}: a string value must be one quoted string")
        return _STRING_ESCAPE.sub(r"\1", text[1:-1])
    if last == "i" and _INT.match(text, 0, len(text) - 1):
        value = int(text[:-1])
        if not _I64_MIN <= value <= _I64_MAX:
            raise LineError("lp_bad_field", f"field {key!r}: integer {text} is beyond 64 bits")
        return value
    if last == "u" and _UINT.match(text, 0, len(text) - 1):
        value = int(text[:-1])
        if value > _U64_MAX:
            raise LineError("lp_bad_field", f"field {key!r}: unsigned integer {text} is beyond 64 bits")
        return value
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    if _FLOAT.match(text):
        value = float(text)
        if math.isfinite(value):
            return value
    raise LineError("lp_bad_field", f"field {key!r}: {text[:80]!r} is not a number, string or boolean")


def _timestamp(text: str) -> int:
    if not _INT.match(text):
        raise LineError("lp_bad_timestamp", f"timestamp {text[:80]!r} is not an integer")
    return int(text)


def escape_key(text: str) -> str:
    return text.replace(",", "\\,").replace("=", "\\=").replace(" ", "\\ ")


def dumps(name: str, tags: dict[str, str], fields: dict[str, object], timestamp: int | None = None) -> str:
    """One line of line protocol (the inverse of `parse`; for tests and tools)."""
    head = ",".join([name.replace(",", "\\,").replace(" ", "\\ "),
                     *(f"{escape_key(k)}={escape_key(v)}" for k, v in tags.items())])
    body = ",".join(f"{escape_key(k)}={_format(v)}" for k, v in fields.items())
    return f"{head} {body}" + ("" if timestamp is None else f" {timestamp}")


def _format(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value}i"
    if isinstance(value, float):
        return repr(value)
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'
