"""Mappings as data: a real exporter's measurement -> a contract measurement (contract 2).

A mapping file (YAML) holds `mappings:`, a list of

    name: gnmi_openconfig_interfaces      # counted in the replay summary's `mapped`
    match:
      measurement: ifcounters             # a name, a glob (`*`) or a list of them
      tags: {path: "/interfaces/interface/state/counters$"}  # optional: regex searched in the tag
      fields: "^node_disk_"                # optional: regex, a field name of the record matches
    value_fields: [counter, gauge, value]  # the value is in one of these, named by the measurement
    to: switch_port                        # a contract measurement
    tags:                                  # contract tag <- first present of these source tags
      host: {from: [source, host], strip_port: true}  # keep: true keeps the source tags
      interface: [name]                    # (short form of {from: [...]})
      # {from: [device], aliases: {mlx5_0: eth2}}: a value's alias where one is given
      # {from: [path], pattern: "/COUNTERS/([^/]+)$"}: the regex's first group
    set_tags: {kind: disk}                 # constant tags
    drop_tags: [path]
    fields:                                # source field -> target (a name, or a spec)
      in_octets: if_in_octets
      oper_status: {to: oper_status, values: {UP: up, DOWN: down}}
      port_xmit_data: {to: tx_bytes, scale: 4}       # or convert: seconds_to_ms, bits_to_bytes, ...
    strings_to_numbers: true               # "123" -> 123 in every field (SONiC, gNMI uint64)

Fields not listed pass through under their own name (the engine counts those its
measurement does not know as ignored fields). Source tags a tag rule read are removed. A
record lacking a tag its target needs (host, interface, ...) is not mapped and stays an
ignored measurement. `MappingError` names the file, the mapping and the key.
"""
from __future__ import annotations

import difflib
import fnmatch
import os
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import yaml

from contract.measurements import MEASUREMENTS
from engine.gnmic import strip_port
from engine.normalize import _series_key
from engine.types import Metric

ENV = "FABRIC_RCA_MAPPINGS"  # folders of extra mapping files, separated by os.pathsep
CONVERSIONS = {"seconds_to_ms": 1000, "ms_to_seconds": 0.001, "us_to_ms": 0.001, "ns_to_ms": 1e-6,
               "bits_to_bytes": 0.125, "words_to_bytes": 4, "bps_to_mbps": 1e-6, "kbps_to_mbps": 0.001}
MAPPING_KEYS = {"name", "description", "match", "to", "tags", "set_tags", "drop_tags", "fields", "strings_to_numbers",
                "value_fields"}
MATCH_KEYS = {"measurement", "tags", "fields"}
FIELD_KEYS = {"to", "scale", "convert", "values", "number"}
TAG_KEYS = {"from", "strip_port", "aliases", "keep", "pattern"}
_ENTITY_TAG = re.compile(r"\{([a-z_]+)\}")
_MEMO = 100_000


class MappingError(ValueError):
    def __init__(self, source: str, mapping: str | None, key: str | None, message: str):
        where = source + (f": mapping {mapping!r}" if mapping else "") + (f": {key}" if key else "")
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class TagRule:
    target: str
    sources: tuple[str, ...]
    strip_port: bool = False
    aliases: dict = field(default_factory=dict)
    keep: bool = False  # keep the source tags (infiniband's `device` is a contract tag too)
    pattern: re.Pattern | None = None  # its first group is the value (sonic's `/COUNTERS/(Ethernet9)`)


@dataclass(frozen=True)
class FieldRule:
    target: str
    scale: float | int | None = None
    values: dict | None = None
    number: bool = False


