"""Composition: build the pipeline from files and flags."""
from __future__ import annotations

from pathlib import Path

from engine.jobs import JobBook
from engine.pipeline import EngineConfig, Pipeline
from engine.replay import FileFailure
from engine.topology import Topology
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


def build_pipeline(*, topology: Topology, jobs_file: Path | None, rule_files: list[Path] | None,
                   config: EngineConfig = EngineConfig(), models=None) -> Pipeline:
    """models: a loaded models.store.ModelSet, or None for rules alone."""
    scorer = models.scorer(learn_rate=config.learn_rate) if models is not None else None
    return Pipeline(rules=load_rules(rule_files), topology=topology, jobs=JobBook.from_file(jobs_file),
                    config=config, scorer=scorer)
