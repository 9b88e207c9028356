"""EngineSettings -> EngineParts -> the stages (see the package docstring)."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from engine.cabling import CablingCheck, check_cabling
from engine.job_sources import load_jobs
from engine.jobs import Job, JobBook
from engine.k8s_pods import DEFAULT_JOB_LABELS, DEFAULT_TENANT_LABELS, PodLabels
from engine.mapping import MappingSet, default_mappings
from engine.pipeline import CorrelateStage, DetectStage, EngineConfig, Pipeline, Stats
from engine.replay import replay
from engine.shards import replay_sharded
from engine.ports import AnomalyScorer, MaintenanceSource
from engine.topology import Topology, load_topology
from engine.topology_load import TopologyError, read_spec
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
    lldp: Path | None = None  # `lldpctl -f json` of every device: link_miswired against the topology (None: no check)

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
    jobs: tuple[Job, ...] = ()  # the jobs file's jobs, read once (`engine.job_sources.load_jobs`: by event time)
    models: "ModelSet | None" = None
    pod_labels: PodLabels = PodLabels()
    mappings: MappingSet | None = None  # None: engine.mapping.default_mappings()
    # The maintenance windows in force (an adapter's, e.g. api.maintenance.StoreWindows); None: none.
    maintenance: MaintenanceSource | None = None
    cabling: CablingCheck | None = None  # the topology against the LLDP survey (None: no survey given)

    @property
    def miswired(self) -> tuple:
        """The miswired links, each a link_miswired incident of every correlator."""
        return self.cabling.miswired if self.cabling is not None else ()

    def job_book(self) -> JobBook:
        """A fresh book of the preloaded jobs (each correlator holds its own)."""
        book = JobBook()
        for job in self.jobs:
            book.update(job)
        return book

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
    cabling = None if settings.lldp is None else load_cabling(topology, settings.lldp, declared=settings.topology)
    jobs: tuple[Job, ...] = ()
    if settings.jobs_file is not None:
        jobs = tuple(job for _, job in load_jobs(settings.jobs_file, labels=settings.pod_labels))
        for line in jobs_warnings(settings.jobs_file, jobs, topology):
            log.warning("jobs: %s", line)
    return EngineParts(rules=load_rules(list(settings.rule_files) or None), topology=topology,
                       roles={d: topology.role(d) for d in topology.devices()}, config=settings.config,
                       jobs=jobs, models=models, pod_labels=settings.pod_labels,
                       mappings=default_mappings(settings.mapping_dirs), cabling=cabling)


def jobs_warnings(path: Path, snapshots: Iterable[Job], topology: Topology) -> list[str]:
    """What an operator should hear of a jobs file (its jobs: `snapshots`) before a
    replay or worker starts: a file of no job at all, and hosts its jobs run on that the
    topology does not hold (a scheduler's node names that are not the fabric's: those
    jobs are never found affected)."""
    jobs = {job.job_id: job for job in snapshots}
    if not jobs:
        return [f"{path}: no job in it (an empty queue?): no incident will name an affected job from it"]
    hosts = {h for job in jobs.values() for h in job.hosts}
    known = set(topology.devices())
    missing = sorted(hosts - known)
    if not missing:
        return []
    lost = sorted(j for j, job in jobs.items() if job.hosts and not set(job.hosts) & known)
    return [f"{path}: {len(missing)} of the {len(hosts)} hosts its {len(jobs)} job(s) run on are not in the topology "
            f"(e.g. {', '.join(missing[:3])}): no incident names them; "
            + (f"{len(lost)} job(s) have no host in it (e.g. {', '.join(lost[:3])})" if lost
               else "every job has a host in it")]


def load_cabling(topology: Topology, lldp: Path, *, declared: Path | None) -> CablingCheck:
    """The `lldp` survey checked against `topology` (engine/cabling.py); what it left out
    and the links it finds missing or extra are logged, as the topology's warnings are."""
    observed = read_spec(lldp)
    if not observed.surveyed:
        raise TopologyError(f"{lldp}: not lldpctl JSON output (no device's neighbours in it)")
    check = check_cabling(topology, observed, declared_source=str(declared or "the topology"), observed_source=str(lldp))
    for line in observed.warnings + check.warnings:
        log.warning("lldp: %s", line)
    return check


def new_pipeline(parts: EngineParts) -> Pipeline:
    """Both stages in one process (`replay`, `evaluate`)."""
    return Pipeline(rules=parts.rules, topology=parts.topology, jobs=parts.job_book(), config=parts.config,
                    scorer=parts.scorer(), mappings=parts.mappings, maintenance=parts.maintenance,
                    miswired=parts.miswired)


def replay_with(parts: EngineParts, files: list[Path], *, shards: int = 1, speed: float | None = None,
                **kw) -> Stats:
    """`files` replayed through the engine `parts` make (engine/replay.py's keywords: sink,
    rejects_path, progress, on_file_error): in this process, or, when `shards` > 1 and the
    replay is not paced, on that many processes with the same incidents (engine/shards.py)."""
    if shards > 1 and not speed:
        names = [f"shard{k}" for k in range(shards)]
        return replay_sharded(lambda source: new_detect_stage(parts, source),
                              new_correlate_stage(parts, names), files, shards=shards, roles=parts.roles, **kw)
    return replay(new_pipeline(parts), files, speed=speed, **kw)


def new_detect_stage(parts: EngineParts, source: str) -> DetectStage:
    """Stage 1 for one source (a worker: one telemetry partition; a replay shard)."""
    return DetectStage(rules=parts.rules, roles=parts.roles, config=parts.config, source=source,
                       scorer=parts.scorer(), mappings=parts.mappings,
                       interfaces=parts.topology.cabled_interfaces())


def new_correlate_stage(parts: EngineParts, sources: Iterable[str]) -> CorrelateStage:
    """Stage 2, waiting for every named source before it applies anything."""
    scorer = parts.scorer()
    return CorrelateStage(topology=parts.topology, rules=parts.rules, jobs=parts.job_book(), config=parts.config,
                          sources=sources, opens_incident=scorer.opens_incident if scorer is not None else None,
                          maintenance=parts.maintenance, miswired=parts.miswired)
