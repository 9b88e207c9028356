"""The engine's settings as command-line flags and FABRIC_RCA_* variables, from one list.

`replay` and `train` take the flags; the worker takes the same flags and, for each one
not given, its environment variable (then the default). Both parsers are built from
`ENGINE_FLAGS`, so a setting one of them has the other has too.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from compose import EngineSettings
from engine.pipeline import EngineConfig


def positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be greater than 0")
    return value


def unit(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 0 and below 1")
    return value


FILES, ORDER, ENGINE = "files", "order", "engine"  # groups: train takes ORDER only


@dataclass(frozen=True)
class EngineFlag:
    flag: str
    env: str
    path: str  # "topology" / "jobs_file" ... (EngineSettings) or "config.x" / "config.correlation.x"
    kind: Callable[[str], object]
    help: str
    group: str = ENGINE
    metavar: str | None = None
    repeat: bool = False  # a list: the flag repeats, the variable is separated by `sep`
    sep: str = ","

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    def default(self):
        """The default, read off EngineSettings() itself, so it cannot differ from the engine's."""
        value: object = EngineSettings(config=EngineConfig())
        for part in self.path.split("."):
            value = getattr(value, part)
        return value


ENGINE_FLAGS: tuple[EngineFlag, ...] = (
    EngineFlag("--topology", "FABRIC_RCA_TOPOLOGY", "topology", Path, "DOT, containerlab YAML or fabric-rca JSON",
               FILES),
    EngineFlag("--lldp", "FABRIC_RCA_LLDP", "lldp", Path,
               "`lldpctl -f json` of every device (a folder of DEVICE.json files, or one file): each declared link "
               "LLDP sees cabled elsewhere is a link_miswired incident; missing and extra links are warnings",
               FILES, metavar="DIR|FILE"),
    EngineFlag("--jobs", "FABRIC_RCA_JOBS", "jobs_file", Path,
               "jobs to preload: job_placement .jsonl, squeue --json / slurmrestd documents or kubectl get pods -o json, "
               "by content (the worker also reads fabric.jobs)", FILES),
    EngineFlag("--k8s-job-label", "FABRIC_RCA_K8S_JOB_LABELS", "pod_job_labels", str,
               "with a kubectl get pods -o json jobs file or message: a pod label naming its job, first found "
               "wins (repeatable; replaces the defaults listed in README.md)", FILES, metavar="KEY", repeat=True),
    EngineFlag("--k8s-tenant-label", "FABRIC_RCA_K8S_TENANT_LABELS", "pod_tenant_labels", str,
               "... and a pod label naming its tenant (else the namespace; repeatable)", FILES, metavar="KEY",
               repeat=True),
    EngineFlag("--rules", "FABRIC_RCA_RULES", "rule_files", Path,
               "rule file (repeatable; variable: comma-separated; default: built-in catalogue)", FILES, repeat=True),
    EngineFlag("--mappings", "FABRIC_RCA_MAPPINGS", "mapping_dirs", Path,
               "folder of mapping files for real exporters' measurements, tried before the shipped ones "
               f"(repeatable; variable: {os.pathsep}-separated)", FILES, metavar="DIR", repeat=True, sep=os.pathsep),
    EngineFlag("--models", "FABRIC_RCA_MODELS", "models_dir", Path,
               "anomaly models trained by `fabric-rca train` (default: rules only)", FILES, metavar="DIR"),
    EngineFlag("--learn-rate", "FABRIC_RCA_LEARN_RATE", "config.learn_rate", unit,
               "with --models: keep learning entities' baselines online from normal windows, this fraction of a "
               "scale per window (e.g. 0.01; default 0: as trained)", metavar="RATE"),
    EngineFlag("--lateness", "FABRIC_RCA_LATENESS", "config.lateness_s", positive,
               "release delay behind the fleet's event time, and the least lateness of any series "
               "(default 5)", ORDER, metavar="SECONDS"),
    EngineFlag("--lateness-intervals", "FABRIC_RCA_LATENESS_INTERVALS", "config.lateness_intervals", positive,
               "a late record is taken within this many of its series' sample intervals behind the fleet "
               "(default 3)", ORDER, metavar="N"),
    EngineFlag("--max-lateness", "FABRIC_RCA_MAX_LATENESS", "config.max_lateness_s", positive,
               "... but never more than this far behind (default 180)", ORDER, metavar="SECONDS"),
    EngineFlag("--skew", "FABRIC_RCA_SKEW", "config.skew_s", positive,
               "clock skew allowed: a record more than max(3 intervals, 10 s) + this ahead of the fleet is "
               "quarantined as future_timestamp (default 30)", ORDER, metavar="SECONDS"),
    EngineFlag("--resolve-after", "FABRIC_RCA_RESOLVE_AFTER", "config.correlation.resolve_after_s", positive,
               "resolve an incident after its symptoms stay quiet this long (event time; default 60)",
               metavar="SECONDS"),
    EngineFlag("--reopen-within", "FABRIC_RCA_REOPEN_WITHIN", "config.correlation.reopen_s", positive,
               "a resolved incident whose cause comes back on its entity this soon reopens, same id, instead "
               "of a new incident (event time; default 300)", metavar="SECONDS"),
)


def add_engine_arguments(p: argparse.ArgumentParser, *, from_env: bool, groups: tuple[str, ...] = (FILES, ORDER, ENGINE),
                         required: tuple[str, ...] = ()) -> None:
    """The engine flags of `groups`. With `from_env` (the worker) a flag not given falls
    back to its variable, so its default is applied later (`engine_settings`)."""
    added = tuple(f.flag for f in ENGINE_FLAGS if f.group in groups)
    p.set_defaults(engine_flags=added)  # what `engine_settings` reads back (train has a --topology of its own)
    for f in ENGINE_FLAGS:
        if f.flag not in added:
            continue
        default = None if from_env or f.repeat else f.default()
        helptext = f.help + (f" (or {f.env})" if from_env else "")
        p.add_argument(f.flag, dest=f.dest, type=f.kind, default=default, metavar=f.metavar,
                       action="append" if f.repeat else "store", required=f.flag in required and not from_env,
                       help=helptext)


def _from_env(f: EngineFlag, env: Mapping[str, str]):
    text = env.get(f.env, "").strip()
    if not text:
        return None
    items = [t.strip() for t in text.split(f.sep) if t.strip()] if f.repeat else [text]
    try:
        values = [f.kind(t) for t in items]
    except (argparse.ArgumentTypeError, ValueError) as exc:
        raise ValueError(f"{f.env}={text!r}: {exc}") from None
    return values if f.repeat else values[0]


def engine_settings(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> EngineSettings:
    """The EngineSettings of parsed `args` (flags added by `add_engine_arguments`); with
    `env`, a flag not given is read from its variable. ValueError names a bad variable."""
    top: dict[str, object] = {}
    config: dict[str, object] = {}
    correlation: dict[str, object] = {}
    added = set(args.engine_flags)
    for f in ENGINE_FLAGS:
        if f.flag not in added:
            continue
        value = getattr(args, f.dest)
        if value is None and env is not None:
            value = _from_env(f, env)
        if value is None:
            continue
        if f.repeat:
            value = tuple(value)
        where, _, name = f.path.rpartition(".")
        {"": top, "config": config, "config.correlation": correlation}[where][name] = value
    base = EngineConfig()
    if correlation:
        config["correlation"] = dataclasses.replace(base.correlation, **correlation)
    return EngineSettings(**top, config=dataclasses.replace(base, **config))
