"""The composition root: the engine's parts built once, from one settings object.

`replay`, the Kafka workers, `evaluate` and the benchmarks all diagnose with parts made
here, so the rules, topology, roles, job book, anomaly scorer and `EngineConfig` a
process runs with cannot be wired two ways. It imports the core (contract, rules,
engine) and models, never an adapter or a framework: `cli/` and `streams/` both use it
(streams may not import cli), and `models/` never imports it (training is handed the
`EngineConfig`).
"""
from compose.engine import EngineParts, EngineSettings, build_engine, new_correlate_stage, new_detect_stage, new_pipeline, replay_with

__all__ = ["EngineParts", "EngineSettings", "build_engine", "new_correlate_stage", "new_detect_stage", "new_pipeline", "replay_with"]
