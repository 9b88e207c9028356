"""One composition root: `replay`, the worker and `train` take the engine's settings from
one list of flags (`cli.engine_flags.ENGINE_FLAGS`) and build the engine with
`compose.build_engine`, so a setting one of them has, the others have, and it reaches
the stage it sets. The worker's app is built without a broker, as in test_agents."""
from __future__ import annotations

import asyncio
import dataclasses
import os
import socket
from pathlib import Path
from unittest import mock

import faust
import pytest

from cli.engine_flags import ENGINE_FLAGS, ORDER, engine_settings
from cli.main import main, parser, worker_settings
from compose import EngineSettings, build_engine, new_correlate_stage, new_detect_stage, new_pipeline
from engine.correlate import CorrelationConfig
from engine.events import TICK, StageEvent, encode_batch
from engine.pipeline import CorrelateStage, DetectStage, EngineConfig
from rules.loader import load_rules
from streams.app import build_app

TOPOLOGY = Path(__file__).parent / "data" / "air.dot"
MAPPINGS = Path(__file__).parent / "data" / "mappings"
ENV = tuple(f.env for f in ENGINE_FLAGS) + ("FABRIC_RCA_BOOTSTRAP", "FABRIC_RCA_TELEMETRY_TOPICS")

# A value for each flag other than its default, as typed on a command line.
NOT_DEFAULT = {
    "--topology": "other.dot", "--jobs": "jobs.jsonl", "--rules": "a.yaml", "--models": "models",
    "--learn-rate": "0.25", "--lateness": "7", "--lateness-intervals": "4", "--max-lateness": "90",
    "--skew": "12", "--resolve-after": "30", "--reopen-within": "120", "--k8s-job-label": "app",
    "--k8s-tenant-label": "team",
    "--mappings": str(MAPPINGS), "--lldp": "lldp",
}


@pytest.fixture(autouse=True)
def no_engine_env(monkeypatch):
    for k in ENV:
        monkeypatch.delenv(k, raising=False)


def _options(command: str) -> set[str]:
    sub = next(a for a in parser()._subparsers._group_actions if a.dest == "command")  # noqa: SLF001
    return {o for action in sub.choices[command]._actions for o in action.option_strings}  # noqa: SLF001


def _replay(argv: list[str]) -> EngineSettings:
    return engine_settings(parser().parse_args(["replay", "x.jsonl", "--topology", str(TOPOLOGY), *argv]))


def _worker(argv: list[str]):
    return worker_settings(parser().parse_args(["worker", "--bootstrap", "127.0.0.1:1", "--topology", str(TOPOLOGY),
                                                "--data-dir", "/nonexistent", *argv]))


def _all_flags_but(*skip: str) -> list[str]:  # (the worker loads --models at once)
    return [a for flag, value in NOT_DEFAULT.items() if flag not in skip for a in (flag, value)]


def test_the_list_covers_every_engine_setting_and_its_defaults_are_the_engines():
    paths = {f.path for f in ENGINE_FLAGS}
    files = {f.name for f in dataclasses.fields(EngineSettings) if f.name != "config"}
    assert files <= paths
    assert {"config.lateness_s", "config.lateness_intervals", "config.max_lateness_s", "config.skew_s",
            "config.correlation.resolve_after_s", "config.learn_rate"} <= paths
    assert set(NOT_DEFAULT) == {f.flag for f in ENGINE_FLAGS}
    assert len({f.env for f in ENGINE_FLAGS}) == len(ENGINE_FLAGS)
    assert all(f.env.startswith("FABRIC_RCA_") for f in ENGINE_FLAGS)
    assert _replay([]) == EngineSettings(topology=TOPOLOGY, config=EngineConfig())
    assert _worker([]).engine == EngineSettings(topology=TOPOLOGY, config=EngineConfig())


