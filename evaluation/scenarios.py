"""Run the engine, or the published baselines, on one generated scenario folder."""
from __future__ import annotations

import json
from pathlib import Path

from compose import EngineSettings, build_engine, replay_with
from compose.engine import load_models
from engine.jobs import JobBook
from engine.pipeline import EngineConfig, Stats
from engine.topology import load_topology

_LOADED: dict[Path, object] = {}


def fabric_tag(fabric: dict) -> str:
    """A generated fabric's spec as a folder name: spines x leaves x hosts per leaf x storage."""
    return f"{fabric['spines']}x{fabric['leaves']}x{fabric['hosts_per_leaf']}x{fabric['storage_hosts']}"


def scenario_models(models_dir: Path, truth: dict):
    """The models to score a generated scenario with. `models_dir` is one model folder,
    or a folder of model folders named by fabric spec (see `fabric_tag`; scripts/accuracy
    trains one per fabric of the suite, as a deployment trains on its own fabric); each
    folder is loaded once."""
    from models.store import META_FILE, ModelError

    folder = Path(models_dir)
    if not (folder / META_FILE).exists() and folder.is_dir() and "fabric" in truth:
        tag = fabric_tag(truth["fabric"])
        folder = folder / tag
        if not folder.is_dir():
            raise ModelError(f"{models_dir}: neither a model folder nor one with models for fabric {tag} "
                             f"({folder} is missing)")
    if folder not in _LOADED:
        _LOADED[folder] = load_models(folder)
    return _LOADED[folder]


def scenario_files(folder: Path) -> dict[str, Path]:
    """The four files of a generated scenario; ValueError names what is missing."""
    files = {
        "topology": folder / "topology.dot",
        "jobs": folder / "jobs.jsonl",
        "telemetry": folder / "telemetry.jsonl.gz",
        "truth": folder / "truth.json",
    }
    missing = [str(p) for p in files.values() if not p.exists()]
    if missing:
        raise ValueError(f"{folder}: not a scenario folder (missing {', '.join(missing)})")
    return files


def scenario_settings(folder: Path, *, rule_files: list[Path] | None = None,
                      config: EngineConfig = EngineConfig()) -> EngineSettings:
    """The engine settings of a generated scenario: its topology and jobs, `rule_files`."""
    files = scenario_files(folder)
    return EngineSettings(topology=files["topology"], jobs_file=files["jobs"], rule_files=tuple(rule_files or ()),
                          config=config)


def replay_scenario(folder: Path, *, rule_files: list[Path] | None = None, models_dir: Path | None = None,
                    models=None, config: EngineConfig = EngineConfig(),
                    shards: int = 1) -> tuple[dict, list[dict], Stats]:
    """Replay one generated scenario in memory: (truth, final incidents, stats). Anomaly
    models come loaded (`models`) or from a folder (`models_dir`); neither: rules only.
    `shards` > 1 detects on that many processes (engine/shards.py), as `replay` does."""
    files = scenario_files(folder)
    if models is None and models_dir is not None:
        models = scenario_models(models_dir, json.loads(files["truth"].read_text()))
    settings = scenario_settings(folder, rule_files=rule_files, config=config)
    parts = build_engine(settings, models=models)
    latest: dict[str, dict] = {}

    def sink(changes: list[dict]) -> None:
        for inc in changes:
            latest[inc["id"]] = inc

    stats = replay_with(parts, [files["telemetry"]], shards=shards, sink=sink)
    truth = json.loads(files["truth"].read_text())
    return truth, sorted(latest.values(), key=lambda i: (i["opened_at"], i["id"])), stats


def baseline_scenario(folder: Path, methods: list[str], *,
                      config: EngineConfig = EngineConfig()) -> tuple[dict, dict[str, list[dict]], int]:
    """Run published root-cause baselines (evaluation.baselines: BARO, N-Sigma) on one
    generated scenario, handing them each fault's start time as RCAEval does: (truth,
    incidents per method, records read). The telemetry is read once for all methods, in
    the order `config` sets, as the engine's replay of the scenario reads it."""
    from evaluation.baselines import METHODS, collect, incident

    files = scenario_files(folder)
    truth = json.loads(files["truth"].read_text())
    topology = load_topology(files["topology"])
    book = JobBook.from_file(files["jobs"])
    times = [f["start"] for f in truth.get("faults", [])]
    frames, records = collect([files["telemetry"]], times, config=config)
    out = {
        m: [incident(frame, METHODS[m], topology=topology, jobs=book.running(frame.t0), number=i)
            for i, frame in enumerate(frames, start=1)]
        for m in methods
    }
    return truth, out, records


def find_scenarios(paths: list[Path]) -> list[Path]:
    """Scenario folders named directly, or found one level below a suite folder."""
    out: list[Path] = []
    for p in paths:
        if (p / "truth.json").exists():
            out.append(p)
        elif p.is_dir():
            found = sorted(c for c in p.iterdir() if (c / "truth.json").exists())
            if not found:
                raise ValueError(f"{p}: no scenario folders (with truth.json) in it")
            out.extend(found)
        else:
            raise ValueError(f"{p}: no such folder")
    return out


def training_code() -> str:
    """A digest of the code that trains models (models/*.py): models cached by
    `history_models` under another digest were trained by other code."""
    import hashlib
    digest = hashlib.sha256()
    for path in sorted((Path(__file__).resolve().parent.parent / "models").glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def history_models(histories: Path, run: str):
    """The models of one run of a split, trained on that run's own clean history
    (`python -m sim.history` writes `histories/<run>/`): loaded from
    `histories/<run>/models/`, trained there first if absent or trained by other code
    (`training_code`, kept in `models/TRAINED_BY`: a score after a change to training
    must not read the models of before), on the history's telemetry and topology, seed 0,
    the `train` defaults; a second scoring reuses them."""
    from models.store import META_FILE, ModelError, save
    from models.train import train

    folder = Path(histories) / run
    models = folder / "models"
    stamp, code = models / "TRAINED_BY", training_code()
    if not (models / META_FILE).exists() or not stamp.exists() or stamp.read_text().strip() != code:
        try:
            files = scenario_files(folder)
        except ValueError as exc:
            raise ModelError(f"no clean history for run {run} ({exc}); build it with "
                             f"python -m sim.history SPLIT_DIR --out {histories}") from None
        trained, training = train([files["telemetry"]], topologies=[load_topology(files["topology"])])
        save(trained, models, training=training)
        stamp.write_text(code + "\n")
    return load_models(models)
