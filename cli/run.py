"""Composition: build the pipeline from files and flags."""
from __future__ import annotations

from pathlib import Path

from engine.jobs import JobBook
from engine.pipeline import EngineConfig, Pipeline
from engine.topology import Topology
from rules.loader import load_rules


def load_models(folder: Path | None):
    """The trained models in `folder` (None: rules only); ModelError says what is wrong."""
    if folder is None:
        return None
    from models.store import load
    return load(folder)


def build_pipeline(*, topology: Topology, jobs_file: Path | None, rule_files: list[Path] | None,
                   config: EngineConfig = EngineConfig(), models=None) -> Pipeline:
    """models: a loaded models.store.ModelSet, or None for rules alone."""
    return Pipeline(rules=load_rules(rule_files), topology=topology, jobs=JobBook.from_file(jobs_file),
                    config=config, models=models)