def test_replay_and_the_worker_expose_the_same_engine_flags():
    flags = {f.flag for f in ENGINE_FLAGS}
    assert flags <= _options("replay")
    assert flags <= _options("worker")
    assert {f.flag for f in ENGINE_FLAGS if f.group == ORDER} <= _options("train")  # train orders as scoring does


@pytest.mark.parametrize("flag", [f for f in NOT_DEFAULT if f != "--models"])
def test_each_flag_reads_the_same_in_replay_and_the_worker(flag):
    argv = [flag, NOT_DEFAULT[flag]]
    got = _replay(argv)
    assert got != _replay([]), f"{flag} changed nothing"
    assert _worker(argv).engine == got


def test_every_flag_at_once_and_each_variable_instead_of_its_flag(monkeypatch):
    argv = _all_flags_but("--models", "--topology")
    expected = _replay(argv)
    assert expected.config.correlation.resolve_after_s == 30.0 and expected.config.skew_s == 12.0
    assert _worker(argv).engine == expected
    for f in ENGINE_FLAGS:
        if f.flag not in ("--models", "--topology"):
            monkeypatch.setenv(f.env, NOT_DEFAULT[f.flag])
    assert _worker([]).engine == expected
    monkeypatch.setenv("FABRIC_RCA_LATENESS", "9")
    assert _worker(["--lateness", "7"]).engine.config.lateness_s == 7.0  # a flag wins over its variable
    monkeypatch.setenv("FABRIC_RCA_RULES", "a.yaml, b.yaml")
    assert _worker([]).engine.rule_files == (Path("a.yaml"), Path("b.yaml"))
    monkeypatch.setenv("FABRIC_RCA_MAPPINGS", f"{MAPPINGS}{os.pathsep}{MAPPINGS}")  # (folders: os.pathsep)
    assert _worker([]).engine.mapping_dirs == (MAPPINGS, MAPPINGS)


def test_a_worker_started_with_mappings_maps_with_them(tmp_path, monkeypatch):
    # (the stage looked into lives in this process: with a detect child it would live there)
    settings = dataclasses.replace(_worker(["--mappings", str(MAPPINGS), "--detect-processes", "0"]),
                                   db_url=f"sqlite:///{tmp_path}/a.db", web_port=_free_port(), data_dir=tmp_path)
    line = b"infiniband,device=mlx5_0,host=gpu001,port=1 np_cnp_sent=3i 1764000000000000000"
    stage = _run(settings, "detect", line, "detect:fabric.telemetry:0")
    assert stage.mappings.mappings[0].name == "site_infiniband" and stage.stats.mapped == {"site_infiniband": 1}
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "x.yaml").write_text("mappings: [{name: x, to: nic_prot}]")
    monkeypatch.setenv("FABRIC_RCA_MAPPINGS", str(bad))  # a bad file stops the worker at once, named
    with pytest.raises(ValueError, match="x.yaml: mapping 'x'"):
        _worker([])


def test_a_bad_variable_is_named(monkeypatch, capsys):
    monkeypatch.setenv("FABRIC_RCA_RESOLVE_AFTER", "soon")
    assert main(["worker", "--bootstrap", "127.0.0.1:1", "--topology", str(TOPOLOGY)]) == 2
    err = capsys.readouterr().err
    assert "FABRIC_RCA_RESOLVE_AFTER='soon'" in err and "is not a number" in err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(settings, agent: str, value: bytes, key: str):
    """The stage `key` of the worker app of `settings` (no broker) once its agent `agent`
    has taken one message."""

    async def go():
        app = build_app(settings, read_snapshots=dict,
                        read_partitions=lambda: dict.fromkeys(settings.telemetry_topics, 1))
        async with app.agents[f"streams.app.{agent}"].test_context() as a:
            await a.put(value, key=b"k", partition=0)
            stages = app.fabric_checkpoints.stages
            for _ in range(1000):  # (the first message waits for the checkpoints' read, a task of its own)
                if key in stages:
                    break
                await asyncio.sleep(0.01)
            return stages.get(key)

    with mock.patch.object(faust.Topic, "send", autospec=True):
        return asyncio.run(go())


