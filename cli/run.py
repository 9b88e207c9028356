"""Composition: build the pipeline from files and flags, run replays and evaluations."""
from __future__ import annotations

import json
from pathlib import Path

from engine.jobs import JobBook
from engine.pipeline import EngineConfig, Pipeline, Stats
from engine.replay import FileFailure, replay
from engine.topology import Topology, load_topology
from rules.loader import load_rules


EXIT_FILES_FAILED = 1  # replay ran to the end, but some files broke part-way (their good lines were used)


def replay_exit_code(failures: list[FileFailure]) -> int:
    return EXIT_FILES_FAILED if failures else 0


def failure_dict(f: FileFailure) -> dict:
    return {"file": str(f.path), "lines": f.lines, "bytes": f.bytes, "error": f.error}


def failed_files_line(failures: list[FileFailure], *, total: int) -> str:
    """The summary line of a replay some of whose files broke: which, how far, why."""
    return (f"fabric-rca replay: {len(failures)} of {total} file(s) failed (the lines before each error were used): "
            + "; ".join(f.describe() for f in failures))


def load_models(folder: Path | None):
    """The trained models in `folder` (None: rules only); ModelError says what is wrong."""
    if folder is None:
        return None
    from models.store import load
    return load(folder)


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


def build_pipeline(*, topology: Topology, jobs_file: Path | None, rule_files: list[Path] | None,
                   config: EngineConfig = EngineConfig(), models=None) -> Pipeline:
    """models: a loaded models.store.ModelSet, or None for rules alone."""
    return Pipeline(rules=load_rules(rule_files), topology=topology, jobs=JobBook.from_file(jobs_file),
                    config=config, models=models)


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


def replay_scenario(folder: Path, *, rule_files: list[Path] | None = None,
                    models_dir: Path | None = None, models=None) -> tuple[dict, list[dict], Stats]:
    """Replay one generated scenario in memory: (truth, final incidents, stats). Anomaly
    models come loaded (`models`) or from a folder (`models_dir`); neither: rules only."""
    files = scenario_files(folder)
    if models is None and models_dir is not None:
        models = scenario_models(models_dir, json.loads(files["truth"].read_text()))
    pipeline = build_pipeline(topology=load_topology(files["topology"]), jobs_file=files["jobs"],
                              rule_files=rule_files, models=models)
    latest: dict[str, dict] = {}

    def sink(changes: list[dict]) -> None:
        for inc in changes:
            latest[inc["id"]] = inc

    stats = replay(pipeline, [files["telemetry"]], sink=sink)
    truth = json.loads(files["truth"].read_text())
    return truth, sorted(latest.values(), key=lambda i: (i["opened_at"], i["id"])), stats


def baseline_scenario(folder: Path, methods: list[str]) -> tuple[dict, dict[str, list[dict]], int]:
    """Run published root-cause baselines (models.baselines: BARO, N-Sigma) on one
    generated scenario, handing them each fault's start time as RCAEval does: (truth,
    incidents per method, records read). The telemetry is read once for all methods."""
    from models.baselines import METHODS, collect, incident

    files = scenario_files(folder)
    truth = json.loads(files["truth"].read_text())
    topology = load_topology(files["topology"])
    book = JobBook.from_file(files["jobs"])
    times = [f["start"] for f in truth.get("faults", [])]
    frames, records = collect([files["telemetry"]], times)
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
