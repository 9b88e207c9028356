"""EngineSettings -> EngineParts -> the stages (see the package docstring)."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from engine.jobs import JobBook
from engine.k8s_pods import DEFAULT_JOB_LABELS, DEFAULT_TENANT_LABELS, PodLabels
from engine.mapping import MappingSet, default_mappings
from engine.pipeline import CorrelateStage, DetectStage, EngineConfig, Pipeline
from engine.ports import AnomalyScorer, MaintenanceSource
from engine.topology import Topology, load_topology
from rules.loader import load_rules
from rules.schema import RuleSet

if TYPE_CHECKING:
    from models.store import ModelSet

log = logging.getLogger("fabric_rca.compose")


@dataclass(frozen=True)
class EngineSettings:
    """What the engine of one process is made of: its files and its tunables."""

    topology: Path | None = None  # None: the caller hands build_engine a loaded Topology
    jobs_file: Path | None = None  # jobs to preload (the workers also read them from the jobs topic)
    rule_files: tuple[Path, ...] = ()  # empty: the built-in catalogue
    models_dir: Path | None = None  # anomaly models from `fabric-rca train`; None: rules only
    mapping_dirs: tuple[Path, ...] = ()  # folders of mapping files, tried before $FABRIC_RCA_MAPPINGS' and the shipped
    config: EngineConfig = field(default_factory=EngineConfig)  # ordering, ticks, correlation, learn rate
    pod_job_labels: tuple[str, ...] = DEFAULT_JOB_LABELS  # Kubernetes pod labels naming a pod's job, first wins
    pod_tenant_labels: tuple[str, ...] = DEFAULT_TENANT_LABELS  # ... and its tenant (else its namespace)

    @property
    def pod_labels(self) -> PodLabels:
        return PodLabels(job=self.pod_job_labels, tenant=self.pod_tenant_labels)


@dataclass(frozen=True)
class EngineParts:
    """The loaded, checked parts; the stages are made from them (`new_*`)."""

    rules: RuleSet
    topology: Topology
    roles: dict[str, str]
    config: EngineConfig
    jobs_file: Path | None = None
    models: "ModelSet | None" = None
    pod_labels: PodLabels = PodLabels()
    mappings: MappingSet | None = None  # None: engine.mapping.default_mappings()
    # The maintenance windows in force (an adapter's, e.g. api.maintenance.StoreWindows); None: none.
    maintenance: MaintenanceSource | None = None

    def job_book(self) -> JobBook:
        """A fresh book of the preloaded jobs (each correlator holds its own)."""
        return JobBook.from_file(self.jobs_file, labels=self.pod_labels)

    def scorer(self) -> AnomalyScorer | None:
        """A fresh anomaly scorer (it holds run-time state: one per detect stage), or None."""
        return self.models.scorer(learn_rate=self.config.learn_rate) if self.models is not None else None


def load_models(folder: Path | None) -> "ModelSet | None":
    """The trained models in `folder` (None: rules only); ModelError says what is wrong.
    scikit-learn is imported only when models are used."""
    if folder is None:
        return None
    from models.store import load
    return load(folder)


def build_engine(settings: EngineSettings, *, topology: Topology | None = None,
                 models: "ModelSet | None" = None) -> EngineParts:
    """Load and check every part `settings` names. A `topology` or `models` already
    loaded (a scenario's, a cache of model folders) is used instead of reading its file."""
    if topology is None:
        if settings.topology is None:
            raise ValueError("the engine needs a topology: a file in EngineSettings.topology, or one loaded")
        topology = load_topology(settings.topology)
        for line in topology.warnings:  # what the reader guessed or left out: the operator should know
            log.warning("topology: %s", line)
    if models is None:
        models = load_models(settings.models_dir)
    return EngineParts(rules=load_rules(list(settings.rule_files) or None), topology=topology,
                       roles={d: topology.role(d) for d in topology.devices()}, config=settings.config,
                       jobs_file=settings.jobs_file, models=models, pod_labels=settings.pod_labels,
                       mappings=default_mappings(settings.mapping_dirs))


def new_pipeline(parts: EngineParts) -> Pipeline:
    """Both stages in one process (`replay`, `evaluate`)."""
    return Pipeline(rules=parts.rules, topology=parts.topology, jobs=parts.job_book(), config=parts.config,
                    scorer=parts.scorer(), mappings=parts.mappings, maintenance=parts.maintenance)


def new_detect_stage(parts: EngineParts, source: str) -> DetectStage:
    """Stage 1 for one source (a worker: one telemetry partition)."""
    return DetectStage(rules=parts.rules, roles=parts.roles, config=parts.config, source=source,
                       scorer=parts.scorer(), mappings=parts.mappings)


def new_correlate_stage(parts: EngineParts, sources: Iterable[str]) -> CorrelateStage:
    """Stage 2, waiting for every named source before it applies anything."""
    scorer = parts.scorer()
    return CorrelateStage(topology=parts.topology, rules=parts.rules, jobs=parts.job_book(), config=parts.config,
                          sources=sources, opens_incident=scorer.opens_incident if scorer is not None else None,
                          maintenance=parts.maintenance)
