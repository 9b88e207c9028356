"""Load rule files (YAML) into a validated `RuleSet`.

Every problem is a `RuleError` naming the file, the rule and the field, so an operator
can fix a rule file without reading code. `fabric-rca rules check FILE...` runs this
offline.
"""
from __future__ import annotations

import difflib
import math
import re
from importlib import resources
from pathlib import Path

import yaml

from contract.measurements import MEASUREMENTS, known_features
from rules.schema import ENTITY_KINDS, OPS, Condition, Level, Rule, RuleSet, SilenceRule

RULE_KEYS = {"id", "symptom", "family", "measurement", "when", "report", "hits", "within_s", "for_s", "clear_s",
             "clear_samples", "severity", "opens_incident", "at_once", "instant", "entity", "entity_kind", "description", "level",
             "count"}
LEVEL_KEYS = {"feature", "recent_s", "baseline_s", "bucket_s", "min_samples", "compare_samples", "quantile", "above", "ratio", "rise"}
SILENCE_KEYS = {"id", "symptom", "family", "silence", "severity", "opens_incident", "description"}
ROLES = ("spine", "superspine", "leaf", "host", "storage")
_COND = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(>=|<=|==|!=|>|<)\s*(.+?)\s*$")
_ID = re.compile(r"^[a-z][a-z0-9_]*$")


class RuleError(ValueError):
    def __init__(self, source: str, rule: str | None, field: str | None, message: str):
        where = source
        if rule:
            where += f": rule {rule!r}"
        if field:
            where += f": field {field!r}"
        super().__init__(f"{where}: {message}")


def default_rule_files() -> list[Path]:
    folder = resources.files("rules") / "catalogue"
    return sorted(Path(str(p)) for p in folder.iterdir() if p.name.endswith((".yaml", ".yml")))


def load_rules(paths: list[Path] | None = None) -> RuleSet:
    """The built-in catalogue when `paths` is None or empty."""
    files = [Path(p) for p in paths] if paths else default_rule_files()
    rules: list[Rule] = []
    silence: list[SilenceRule] = []
    seen: dict[str, str] = {}
    for path in files:
        for r in load_file(path):
            if r.id in seen:
                raise RuleError(str(path), r.id, "id", f"duplicate rule id (also in {seen[r.id]})")
            seen[r.id] = str(path)
            (silence if isinstance(r, SilenceRule) else rules).append(r)
    return RuleSet.of(rules, silence)


