"""Replay's exit codes and failure lines; `build_pipeline`, a shorthand of `compose`."""
from __future__ import annotations

from pathlib import Path

from compose import EngineSettings, build_engine, new_pipeline
from compose.engine import load_models  # noqa: F401 - re-exported for the benchmarks
from engine.pipeline import EngineConfig, Pipeline
from engine.replay import FileFailure
from engine.topology import Topology


EXIT_FILES_FAILED = 1  # replay ran to the end, but some files broke part-way (their good lines were used)


def replay_exit_code(failures: list[FileFailure]) -> int:
    return EXIT_FILES_FAILED if failures else 0


def failure_dict(f: FileFailure) -> dict:
    return {"file": str(f.path), "lines": f.lines, "bytes": f.bytes, "error": f.error}


def failed_files_line(failures: list[FileFailure], *, total: int) -> str:
    """The summary line of a replay some of whose files broke: which, how far, why."""
    return (f"fabric-rca replay: {len(failures)} of {total} file(s) failed (the lines before each error were used): "
            + "; ".join(f.describe() for f in failures))


def build_pipeline(*, topology: Topology, jobs_file: Path | None, rule_files: list[Path] | None,
                   config: EngineConfig = EngineConfig(), models=None) -> Pipeline:
    """A pipeline of a loaded topology (and loaded models.store.ModelSet, or None for rules
    alone): a shorthand of the composition root (`compose`) for tests and benchmarks."""
    settings = EngineSettings(jobs_file=jobs_file, rule_files=tuple(rule_files or ()), config=config)
    return new_pipeline(build_engine(settings, topology=topology, models=models))
