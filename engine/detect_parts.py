"""The detector's small pure helpers: rule entity templates, evidence (peaks and samples), the
symptoms pending a drain and their checkpoint form, and a rule's persistence in samples
(`needed`, `clear_after`) (engine/detect.py, models/scorer.py)."""
from __future__ import annotations

import math
import re
from collections.abc import Iterable

from engine.events import SymptomWire, symptom_from_wire, symptom_to_wire
from engine.samples import add as add_sample
from engine.types import Symptom
from rules.schema import Rule

_FIELD = re.compile(r"\{([A-Za-z0-9_]+)\}")
Feature = bool | int | float | str | None


def needed(rule: Rule, interval: float) -> int:
    """Samples the condition must hold in at sample interval `interval`: `hits` (one, for a
    rule that counts a counter's increases: `counted`), and
    more than an episode shorter than `for_s` can reach. An episode of d seconds overlaps
    at most ceil(d / interval) + 1 samples (it can straddle a sample boundary at each
    end), so n = ceil(for_s / interval) + 2 samples prove it lasted about for_s or more,
    whatever the interval and however strong the episode was."""
    if rule.count:  # `hits` are counted in a counter's increases, one sample may hold them all
        return 1
    if rule.for_s <= 0:
        return rule.hits
    # A gauge (`instant`) is read at the sample's instant, not over the interval: an
    # episode shorter than for_s holds at most ceil(for_s / I) samples, provided their
    # times span for_s (`_hit` checks that: jitter may bring samples closer than I), so
    # two readings for_s apart or more are proof enough. Its `hits` are read as seconds
    # (what they are at 1 s): at 30 s polling three readings took 60 s and more, and a
    # 60 s congestion, held in two readings 30 s apart, was never found.
    if rule.instant:
        return max(2, proof_samples(max(rule.for_s, rule.hits), interval) - 1)
    return max(rule.hits, proof_samples(rule.for_s, interval))


def proof_samples(for_s: float, interval: float) -> int:
    """Samples of a rate, ceil(for_s / interval) + 2, that prove an episode lasted about
    for_s or more (`needed`); engine/credible.py waits for a pause rule's as long."""
    return math.ceil(for_s / interval - 1e-9) + 2


def counted(rule: Rule, dq) -> int | float:
    """What a run of hits `dq` ((time, features) of each) adds up to in `rule.count`, a
    counter's increase."""
    return sum(f.get(rule.count) or 0 for _, f in dq)


def clear_after(rule: Rule, interval: float) -> float:
    """Seconds without a hit after which a symptom of `rule` ends."""
    return max(rule.clear_s, rule.clear_samples * interval)


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


def _evidence(sym: Symptom, rule: Rule, feats: dict, ts: float) -> None:
    """The rule's features of one record into the symptom: their peaks, and a sample of
    each (engine/samples.py: bounded, the peak and the first and last kept)."""
    peaks, samples = sym.metrics, sym.samples
    for f in rule.features:
        v = feats.get(f)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            v = float(v)
            if v > peaks.get(f, float("-inf")):
                peaks[f] = v
            series = samples.get(f)
            if series is None:
                samples[f] = [(ts, v)]
            else:
                add_sample(series, ts, v)


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


def missed(hits: dict, runs: dict[tuple[str, str], int], fired) -> bool:
    """A sample of a series (`runs`: its for_s rules' runs of hits, by (rule, entity), and
    the samples each missed) on which a for_s rule with a run of hits did not fire: the
    condition did not hold then. A run holds through a stray miss (a value at the
    threshold) but breaks once the misses pass a quarter of its samples: bursts that
    recur every few samples (collective phases every minute at 30 s polling) never add
    up to a condition that held for for_s seconds. A sample never sent is no miss (the
    window bounds those). Whether the series still has a run."""
    ids = {r.id for r in fired} if fired else ()
    for key in list(runs):
        if key[0] in ids:
            continue
        dq = hits.get(key)
        misses = runs[key] + 1
        if dq is None or misses * 4 > len(dq) + misses:
            hits.pop(key, None)
            del runs[key]
        else:
            runs[key] = misses
    return bool(runs)
