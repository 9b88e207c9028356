"""Feature windows: per-entity means of the model features over fixed event-time windows.

Training and scoring cut windows the same way (this module), so a model sees at run time
exactly the kind of vector it learned from. Windows are aligned to multiples of
`window_s` in event time; a window closes when event time reaches its end, and only
entities that reported in it get a row.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field

from models.catalogue import BY_MEASUREMENT, EWM_ALPHA, ModelClass

NAN = float("nan")


def entity_key(cls: ModelClass, tags: dict) -> str | None:
    """The identity one baseline is kept for: the symptom entity, plus the queue or the
    disk when an entity has several (a port's queues, a storage host's targets)."""
    host = tags.get("host")
    if not host:
        return None
    if cls.name == "storage":
        return f"{host}/{tags.get('kind', '')}/{tags.get('name', '')}"
    iface = tags.get("interface")
    if not iface:
        return None
    if cls.name == "queue":
        return f"{host}:{iface}/{tags.get('queue', '')}/{tags.get('queue_type', '')}"
    return f"{host}:{iface}"


def symptom_entity(cls: ModelClass, key: str) -> str:
    """The contract entity id of a baseline key."""
    return key.split("/", 1)[0]


def _compile_accumulate(names: tuple[str, ...]):
    """acc(feats, slot): add the features `names` of one record to the slot's window sums.
    It runs for every record the models see, so the usual record (every feature present
    and a number) takes one C call to read them and one to add them, and counts once
    (`slot.full`); a record that lacks one or holds a string goes feature by feature
    (`slot.counts`). Generated once per class."""
    src = ["def acc(feats, slot):",
           "    try:",
           "        slot.sums = list(map(add, slot.sums, READ(feats)))",
           "        slot.full += 1",
           "        return",
           "    except (KeyError, TypeError):",
           "        pass",
           "    sums, counts, g = slot.sums, slot.counts, feats.get"]
    for i, n in enumerate(names):
        src += [f"    v = g({n!r})", "    if v is not None and v.__class__ is not str:",
                f"        sums[{i}] += v", f"        counts[{i}] += 1"]
    namespace: dict = {"add": operator.add, "READ": operator.itemgetter(*names)}
    exec(compile("\n".join(src), "<model windows>", "exec"), namespace)
    return namespace["acc"]


_ACCUMULATE = {c.name: _compile_accumulate(c.feature_names) for c in BY_MEASUREMENT.values()}
assert all(len(c.features) >= 2 for c in BY_MEASUREMENT.values())  # itemgetter returns a tuple


@dataclass
class Slot:
    """One entity's running sums for the open window: `full` records had every feature,
    `counts` counts the features of the others one by one."""

    cls: str
    key: str
    device: str
    sums: list[float]
    counts: list[int]
    full: int = 0


@dataclass
class WindowCutter:
    """Accumulates features per entity; `close(now)` returns the finished window's rows."""

    window_s: float = 5.0
    start: float | None = None  # start of the open window
    slots: dict[str, Slot] = field(default_factory=dict)  # series -> slot

    def observe(self, measurement: str, series: str, tags: dict, ts: float, feats: dict) -> None:
        slot = self.slots.get(series)
        if slot is None:
            cls = BY_MEASUREMENT.get(measurement)
            if cls is None:
                return
            key = entity_key(cls, tags)
            if key is None:
                return
            n = len(cls.features)
            slot = self.slots[series] = Slot(cls.name, key, tags["host"], [0.0] * n, [0] * n)
        if self.start is None:
            self.start = ts // self.window_s * self.window_s
        _ACCUMULATE[slot.cls](feats, slot)

    def due(self, now: float) -> bool:
        return self.start is not None and now >= self.start + self.window_s

    def close(self, now: float) -> tuple[float, dict[str, list[tuple[Slot, list[float]]]]]:
        """(window start, class -> [(slot, feature means)]) for the window that `now`
        ended; entities without data in it are left out. Opens the window holding `now`."""
        start = self.start
        rows: dict[str, list[tuple[Slot, list[float]]]] = {}
        for slot in self.slots.values():
            full, counts = slot.full, slot.counts
            if not full and not any(counts):
                continue
            means = [s / (full + c) if full + c else NAN for s, c in zip(slot.sums, counts)]
            rows.setdefault(slot.cls, []).append((slot, means))
            n = len(counts)
            slot.sums = [0.0] * n
            slot.counts = [0] * n
            slot.full = 0
        self.start = now // self.window_s * self.window_s
        return start, rows


@dataclass
class Smoother:
    """The long horizon: per entity, an exponentially weighted mean of its window means
    (NaN, a feature not reported in a window, leaves it unchanged). `row` returns the
    window's means followed by the smoothed ones: the vector a model scores. Until an
    entity has `warmup` windows the smoothed values are NaN (not scored): a mean started
    from one window is as noisy as that window, not as calm as the horizon."""

    alpha: float = EWM_ALPHA
    warmup: int = round(1 / EWM_ALPHA)
    state: dict[str, list[float]] = field(default_factory=dict)
    seen: dict[str, int] = field(default_factory=dict)

    def row(self, key: str, means: list[float]) -> list[float]:
        ewm = self.state.get(key)
        if ewm is None:
            ewm = self.state[key] = list(means)
        else:
            a = self.alpha
            for i, x in enumerate(means):
                if x == x:  # not NaN
                    e = ewm[i]
                    ewm[i] = x if e != e else e + a * (x - e)
        n = self.seen[key] = self.seen.get(key, 0) + 1
        return means + (ewm if n >= self.warmup else [NAN] * len(ewm))
