"""Composition: build the pipeline from files and flags, run replays and evaluations."""
from __future__ import annotations

import json
from pathlib import Path

from engine.jobs import JobBook, load_jobs
from engine.pipeline import EngineConfig, Pipeline, Stats
from engine.replay import replay
from engine.topology import Topology, load_topology
from rules.loader import load_rules


def build_pipeline(*, topology: Topology, jobs_file: Path | None, rule_files: list[Path] | None,
                   config: EngineConfig = EngineConfig()) -> Pipeline:
    book = JobBook()
    if jobs_file:
        for _, job in load_jobs(jobs_file):
            book.update(job)
    return Pipeline(rules=load_rules(rule_files), topology=topology, jobs=book, config=config)


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


def replay_scenario(folder: Path, *, rule_files: list[Path] | None = None) -> tuple[dict, list[dict], Stats]:
    """Replay one generated scenario in memory: (truth, final incidents, stats)."""
    files = scenario_files(folder)
    pipeline = build_pipeline(topology=load_topology(files["topology"]), jobs_file=files["jobs"],
                              rule_files=rule_files)
    latest: dict[str, dict] = {}

    def sink(changes: list[dict]) -> None:
        for inc in changes:
            latest[inc["id"]] = inc

    stats = replay(pipeline, [files["telemetry"]], sink=sink)
    truth = json.loads(files["truth"].read_text())
    return truth, sorted(latest.values(), key=lambda i: (i["opened_at"], i["id"])), stats


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
