"""A trained model set on disk: `models.joblib` plus `metadata.json` that says what it is.

The metadata records the format version, the library versions it was trained with, each
class's feature list, the training window (event time) and files, and a SHA-256 of the
model file. Loading checks all of it before unpickling anything, so a missing, truncated,
edited or incompatible model is a clear `ModelError`, never a crash deep in scoring.
Model files are pickles: load only models you trained (as with any scikit-learn model).
"""
from __future__ import annotations

import hashlib
import json
import platform
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import joblib
import numpy
import sklearn

from models.catalogue import CLASSES, EWM_ALPHA, EWM_CLIP
from models.model import ClassModel

FORMAT = 1
MODEL_FILE = "models.joblib"
META_FILE = "metadata.json"

if TYPE_CHECKING:
    from models.scorer import ModelScorer


class ModelError(ValueError):
    """A model folder that cannot be used; the message says which file and why."""


@dataclass
class ModelSet:
    classes: dict[str, ClassModel]
    window_s: float
    meta: dict = field(default_factory=dict)

    def features_needed(self, measurement: str) -> frozenset[str]:
        out: set[str] = set()
        for c in self.classes.values():
            if CLASSES[c.cls].measurement == measurement:
                out |= set(CLASSES[c.cls].feature_names)
        return frozenset(out)

    def scorer(self, *, learn_rate: float = 0.0) -> "ModelScorer":
        """A fresh scorer of these models for one detect stage (engine.ports.AnomalyScorer)."""
        from models.scorer import ModelScorer
        return ModelScorer(self, learn_rate=learn_rate)

    def describe(self) -> str:
        parts = [f"{name} ({len(m.keys)} entities, {m.windows:,} windows)" for name, m in sorted(self.classes.items())]
        return f"{self.window_s:g} s windows; " + ", ".join(parts)


def _versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version
    try:
        own = version("fabric-rca")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        own = "source"
    return {"fabric-rca": own, "scikit-learn": sklearn.__version__, "numpy": numpy.__version__,
            "python": platform.python_version()}


def save(models: ModelSet, out: Path, *, training: dict) -> Path:
    """Write the model set into folder `out` (created); return the metadata path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model_path = out / MODEL_FILE
    joblib.dump({"format": FORMAT, "window_s": models.window_s, "ewm_alpha": EWM_ALPHA,
                 "classes": models.classes}, model_path,
                compress=3)
    digest = hashlib.sha256(model_path.read_bytes()).hexdigest()
    meta = {
        "format": FORMAT,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "versions": _versions(),
        "window_s": models.window_s,
        "ewm_alpha": EWM_ALPHA,
        "ewm_clip": EWM_CLIP,
        "classes": {
            name: {"features": list(m.features), "entities": len(m.keys), "windows": m.windows,
                   "threshold": round(m.threshold, 6), "z_min": m.z_min}
            for name, m in sorted(models.classes.items())
        },
        "training": training,
        "sha256": digest,
    }
    meta_path = out / META_FILE
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    models.meta = meta
    return meta_path


def _minor(v: str) -> str:
    return ".".join(v.split(".")[:2])


def load(folder: Path) -> ModelSet:
    """The model set in `folder`, checked; ModelError says what is wrong."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ModelError(f"{folder}: no such models folder (train one with `fabric-rca train`)")
    meta_path, model_path = folder / META_FILE, folder / MODEL_FILE
    for p in (meta_path, model_path):
        if not p.is_file():
            raise ModelError(f"{p}: missing; {folder} is not a complete model folder "
                             f"(train one with `fabric-rca train`)")
    try:
        meta = json.loads(meta_path.read_text())
        if not isinstance(meta, dict):
            raise ValueError("not a JSON object")
    except ValueError as exc:
        raise ModelError(f"{meta_path}: unreadable metadata: {exc}") from None
    if meta.get("format") != FORMAT:
        raise ModelError(f"{meta_path}: model format {meta.get('format')!r}; this fabric-rca reads format "
                         f"{FORMAT}: retrain with `fabric-rca train`")
    trained = (meta.get("versions") or {}).get("scikit-learn", "?")
    if _minor(str(trained)) != _minor(sklearn.__version__):
        raise ModelError(f"{meta_path}: trained with scikit-learn {trained}, this is {sklearn.__version__}: "
                         f"retrain with `fabric-rca train` (pickled forests are not portable across versions)")
    for name, info in (meta.get("classes") or {}).items():
        if name not in CLASSES:
            raise ModelError(f"{meta_path}: unknown entity class {name!r}; known: {', '.join(CLASSES)}")
        if tuple(info.get("features", ())) != CLASSES[name].model_features:
            raise ModelError(f"{meta_path}: class {name!r} was trained on features {info.get('features')}, "
                             f"this fabric-rca scores {list(CLASSES[name].model_features)}: retrain")
    if meta.get("ewm_alpha") != EWM_ALPHA:
        raise ModelError(f"{meta_path}: trained with a long-horizon weight of {meta.get('ewm_alpha')}, "
                         f"this fabric-rca uses {EWM_ALPHA}: retrain")
    if meta.get("ewm_clip") != EWM_CLIP:
        raise ModelError(f"{meta_path}: trained with a long-horizon clip of {meta.get('ewm_clip')} steps "
                         f"(none: before the smoothed mean was robust to blips), this fabric-rca uses "
                         f"{EWM_CLIP}: retrain")
    data = model_path.read_bytes()
    if hashlib.sha256(data).hexdigest() != meta.get("sha256"):
        raise ModelError(f"{model_path}: checksum does not match {META_FILE} (truncated or changed "
                         f"since training): retrain or restore the folder")
    try:
        doc = joblib.load(model_path)  # noqa: S301 - checked against the metadata's digest above
    except Exception as exc:  # noqa: BLE001 - any unpickling failure is a corrupt file
        raise ModelError(f"{model_path}: corrupt model file: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ModelError(f"{model_path}: not a fabric-rca model file")
    return ModelSet(doc["classes"], float(doc["window_s"]), meta)