def load_file(path: Path) -> list[Rule | SilenceRule]:
    src = str(path)
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except FileNotFoundError:
        raise RuleError(src, None, None, "file not found") from None
    except yaml.YAMLError as exc:
        raise RuleError(src, None, None, f"not valid YAML: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("rules"), list):
        raise RuleError(src, None, "rules", "expected a mapping with a list under 'rules'")
    if doc.get("version", 1) != 1:
        raise RuleError(src, None, "version", f"unsupported version {doc.get('version')!r} (this engine reads 1)")
    out = []
    for i, raw in enumerate(doc["rules"]):
        if not isinstance(raw, dict):
            raise RuleError(src, f"#{i + 1}", None, "a rule must be a mapping")
        out.append(_silence(src, raw) if "silence" in raw else _rule(src, raw))
    return out


def _common(src: str, raw: dict, keys: set[str]) -> tuple[str, str, str]:
    rid = raw.get("id")
    if not isinstance(rid, str) or not _ID.match(rid):
        raise RuleError(src, str(rid), "id", "required: lower-case letters, digits and _")
    unknown = sorted(set(raw) - keys)
    if unknown:
        raise RuleError(src, rid, unknown[0], f"unknown field (allowed: {', '.join(sorted(keys))})")
    for key in ("symptom", "family"):
        if not isinstance(raw.get(key), str) or not _ID.match(raw[key]):
            raise RuleError(src, rid, key, "required: lower-case letters, digits and _")
    return rid, raw["symptom"], raw["family"]


def _number(src, rid, raw, key, default, *, lo, hi, integer=False):
    v = raw.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (integer and not isinstance(v, int)):
        raise RuleError(src, rid, key, f"must be {'an integer' if integer else 'a number'}, got {v!r}")
    if not lo <= v <= hi:
        raise RuleError(src, rid, key, f"must be within {lo}..{hi}, got {v}")
    return v


def _bool(src, rid, raw, key, default):
    v = raw.get(key, default)
    if not isinstance(v, bool):
        raise RuleError(src, rid, key, f"must be true or false, got {v!r}")
    return v


def _rule(src: str, raw: dict) -> Rule:
    rid, symptom, family = _common(src, raw, RULE_KEYS)
    meas = raw.get("measurement")
    if meas not in MEASUREMENTS:
        raise RuleError(src, rid, "measurement", f"unknown measurement {meas!r} (known: {', '.join(sorted(MEASUREMENTS))})")
    known = known_features(meas)
    level = _level(src, rid, raw["level"], known, meas) if "level" in raw else None
    when = raw.get("when")
    if level is not None:
        if when is not None:
            raise RuleError(src, rid, "when", "a level rule has no 'when': its test is under 'level'")
        # Present is all the kernel tests (every number passes); engine.baseline judges the level.
        when = {"all": [f"{level.feature} >= -1e300"]}
    if not isinstance(when, dict) or not set(when) <= {"all", "any"} or not when:
        raise RuleError(src, rid, "when", "must be a mapping with 'all' and/or 'any' lists of conditions")
    groups = {}
    for key in ("all", "any"):
        items = when.get(key, [])
        if not isinstance(items, list):
            raise RuleError(src, rid, f"when.{key}", "must be a list of conditions like 'feature > 10'")
        groups[key] = tuple(_condition(src, rid, f"when.{key}[{i}]", c, known, meas) for i, c in enumerate(items))
    if not groups["all"] and not groups["any"]:
        raise RuleError(src, rid, "when", "has no condition")
    m = MEASUREMENTS[meas]
    kind = raw.get("entity_kind", m.entity_kind)
    if kind not in ENTITY_KINDS:
        raise RuleError(src, rid, "entity_kind", f"must be one of {', '.join(ENTITY_KINDS)}")
    entity = raw.get("entity", m.entity)
    if not isinstance(entity, str) or "{host}" not in entity:
        raise RuleError(src, rid, "entity", "must be a template containing {host}, e.g. '{host}:{interface}'")
    report = raw.get("report", [])
    if not isinstance(report, list) or not all(isinstance(f, str) for f in report):
        raise RuleError(src, rid, "report", "must be a list of feature names")
    for i, f in enumerate(report):
        if f not in known:
            raise RuleError(src, rid, f"report[{i}]", f"unknown feature {f!r} for measurement {meas!r}")
    hits = _number(src, rid, raw, "hits", 1, lo=1, hi=10_000, integer=True)
    count = raw.get("count", "")
    if count and (not isinstance(count, str) or not count.endswith("_delta") or count not in known):
        raise RuleError(src, rid, "count", f"must name a counter's increase of measurement {meas!r} "
                        f"('x_delta', x one of its counters), got {count!r}")
    for_s = float(_number(src, rid, raw, "for_s", 0, lo=0, hi=86_400))
    if count and (level is not None or for_s > 0 or raw.get("instant")):
        raise RuleError(src, rid, "count", "counts a counter's increases: not with 'level', 'for_s' or 'instant'")
    return Rule(
        id=rid, symptom=symptom, family=family, measurement=meas,
        all=groups["all"], any=groups["any"], hits=hits,
        within_s=float(_number(src, rid, raw, "within_s", max(1, hits), lo=0.001, hi=86_400)),
        clear_s=float(_number(src, rid, raw, "clear_s", 5, lo=0.001, hi=86_400)),
        for_s=for_s,
        clear_samples=float(_number(src, rid, raw, "clear_samples", 3, lo=0, hi=1_000)),
        severity=float(_number(src, rid, raw, "severity", 0.5, lo=0, hi=1)),
        opens_incident=_bool(src, rid, raw, "opens_incident", True),
        at_once=_bool(src, rid, raw, "at_once", False),
        instant=_bool(src, rid, raw, "instant", False),
        entity_kind=kind, entity=entity, source=src, report=tuple(report), level=level, count=count,
    )


def _level(src: str, rid: str, spec, known, meas) -> Level:
    if not isinstance(spec, dict):
        raise RuleError(src, rid, "level", "must be a mapping with 'feature' and at least one of above, ratio, rise")
    unknown = sorted(set(spec) - LEVEL_KEYS)
    if unknown:
        raise RuleError(src, rid, f"level.{unknown[0]}", f"unknown field (allowed: {', '.join(sorted(LEVEL_KEYS))})")
    feature = spec.get("feature")
    if feature not in known:
        raise RuleError(src, rid, "level.feature", f"unknown feature {feature!r} for measurement {meas!r}")
    if not any(k in spec for k in ("above", "ratio", "rise")):
        raise RuleError(src, rid, "level", "needs at least one of above, ratio, rise")
    num = lambda key, default, lo, hi, integer=False: _number(  # noqa: E731
        src, rid, spec, key, default, lo=lo, hi=hi, integer=integer)
    above = spec.get("above")
    return Level(
        feature=feature,
        recent_s=float(num("recent_s", 60, 1, 86_400)), baseline_s=float(num("baseline_s", 300, 1, 86_400)),
        bucket_s=float(num("bucket_s", 10, 0.1, 3_600)), quantile=float(num("quantile", 0.5, 0, 1)), min_samples=num("min_samples", 5, 1, 1_000, True),
        compare_samples=num("compare_samples", 12, 1, 1_000, True),
        above=None if above is None else float(num("above", 0, -1e12, 1e12)),
        ratio=float(num("ratio", 0, 0, 1e6)), rise=float(num("rise", 0, 0, 1e12)),
    )


def _condition(src, rid, where, text, known, meas) -> Condition:
    if not isinstance(text, str):
        raise RuleError(src, rid, where, f"must be a string like 'feature > 10', got {text!r}")
    m = _COND.match(text)
    if not m:
        raise RuleError(src, rid, where, f"cannot read {text!r}: expected 'feature OP value' with OP in {' '.join(OPS)}")
    feature, op, value = m.groups()
    if feature not in known:
        close = difflib.get_close_matches(feature, sorted(known), n=3, cutoff=0.6)
        if feature + "_rate" in known:
            close = [feature + "_rate"] + [c for c in close if c != feature + "_rate"]
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise RuleError(src, rid, where, f"unknown feature {feature!r} for measurement {meas!r}{hint}")
    if value[:1] in "\"'" and value[-1:] == value[:1] and len(value) >= 2:
        parsed: float | str = value[1:-1]
        if op not in ("==", "!="):
            raise RuleError(src, rid, where, f"a string can only be compared with == or !=, not {op}")
    else:
        try:
            parsed = float(value)
        except ValueError:
            raise RuleError(src, rid, where, f"value {value!r} is not a number (quote strings)") from None
        if not math.isfinite(parsed):
            raise RuleError(src, rid, where, f"value {value!r} is not a finite number")
    return Condition(feature, op, parsed)


def _silence(src: str, raw: dict) -> SilenceRule:
    rid, symptom, family = _common(src, raw, SILENCE_KEYS)
    spec = raw["silence"]
    if not isinstance(spec, dict) or not set(spec) <= {"roles", "after_s", "after_intervals"}:
        raise RuleError(src, rid, "silence", "must be a mapping with 'roles', 'after_s' and optionally 'after_intervals'")
    roles = spec.get("roles")
    if not isinstance(roles, list) or not roles or any(r not in ROLES for r in roles):
        raise RuleError(src, rid, "silence.roles", f"must be a non-empty list of {', '.join(ROLES)}")
    return SilenceRule(
        id=rid, symptom=symptom, family=family, roles=tuple(roles),
        after_s=float(_number(src, rid, spec, "after_s", 5, lo=0.5, hi=86_400)),
        after_intervals=float(_number(src, rid, spec, "after_intervals", 3, lo=1, hi=1_000)),
        severity=float(_number(src, rid, raw, "severity", 0.8, lo=0, hi=1)),
        opens_incident=_bool(src, rid, raw, "opens_incident", True), source=src,
    )
