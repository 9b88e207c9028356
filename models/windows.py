"""Feature windows: per-entity means of the model features over fixed event-time windows.

Training and scoring cut windows the same way (this module), so a model sees at run time
exactly the kind of vector it learned from. Windows are aligned to multiples of
`window_s` in event time; a window closes when event time reaches its end, and only
entities that reported in it get a row.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field
from functools import partial
from typing import Callable

import msgspec
import numpy as np

from models.catalogue import BY_MEASUREMENT, EWM_ALPHA, EWM_CLIP, ModelClass

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
    """acc(slot, vec): add one record's features (`vec`: the values of `names` in order,
    None where absent) to the slot's window sums. It runs for every record the models
    see, so the usual record (every feature present and a number) takes one C call to add
    them and counts once (`slot.full`); a record that lacks one or holds a string goes
    feature by feature (`slot.counts`). Generated once per class."""
    src = ["def acc(slot, vec):",
           "    try:",
           "        slot.sums = list(map(add, slot.sums, vec))",
           "        slot.full += 1",
           "        return",
           "    except TypeError:  # a None or a string among them",
           "        pass",
           "    sums, counts = slot.sums, slot.counts"]
    for i, n in enumerate(names):
        src += [f"    v = vec[{i}]  # {n}", "    if v is not None and v.__class__ is not str:",
                f"        sums[{i}] += v", f"        counts[{i}] += 1"]
    namespace: dict = {"add": operator.add}
    exec(compile("\n".join(src), "<model windows>", "exec"), namespace)
    return namespace["acc"]


_ACCUMULATE = {c.name: _compile_accumulate(c.feature_names) for c in BY_MEASUREMENT.values()}
_WIDTH = {c.name: len(c.feature_names) for c in BY_MEASUREMENT.values()}


def vector(measurement: str, feats: dict) -> tuple:
    """A feature dict as the tuple `WindowCutter.observe` takes (training's path; the
    detector's compiled features produce the tuple directly)."""
    return tuple(map(feats.get, BY_MEASUREMENT[measurement].feature_names))
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
    # series -> add(vec): the class's accumulator bound to the series' slot, so the
    # detector adds a record in one lookup and one call (`adder`). Not part of the state
    # (not in a checkpoint): rebuilt by `observe` on a series' next record.
    adders: dict[str, Callable[[tuple], None]] = field(default_factory=dict, repr=False, compare=False)

    def observe(self, measurement: str, series: str, tags: dict, ts: float, vec: tuple) -> None:
        add = self.adders.get(series)
        if add is None:
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
            if self.start is None:  # only before the first record: `close` always sets it
                self.start = ts // self.window_s * self.window_s
            add = self.adders[series] = partial(_ACCUMULATE[slot.cls], slot)
        add(vec)

    def snapshot(self) -> CutterState:
        return CutterState(self.start, {k: Slot(s.cls, s.key, s.device, list(s.sums), list(s.counts), s.full)
                                        for k, s in self.slots.items()})

    def restore(self, state: CutterState) -> None:
        """Continue from `state` (the accumulators are bound again at each series' next record)."""
        for slot in state.slots.values():
            if _WIDTH.get(slot.cls, -1) != len(slot.sums) or len(slot.sums) != len(slot.counts):
                raise ValueError(f"the checkpoint holds a window slot of class {slot.cls!r} "
                                 f"with {len(slot.sums)} sums and {len(slot.counts)} counts")
        self.start = state.start
        self.slots = {k: Slot(s.cls, s.key, s.device, list(s.sums), list(s.counts), s.full)
                      for k, s in state.slots.items()}
        self.adders = {}

    def due(self, now: float) -> bool:
        return self.start is not None and now >= self.start + self.window_s

    def close(self, now: float) -> tuple[float, dict[str, tuple[list[Slot], np.ndarray]]]:
        """(window start, class -> (slots, their feature means, one row each)) for the
        window that `now` ended; entities without data in it are left out. Opens the window
        holding `now`. The means are one array division per class (a feature no record of
        the window had is NaN), as every entity of a class closes at once."""
        start = self.start
        by_cls: dict[str, list[Slot]] = {}
        for slot in self.slots.values():
            if slot.full or any(slot.counts):
                by_cls.setdefault(slot.cls, []).append(slot)
        rows: dict[str, tuple[list[Slot], np.ndarray]] = {}
        for cls, slots in by_cls.items():
            sums = np.array([x.sums for x in slots], dtype=float)
            den = np.array([x.counts for x in slots], dtype=float)
            den += np.array([x.full for x in slots], dtype=float)[:, None]
            means = np.full_like(sums, NAN)
            np.divide(sums, den, out=means, where=den > 0)
            rows[cls] = (slots, means)
            n = sums.shape[1]
            for x in slots:
                x.sums = [0.0] * n
                if x.full:
                    x.full = 0
                if any(x.counts):
                    x.counts = [0] * n
        self.start = now // self.window_s * self.window_s
        return start, rows


@dataclass
class Smoother:
    """The long horizon: per entity, an exponentially weighted mean of its window means
    (NaN, a feature not reported in a window, leaves it unchanged). `row` returns the
    window's means followed by the smoothed ones: the vector a model scores. Until an
    entity has `warmup` windows the smoothed values are NaN (not scored): a mean started
    from one window is as noisy as that window, not as calm as the horizon.

    The mean is robust to a blip (Huber's): a window moves it by at most `clip` times
    the feature's usual step from it (an exponentially weighted mean of the clipped
    deviations, itself clipped, so one wild window does not widen its own bound), and
    never by less than `clip` times the feature's `floor` (`floors`: the catalogue's,
    the least spread a model allows it). A 3 s storage pause at 6x (a window's write
    latency 15 sigma up, the one before 7) lifted the plain mean by 8 of the horizon's
    scales, and it stayed above 3 of them for a minute and a half; a drift moves each window by less than the bound, and a step widens the
    bound by a sixth a window until the mean follows it (the window horizon sees the
    step at once). The state per entity is the means followed by the deviations."""

    alpha: float = EWM_ALPHA
    warmup: int = round(1 / EWM_ALPHA)
    clip: float = EWM_CLIP
    state: dict[str, list[float]] = field(default_factory=dict)
    seen: dict[str, int] = field(default_factory=dict)

    def _entity(self, key: str, f: int) -> list[float]:
        """The entity's state, means then deviations, NaN where unknown (a checkpoint from
        before the deviations holds the means alone: it is padded in place)."""
        st = self.state.get(key)
        if st is None:
            return [NAN] * (2 * f)
        if len(st) == f:
            st.extend([NAN] * f)
        return st

    def row(self, key: str, means: list[float], floors: list[float] | None = None) -> list[float]:
        f = len(means)
        st = self.state[key] = self._entity(key, f)
        a, c = self.alpha, self.clip
        for i, x in enumerate(means):
            if x != x:  # NaN
                continue
            e, d = st[i], st[f + i]
            if e != e:
                st[i] = x
                continue
            r = x - e
            if d == d:
                lim = c * max(d, floors[i] if floors is not None else 0.0)
                if lim > 0.0:
                    r = min(max(r, -lim), lim)
            st[i] = e + a * r
            st[f + i] = abs(r) if d != d else d + a * (abs(r) - d)
        n = self.seen[key] = self.seen.get(key, 0) + 1
        return means + (st[:f] if n >= self.warmup else [NAN] * f)

    def rows(self, keys: list[str], means: np.ndarray, floors: np.ndarray | None = None) -> np.ndarray:
        """`row` of every entity of one window of one class at once: (entities, 2 x
        features). The same arithmetic as `row`, element by element, in array operations;
        the state stays lists per entity (checkpoints keep their form)."""
        fl = None if floors is None else [float(x) for x in floors]
        if len(set(keys)) != len(keys):  # an entity twice: one after the other, as `row` would
            return np.array([self.row(k, m, fl) for k, m in zip(keys, means.tolist())], dtype=float)
        state, seen, f = self.state, self.seen, means.shape[1]
        prev = np.array([self._entity(k, f) for k in keys], dtype=float).reshape(len(keys), 2 * f)
        e, d = prev[:, :f], prev[:, f:]
        with np.errstate(invalid="ignore"):
            r = means - e
            bound = self.clip * np.maximum(d, 0.0 if fl is None else np.asarray(fl))
            clipped = np.where(np.isnan(d) | ~(bound > 0.0), r, np.clip(r, -bound, bound))
            moved = e + self.alpha * clipped
            dev = np.where(np.isnan(d), np.abs(clipped), d + self.alpha * (np.abs(clipped) - d))
        fresh = np.isnan(e)
        ewm = np.where(np.isnan(means), e, np.where(fresh, means, moved))
        dev = np.where(np.isnan(means) | fresh, d, dev)
        counts = []
        for k, m, v in zip(keys, ewm.tolist(), dev.tolist()):
            state[k] = m + v
            c = seen[k] = seen.get(k, 0) + 1
            counts.append(c)
        warm = np.asarray(counts) >= self.warmup
        return np.hstack([means, np.where(warm[:, None], ewm, NAN)])

    def snapshot(self) -> SmootherState:
        return SmootherState({k: list(v) for k, v in self.state.items()}, dict(self.seen))

    def restore(self, state: SmootherState) -> None:
        self.state = {k: list(v) for k, v in state.ewm.items()}
        self.seen = dict(state.seen)


class CutterState(msgspec.Struct, frozen=True):
    start: float | None
    slots: dict[str, Slot]  # series -> its sums for the open window


class SmootherState(msgspec.Struct, frozen=True):
    ewm: dict[str, list[float]]
    seen: dict[str, int]