@dataclass(frozen=True)
class Mapping:
    name: str
    source: str
    measurements: tuple[str, ...]
    tag_match: tuple[tuple[str, re.Pattern], ...]
    to: str
    tags: tuple[TagRule, ...]
    set_tags: dict
    drop_tags: frozenset
    fields: dict
    strings_to_numbers: bool = False
    field_match: re.Pattern | None = None  # Prometheus v2: the metric is the field's name
    value_fields: frozenset = frozenset()  # Prometheus v1: the metric is the measurement's name

    def names(self, measurement: str) -> bool:
        return any(fnmatch.fnmatchcase(measurement, g) for g in self.measurements)

    def matches(self, tags: dict) -> bool:
        return all(isinstance(tags.get(k), str) and p.search(tags[k]) for k, p in self.tag_match)

    def takes_fields(self, fields: dict) -> bool:
        p = self.field_match
        return p is None or any(p.search(k) for k in fields)

    def tags_of(self, tags: dict) -> dict | None:
        """The contract tags of a record's tags, or None when one the target needs is missing."""
        out = dict(tags)
        for rule in self.tags:
            value = next((tags[s] for s in rule.sources if tags.get(s)), None)
            if value is None:
                return None
            if not rule.keep:
                for s in rule.sources:
                    out.pop(s, None)
            value = strip_port(value) if rule.strip_port else value
            if rule.pattern is not None:
                found = rule.pattern.search(value)
                if found is None:
                    return None
                value = found.group(1)
            out[rule.target] = rule.aliases.get(value, value)
        for k in self.drop_tags:
            out.pop(k, None)
        out.update(self.set_tags)
        return out

    def fields_of(self, fields: dict, measurement: str = "") -> dict:
        out: dict = {}
        rules = self.fields
        numbers = self.strings_to_numbers
        values = self.value_fields
        for k, v in fields.items():
            if k in values:
                k = measurement
            rule = rules.get(k)
            if numbers or (rule is not None and rule.number):
                v = _number(v)
            if rule is None:
                out.setdefault(k, v)
                continue
            if rule.values is not None:
                v = rule.values.get(v, v)
            if rule.scale is not None and v.__class__ in (int, float):
                v = v * rule.scale
            out[rule.target] = v
        return out


def _number(v: object) -> object:
    if v.__class__ is not str:
        return v
    try:
        return int(v)
    except ValueError:
        try:
            f = float(v)
        except ValueError:
            return v
        return f if f == f and f not in (float("inf"), float("-inf")) else v


class MappingSet:
    """The mappings in file order; `map` converts a record of an unknown measurement."""

    def __init__(self, mappings: list[Mapping]):
        self.mappings = tuple(mappings)
        self._by_name: dict[str, tuple[Mapping, ...]] = {}
        self._by_series: dict[str | tuple, tuple[Mapping, dict, str] | None] = {}
        self._by_fields: set[str] = set()  # measurements keyed by series and field names

    def __len__(self) -> int:
        return len(self.mappings)

    def map(self, m: Metric) -> tuple[Metric, str] | None:
        """(the contract record, the mapping's name), or None when no mapping takes it."""
        seen = self._by_series.get(m.series if m.name not in self._by_fields else (m.series, *m.fields), False)
        if seen is False:
            seen = self._series(m)
        if seen is None:
            return None
        mapping, tags, series = seen
        return Metric(mapping.to, tags, mapping.fields_of(m.fields, m.name), m.ts, series), mapping.name

    def _series(self, m: Metric) -> tuple[Mapping, dict, str] | None:
        """The mapping of a record's series; where a candidate matches field names too
        (Prometheus v2: one measurement, the metric in the field), of its fields as well."""
        candidates = self._by_name.get(m.name)
        if candidates is None:
            candidates = self._by_name[m.name] = tuple(x for x in self.mappings if x.names(m.name))
            if any(x.field_match is not None for x in candidates):
                self._by_fields.add(m.name)
        seen = None
        for mapping in candidates:
            if mapping.matches(m.tags) and mapping.takes_fields(m.fields):
                tags = mapping.tags_of(m.tags)
                if tags is not None:
                    seen = mapping, tags, _series_key(mapping.to, tags)
                    break
        if len(self._by_series) >= _MEMO:
            self._by_series.clear()
        self._by_series[m.series if m.name not in self._by_fields else (m.series, *m.fields)] = seen
        return seen


def shipped_files() -> list[Path]:
    folder = resources.files("engine") / "mappings"
    return sorted(Path(str(p)) for p in folder.iterdir() if p.name.endswith((".yaml", ".yml")))


def folder_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        raise MappingError(str(folder), None, None, "is not a folder of mapping files")
    return sorted(p for p in folder.iterdir() if p.suffix in (".yaml", ".yml"))


