"""Training: recorded telemetry -> feature windows per entity -> one model per class.

The records go through the engine's own stages (parse, reorder, features) and the same
window cutter as scoring, so training and scoring cannot disagree on what a feature or a
window is. The data should be clean or mostly clean: medians, MADs and a high quantile
of forest scores tolerate a few faulty windows, not a fault that lasts most of the file.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from engine.features import FeatureExtractor, plan
from engine.normalize import Parser
from engine.pipeline import EngineConfig, new_reorderer
from engine.replay import check_files, open_lines
from engine.topology import Topology
from engine.types import rfc3339
from models.catalogue import CLASSES, EWM_NOISE
from models.model import ClassModel
from models.store import ModelSet
from models.windows import Smoother, WindowCutter, vector

DEFAULT_WINDOW_S = 5.0
DEFAULT_Z_MIN = 6.0


class TrainingError(ValueError):
    pass


@dataclass
class TrainingData:
    """Window rows per class, collected from a stream of records."""

    window_s: float = DEFAULT_WINDOW_S
    topologies: list[Topology] | None = None  # records of devices in none of them are skipped
    config: EngineConfig = field(default_factory=EngineConfig)  # the order stage's settings, as scoring's
    rows: dict[str, list[tuple[str, list[float]]]] = field(default_factory=dict)
    records: int = 0
    rejects: int = 0
    foreign: int = 0  # records of devices the topology does not know
    first: float | None = None
    last: float | None = None

    def __post_init__(self) -> None:
        self._order = new_reorderer(self.config)
        self._parse = Parser().parse_line
        self._extract = FeatureExtractor({c.measurement: plan(c.measurement, frozenset(c.feature_names))
                                          for c in CLASSES.values()})
        self._cut = WindowCutter(self.window_s)
        self._smooth = Smoother()
        self._known: dict[str, bool] = {}

    def feed(self, line: bytes) -> None:
        metrics, rejects = self._parse(line)
        self.records += len(metrics) + len(rejects)
        self.rejects += len(rejects)
        self._take(self._order.push(metrics, rejects))

    def finish(self) -> None:
        self._take(self._order.flush())
        if self._cut.start is not None and self.last is not None:
            self._close(self.last + self.window_s)

    def _take(self, metrics) -> None:
        cut = self._cut
        for m in metrics:
            if self.first is None:  # records come out of the reorderer in time order
                self.first = m.ts
            self.last = m.ts
            if cut.due(m.ts):
                self._close(m.ts)
            feats = self._extract.extract(m)
            if not feats:
                continue
            host = m.tags.get("host", "")
            if self.topologies:
                known = self._known.get(host)
                if known is None:
                    known = self._known[host] = any(t.role(host) is not None for t in self.topologies)
                if not known:
                    self.foreign += 1
                    continue
            cut.observe(m.name, m.series, m.tags, m.ts, vector(m.name, feats))

    def _close(self, now: float) -> None:
        _, rows = self._cut.close(now)
        for cls, (slots, means) in rows.items():
            keys = [slot.key for slot in slots]
            self.rows.setdefault(cls, []).extend(zip(keys, self._smooth.rows(keys, means, CLASSES[cls].floors)))


def train(files: list[Path], *, topologies: list[Topology] | None = None, window_s: float = DEFAULT_WINDOW_S,
          seed: int = 0, z_min: float = DEFAULT_Z_MIN,
          progress: Callable[[TrainingData], None] | None = None,
          config: EngineConfig = EngineConfig()) -> tuple[ModelSet, dict]:
    """A model set learned from `files`, and a description of the training for the metadata.
    Each file is its own stream (its own event-time order, `config`'s, as the detect stage
    that will score it orders its input): recordings of several fabrics or of several
    days may cover the same or overlapping times."""
    if window_s <= 0:
        raise TrainingError("--window-s must be positive")
    paths = check_files(files)
    streams = []
    for path in paths:
        data = TrainingData(window_s, topologies, config=config)
        for n, line in enumerate(open_lines(path), 1):
            data.feed(line)
            if progress and n % 50_000 == 0:
                progress(data)
        data.finish()
        if progress:
            progress(data)
        streams.append(data)
    rows: dict[str, list] = {}
    for data in streams:
        for cls, items in data.rows.items():
            rows.setdefault(cls, []).extend(items)
    if not rows:
        raise TrainingError("no usable telemetry for any model class (switch_port, switch_queue, nic_port, "
                            "storage) in " + ", ".join(str(p) for p in paths))
    classes = {}
    for name, items in sorted(rows.items()):
        c = CLASSES[name]
        keys = [k for k, _ in items]
        values = np.asarray([v for _, v in items], dtype=float)
        # The smoothed horizon's floor shrinks with its noise (EWM_NOISE), and its scale is
        # never below what white noise of the window's scale would give it: 600 s of
        # training hold only a few independent stretches of a minute-long mean, so its
        # own MAD alone can come out far too small (or, with the window floor, too large).
        base = [f.floor for f in c.features]
        floors = base + [x * EWM_NOISE for x in base]
        smooth = [(len(base) + i, i, EWM_NOISE) for i in range(len(base))]
        rel = [f.rel for f in c.features] + [f.rel * EWM_NOISE for f in c.features]
        classes[name] = ClassModel.fit(name, c.model_features, floors, keys, values,
                                       seed=seed, z_min=z_min, smooth=smooth, rel=rel)
    firsts = [d.first for d in streams if d.first is not None]
    lasts = [d.last for d in streams if d.last is not None]
    training = {
        "files": [str(p) for p in paths],
        "records": sum(d.records for d in streams),
        "rejects": sum(d.rejects for d in streams),
        "foreign_records": sum(d.foreign for d in streams),
        "from": rfc3339(min(firsts)) if firsts else None,
        "to": rfc3339(max(lasts)) if lasts else None,
        "seconds": round(sum((d.last or 0.0) - (d.first or 0.0) for d in streams), 3),
        "seed": seed,
        "z_min": z_min,
    }
    return ModelSet(classes, window_s), training