def test_a_worker_started_with_resolve_after_30_correlates_so(tmp_path):
    settings = dataclasses.replace(
        _worker(["--resolve-after", "30", "--lateness", "7", "--skew", "12", "--detect-processes", "0"]),
        db_url=f"sqlite:///{tmp_path}/a.db", web_port=_free_port(), data_dir=tmp_path)
    tick = encode_batch([StageEvent(TICK, 100.0, "fabric.telemetry:0")])
    stage = _run(settings, "correlate", tick, f"correlate:{settings.symptoms_topic}")
    assert isinstance(stage, CorrelateStage)
    assert stage.correlator.config.resolve_after_s == 30.0
    default = CorrelationConfig()  # (plus the loud rules of the rules in force: credible at once,
    rules = load_rules()  # and their event rules: evidence at their events' instants)
    loud = dataclasses.replace(default.persistence, loud_rules=default.persistence.loud_rules | rules.loud,
                               event_rules=default.persistence.event_rules | rules.events)
    assert rules.loud and "wjh_buffer_drop" in rules.events and stage.correlator.config == dataclasses.replace(
        default, resolve_after_s=30.0, persistence=loud)

    line = b'{"name":"x","tags":{"host":"gpu001"},"fields":{"a":1},"timestamp":1764000000}'
    stage = _run(settings, "detect", line, "detect:fabric.telemetry:0")
    assert isinstance(stage, DetectStage)
    assert (stage.reorder.lateness_s, stage.reorder.skew_s) == (7.0, 12.0)


def test_the_stages_are_made_from_the_parts():
    config = EngineConfig(lateness_s=8.0, correlation=CorrelationConfig(resolve_after_s=20.0))
    parts = build_engine(EngineSettings(topology=TOPOLOGY, config=config))
    assert parts.roles["spine01"] == "spine" and parts.models is None and parts.scorer() is None
    detect = new_detect_stage(parts, "p0")
    assert detect.source == "p0" and detect.reorder.lateness_s == 8.0
    correlate = new_correlate_stage(parts, ["p0", "p1"])
    assert correlate.sources == {"p0", "p1"} and correlate.correlator.config.resolve_after_s == 20.0
    pipeline = new_pipeline(parts)
    assert pipeline.detect.reorder.lateness_s == 8.0
    assert pipeline.correlate.correlator.config.resolve_after_s == 20.0
    assert parts.job_book() is not parts.job_book()  # each correlator holds its own book


def test_an_engine_needs_a_topology():
    with pytest.raises(ValueError, match="needs a topology"):
        build_engine(EngineSettings())


def test_training_and_the_baselines_order_as_the_config_says():
    from models.train import TrainingData

    config = EngineConfig(lateness_s=9.0, lateness_intervals=2.0, max_lateness_s=60.0, skew_s=15.0)
    order = TrainingData(config=config)._order  # noqa: SLF001
    assert (order.lateness_s, order.lateness_intervals, order.max_lateness_s, order.skew_s) == (9.0, 2.0, 60.0, 15.0)
    args = parser().parse_args(["train", "--from", "x.jsonl", "--topology", "t.dot", "--out", "m", "--lateness", "9"])
    assert engine_settings(args).config == EngineConfig(lateness_s=9.0)


def test_docs_deploy_tables_every_engine_flag_and_its_variable():
    """docs/deploy.md's table is what operators read: a flag added to ENGINE_FLAGS without
    a row there fails here."""
    from pathlib import Path

    from cli.engine_flags import ENGINE_FLAGS

    rows = [line for line in (Path(__file__).parent.parent / "docs" / "deploy.md").read_text().splitlines()
            if line.startswith("| `--")]
    missing = [f.flag for f in ENGINE_FLAGS
               if not any(line.startswith(f"| `{f.flag}") and f"`{f.env}`" in line for line in rows)]
    assert not missing, f"docs/deploy.md has no row (flag and variable) for {missing}"