_cache: dict[str, MappingSet] = {}


def default_mappings(folders: tuple[Path, ...] = ()) -> MappingSet:
    """The mappings of `folders` (--mappings), then of those in $FABRIC_RCA_MAPPINGS not
    among them, then the shipped ones: a user's mapping of a measurement is tried before
    the shipped one. Loaded once per list of folders."""
    dirs = list(dict.fromkeys([str(f) for f in folders] + [d for d in os.environ.get(ENV, "").split(os.pathsep) if d]))
    key = os.pathsep.join(dirs)
    if key not in _cache:
        _cache[key] = load_mappings([p for d in dirs for p in folder_files(Path(d))] + shipped_files())
    return _cache[key]


def load_mappings(paths: list[Path]) -> MappingSet:
    mappings: list[Mapping] = []
    seen: dict[str, str] = {}
    for path in paths:
        for m in load_file(Path(path)):
            if m.name in seen:
                raise MappingError(str(path), m.name, "name", f"duplicate mapping name (also in {seen[m.name]})")
            seen[m.name] = str(path)
            mappings.append(m)
    return MappingSet(mappings)


def load_file(path: Path) -> list[Mapping]:
    src = str(path)
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise MappingError(src, None, None, f"cannot read: {exc}") from None
    except yaml.YAMLError as exc:
        raise MappingError(src, None, None, f"not valid YAML: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("mappings"), list):
        raise MappingError(src, None, "mappings", "expected a top-level 'mappings:' list")
    return [_mapping(src, i, item) for i, item in enumerate(doc["mappings"])]


def _mapping(src: str, i: int, item: object) -> Mapping:
    if not isinstance(item, dict):
        raise MappingError(src, f"#{i + 1}", None, "a mapping is a YAML mapping (key: value)")
    name = item.get("name")
    if not isinstance(name, str) or not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise MappingError(src, f"#{i + 1}", "name", "required, lower-case letters, digits and _")
    err = lambda key, msg: MappingError(src, name, key, msg)  # noqa: E731
    unknown = set(item) - MAPPING_KEYS
    if unknown:
        raise err(sorted(unknown)[0], f"unknown key (known: {', '.join(sorted(MAPPING_KEYS))})")
    to = item.get("to")
    if to not in MEASUREMENTS:
        hint = difflib.get_close_matches(str(to), MEASUREMENTS, n=1)
        raise err("to", f"{to!r} is not a contract measurement" + (f" (did you mean {hint[0]!r}?)" if hint else ""))
    measurements, tag_match, field_match = _match(err, item.get("match"))
    tags = _tag_rules(err, item.get("tags") or {})
    set_tags = _str_dict(err, "set_tags", item.get("set_tags") or {})
    needed = set(_ENTITY_TAG.findall(MEASUREMENTS[to].entity)) | {"host"}
    missing = needed - {r.target for r in tags} - set(set_tags)
    if missing:
        raise err("tags", f"{to} needs tag(s) {', '.join(sorted(missing))}: add a rule for each")
    drop = item.get("drop_tags") or []
    if not isinstance(drop, list) or not all(isinstance(d, str) for d in drop):
        raise err("drop_tags", "a list of tag names")
    numbers = item.get("strings_to_numbers", False)
    if not isinstance(numbers, bool):
        raise err("strings_to_numbers", "true or false")
    value_fields = item.get("value_fields") or []
    if not isinstance(value_fields, list) or not all(isinstance(v, str) and v for v in value_fields):
        raise err("value_fields", "a list of field names (Prometheus v1: [counter, gauge, value])")
    fields = _field_rules(err, to, item.get("fields") or {})
    return Mapping(name, src, measurements, tag_match, to, tags, set_tags, frozenset(drop), fields, numbers,
                   field_match, frozenset(value_fields))


def _match(err, match: object) -> tuple[tuple[str, ...], tuple, re.Pattern | None]:
    if not isinstance(match, dict) or "measurement" not in match:
        raise err("match", "required: {measurement: NAME or [NAMES], tags: {TAG: REGEX}, fields: REGEX}")
    if set(match) - MATCH_KEYS:
        raise err("match", f"unknown key {sorted(set(match) - MATCH_KEYS)[0]!r}")
    names = match["measurement"]
    names = [names] if isinstance(names, str) else names
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
        raise err("match.measurement", "a measurement name or a list of them")
    conditions = []
    for k, pattern in _str_dict(err, "match.tags", match.get("tags") or {}).items():
        try:
            conditions.append((k, re.compile(pattern)))
        except re.error as exc:
            raise err(f"match.tags.{k}", f"not a regular expression: {exc}") from None
    fields = match.get("fields")
    if fields is not None:
        try:
            fields = re.compile(fields)
        except (re.error, TypeError) as exc:
            raise err("match.fields", f"not a regular expression: {exc}") from None
    return tuple(names), tuple(conditions), fields


def _tag_rules(err, spec: object) -> tuple[TagRule, ...]:
    if not isinstance(spec, dict):
        raise err("tags", "a mapping of contract tag -> source tags")
    rules = []
    for target, rule in spec.items():
        key = f"tags.{target}"
        rule = {"from": rule} if isinstance(rule, (list, str)) else rule
        if not isinstance(rule, dict) or set(rule) - TAG_KEYS:
            raise err(key, f"a list of source tags, or {{{', '.join(sorted(TAG_KEYS))}}}")
        sources = [rule.get("from")] if isinstance(rule.get("from"), str) else rule.get("from")
        if not isinstance(sources, list) or not sources or not all(isinstance(s, str) and s for s in sources):
            raise err(key, "'from' is a source tag name or a non-empty list of them")
        for flag in ("strip_port", "keep"):
            if not isinstance(rule.get(flag, False), bool):
                raise err(f"{key}.{flag}", "true or false")
        aliases = _str_dict(err, key + ".aliases", rule.get("aliases") or {})
        pattern = rule.get("pattern")
        if pattern is not None:
            try:
                pattern = re.compile(pattern)
            except (re.error, TypeError) as exc:
                raise err(key + ".pattern", f"not a regular expression: {exc}") from None
            if pattern.groups < 1:
                raise err(key + ".pattern", "needs a group ( ) around the value")
        rules.append(TagRule(str(target), tuple(sources), rule.get("strip_port", False), aliases,
                             rule.get("keep", False), pattern))
    return tuple(rules)


def _field_rules(err, to: str, spec: object) -> dict[str, FieldRule]:
    if not isinstance(spec, dict):
        raise err("fields", "a mapping of source field -> target field (or a spec)")
    known = MEASUREMENTS[to].counters | MEASUREMENTS[to].gauges
    rules = {}
    for source, rule in spec.items():
        key = f"fields.{source}"
        rule = {"to": rule} if isinstance(rule, str) else rule
        if not isinstance(rule, dict) or set(rule) - FIELD_KEYS:
            raise err(key, f"a target field name, or {{{', '.join(sorted(FIELD_KEYS))}}}")
        target = rule.get("to", source)
        if target not in known:
            hint = difflib.get_close_matches(str(target), known, n=1)
            raise err(key, f"{target!r} is not a field of {to}" + (f" (did you mean {hint[0]!r}?)" if hint else ""))
        scale = rule.get("scale")
        if "convert" in rule:
            if scale is not None:
                raise err(key, "give 'scale' or 'convert', not both")
            if rule["convert"] not in CONVERSIONS:
                raise err(key + ".convert", f"one of {', '.join(CONVERSIONS)}")
            scale = CONVERSIONS[rule["convert"]]
        if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float)) or scale <= 0):
            raise err(key + ".scale", "a positive number")
        values = rule.get("values")
        if values is not None and (not isinstance(values, dict) or not values):
            raise err(key + ".values", "a mapping of source value -> contract value")
        if not isinstance(rule.get("number", False), bool):
            raise err(key + ".number", "true or false")
        rules[str(source)] = FieldRule(target, scale, values, rule.get("number", False))
    return rules


def _str_dict(err, key: str, value: object) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise err(key, "a mapping of names to strings")
    out = {}
    for k, v in value.items():
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            raise err(f"{key}.{k}", "a string")
        out[k] = str(v)
    return out
