"""The detector's small pure helpers: rule entity templates, evidence peaks, the
symptoms pending a drain and their checkpoint form (engine/detect.py, models/scorer.py)."""
from __future__ import annotations

import re
from collections.abc import Iterable

from engine.events import SymptomWire, symptom_from_wire, symptom_to_wire
from engine.types import Symptom
from rules.schema import Rule

_FIELD = re.compile(r"\{([A-Za-z0-9_]+)\}")
Feature = bool | int | float | str | None


def _template(text: str) -> list[tuple[bool, str]]:
    parts, pos = [], 0
    for m in _FIELD.finditer(text):
        if m.start() > pos:
            parts.append((False, text[pos:m.start()]))
        parts.append((True, m.group(1)))
        pos = m.end()
    if pos < len(text):
        parts.append((False, text[pos:]))
    return parts


def _peaks(peaks: dict[str, float], rule: Rule, feats: dict) -> None:
    for f in rule.features:
        v = feats.get(f)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v > peaks.get(f, float("-inf")):
            peaks[f] = float(v)


def end_all(symptoms: dict, out: list[Symptom]) -> None:
    """End of input: every symptom in `symptoms` ends at its last sign, into `out`."""
    for sym in symptoms.values():
        sym.end = sym.last
        out.append(sym)
    symptoms.clear()


def symptom_key(rule_id: str, entity_id: str, start: float) -> str:
    return f"{rule_id}@{entity_id}@{start:.3f}"



def pending_out(out: list[Symptom], live: Iterable[Symptom]) -> list[str | SymptomWire]:
    ids = {id(s) for s in live}
    return [s.key if id(s) in ids else symptom_to_wire(s) for s in out]


def restore_out(out: list[str | SymptomWire], live: Iterable[Symptom]) -> list[Symptom]:
    by_key = {s.key: s for s in live}
    try:
        return [by_key[x] if isinstance(x, str) else symptom_from_wire(x) for x in out]
    except KeyError as exc:
        raise ValueError(f"a pending symptom {exc} is neither active nor silent") from None
