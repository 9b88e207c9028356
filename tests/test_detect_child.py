"""The detect stages in a child process (streams/detect_child.py), with a real child and
no broker: the detect agent sends what it sends with the stages in its own process, a
snapshot covers exactly the messages held when it is taken, and a child that dies fails
the worker loudly instead of leaving it running without its stages.

The real-broker tests (tests/test_kafka_*.py) run `fabric-rca worker`, whose default on
two cores or more is four detect children: restarts, rebalances and refused snapshots go
through it there.
"""
from __future__ import annotations

import asyncio
import gzip
from pathlib import Path
from unittest import mock

import faust
import pytest

from compose import EngineSettings, build_engine, new_detect_stage
from engine import checkpoint
from engine.events import decode_batch
from streams.app import build_app
from streams.detect_child import ChildFailed, ChildStage, DetectChild, figures
from streams.publish import messages_of_line
from streams.settings import WorkerSettings
from testkit.ports import free_port

SOURCE, KEY = "fabric.telemetry:0", "detect:fabric.telemetry:0"


@pytest.fixture(scope="module")
def scenario(scenario_dir) -> Path:
    return scenario_dir("pfc_storm", seed=3, duration=60)


@pytest.fixture(scope="module")
def values(scenario) -> list[bytes]:
    with gzip.open(scenario / "telemetry.jsonl.gz") as fh:
        lines = fh.read().splitlines()
    out = [m.value for line in lines for m in messages_of_line(line)]
    out[40:40] = [b'{"name": "switch_port", "tags": {', b'{"name":"nic_port","fields":{"x":1}}']  # dead letters
    return out


def _settings(tmp_path: Path, scenario: Path, processes: int) -> WorkerSettings:
    return WorkerSettings(bootstrap="127.0.0.1:1", db_url=f"sqlite:///{tmp_path}/{processes}.db",
                          engine=EngineSettings(topology=scenario / "topology.dot", jobs_file=scenario / "jobs.jsonl"),
                          web_port=free_port(), data_dir=tmp_path / str(processes), checkpoint_every_s=3600,
                          detect_processes=processes)


def _detect(settings: WorkerSettings, values: list[bytes]) -> tuple[list[tuple[str, bytes]], object]:
    """Run the detect agent over `values`; (topic, value) of every send, and the stage held."""
    async def go():
        app = build_app(settings, read_snapshots=dict, read_partitions=lambda: {settings.telemetry_topics[0]: 1})
        [child] = app.fabric_agents.children or [None]
        answers = asyncio.ensure_future(child.run()) if child is not None else None
        try:
            async with app.agents["streams.app.detect"].test_context() as agent:
                for value in values:
                    await agent.put(value, key=b"k", partition=0)
                while child is not None and child.in_flight:  # the agent does not wait for its answers
                    await asyncio.sleep(0.01)
            return app.fabric_checkpoints.stages[KEY]
        finally:
            if answers is not None:
                answers.cancel()
                child.close()

    with mock.patch.object(faust.Topic, "send", autospec=True) as send:
        stage = asyncio.run(go())
    return [(c.args[0].get_topic_name(), c.kwargs["value"]) for c in send.call_args_list], stage


def test_the_detect_agent_sends_what_it_sends_with_its_stages_in_its_own_process(tmp_path, scenario, values):
    here, local = _detect(_settings(tmp_path, scenario, 0), values)
    there, remote = _detect(_settings(tmp_path, scenario, 1), values)
    assert isinstance(remote, ChildStage) and not isinstance(local, ChildStage)
    assert there == here  # dead letters and symptoms, message for message, in the same order
    topics = {t for t, _ in there}
    assert topics == {"fabric.telemetry.dlq", "fabric.symptoms"}
    assert any(e.kind == "symptom" for t, v in there if t == "fabric.symptoms" for e in decode_batch(v))
    assert figures(remote) == figures(local)  # what /metrics reads, as last reported by the child
    assert figures(remote).records > 1000 and sum(figures(remote).rejects.values()) == 2


def test_healthz_and_metrics_show_the_detect_processes(tmp_path, scenario, values):
    from streams.health import health, worker_metrics

    settings = _settings(tmp_path, scenario, 2)

    async def go():
        app = build_app(settings, read_snapshots=dict, read_partitions=lambda: {settings.telemetry_topics[0]: 2})
        agents = app.fabric_agents
        answers = [asyncio.ensure_future(c.run()) for c in agents.children]
        try:
            async with app.agents["streams.app.detect"].test_context() as agent:
                await agent.put(values[0], key=b"k", partition=0)
                await agent.put(values[1], key=b"k", partition=1)
                doc = health(agents)
                in_flight = worker_metrics(app, agents).detect_in_flight
                while any(c.in_flight for c in agents.children):
                    await asyncio.sleep(0.01)
            return doc, in_flight, [c.process.pid for c in agents.children]
        finally:
            for a in answers:
                a.cancel()
            for c in agents.children:
                c.close()

    with mock.patch.object(faust.Topic, "send", autospec=True):
        doc, in_flight, pids = asyncio.run(go())
    procs = doc["detect_processes"]
    assert [p["pid"] for p in procs] == pids and all(p["alive"] for p in procs)
    # partition p's stage in child p mod 2 (the test channel names the topic "<internal>")
    assert [[key.rsplit(":", 1)[1] for key in p["stages"]] for p in procs] == [["0"], ["1"]]
    assert 0 <= in_flight <= 2  # (the gauge, read while the two messages may still be in the children)


def test_a_snapshot_covers_exactly_the_messages_sent_before_it_was_asked_for(scenario, values):
    parts = build_engine(EngineSettings(topology=scenario / "topology.dot", jobs_file=scenario / "jobs.jsonl"))
    cut = len(values) // 2
    reference = new_detect_stage(parts, SOURCE)
    for value in values[:cut]:
        reference.feed(value)
        reference.take_rejects(), reference.events()

    async def go():
        child = DetectChild(parts)
        child.start()
        answers = asyncio.ensure_future(child.run())
        stage = child.stage(KEY, SOURCE, new_detect_stage(parts, SOURCE))
        held, taken = [], []

        async def then(_answer):
            await asyncio.sleep(0)  # (an answer's handler may suspend: the next waits for it)
            held.append(1)

        for value in values[:cut]:
            await child.feed(stage, value, then)
        assert stage.has_unanswered()
        asked = stage.packed_state_in_order(lambda packed: taken.append((len(held), packed)))
        assert not stage.has_unanswered()
        for value in values[cut:]:  # sent before the snapshot arrives: not in it
            await child.feed(stage, value, then)
        await asked
        while child.in_flight:
            await asyncio.sleep(0.01)
        answers.cancel()
        child.close()
        return held, taken

    held, taken = asyncio.run(go())
    assert len(held) == len(values)
    [(held_then, packed)] = taken
    assert held_then == cut
    restored = new_detect_stage(parts, SOURCE)
    restored.restore(checkpoint.compress(packed))
    assert checkpoint.pack(restored.state()) == checkpoint.pack(reference.state())


def test_a_child_that_dies_fails_the_worker_with_its_exit_code(scenario, values):
    parts = build_engine(EngineSettings(topology=scenario / "topology.dot", jobs_file=scenario / "jobs.jsonl"))

    async def go():
        child = DetectChild(parts)
        child.start()
        answers = asyncio.ensure_future(child.run())
        stage = child.stage(KEY, SOURCE, new_detect_stage(parts, SOURCE))

        async def then(_answer):
            pass

        await child.feed(stage, values[0], then)
        child.process.kill()
        with pytest.raises(ChildFailed, match="exit code -9"):
            await asyncio.wait_for(answers, 10)
        with pytest.raises(ChildFailed):
            await child.feed(stage, values[1], then)  # the agent fails too, rather than feed nothing
        child.close()

    asyncio.run(go())


def test_ctrl_c_leaves_the_child_to_its_worker(scenario, values):
    """SIGINT (Ctrl-C reaches the terminal's whole process group) does not end the child:
    the worker stops on it and ends its children itself."""
    import os
    import signal

    parts = build_engine(EngineSettings(topology=scenario / "topology.dot", jobs_file=scenario / "jobs.jsonl"))

    async def go():
        # A worker forks its children before faust installs its handlers: Python's default
        # (asyncio.run's own handler would otherwise be inherited here).
        before = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            child = DetectChild(parts)
        finally:
            signal.signal(signal.SIGINT, before)
        child.start()
        answers = asyncio.ensure_future(child.run())
        stage = child.new(KEY, SOURCE)
        taken = []

        async def then(_answer):
            taken.append(1)

        await child.feed(stage, values[0], then)
        while not taken:
            await asyncio.sleep(0.01)
        os.kill(child.process.pid, signal.SIGINT)
        await asyncio.sleep(0.2)
        await child.feed(stage, values[1], then)
        while len(taken) < 2 and not answers.done():
            await asyncio.sleep(0.01)
        alive = child.process.is_alive()
        answers.cancel()
        child.close()
        return alive, len(taken)

    assert asyncio.run(go()) == (True, 2)


def test_a_request_the_child_fails_names_it_with_the_childs_traceback(scenario):
    parts = build_engine(EngineSettings(topology=scenario / "topology.dot"))

    async def go():
        child = DetectChild(parts)
        child.start()
        answers = asyncio.ensure_future(child.run())
        ghost = ChildStage(child, "detect:nowhere:0")  # never loaded into the child

        async def then(_answer):
            pass

        await child.feed(ghost, b"{}", then)
        with pytest.raises(ChildFailed, match=r"feed detect:nowhere:0: Traceback[\s\S]*KeyError"):
            await asyncio.wait_for(answers, 10)
        child.close()

    asyncio.run(go())


def test_the_worker_command_runs_its_detect_stages_in_a_child_where_a_second_core_can(monkeypatch):
    from cli.commands import worker
    import argparse

    args = argparse.Namespace(detect_processes=None)
    monkeypatch.setattr("engine.shards.usable_cores", lambda: 2)
    assert worker.detect_processes(args, {}) == worker.DEFAULT_DETECT_PROCESSES == 4
    monkeypatch.setattr("engine.shards.usable_cores", lambda: 1)
    assert worker.detect_processes(args, {}) == 0
    assert worker.detect_processes(args, {"FABRIC_RCA_DETECT_PROCESSES": "1"}) == 1
    flag = argparse.Namespace(detect_processes=0)
    assert worker.detect_processes(flag, {"FABRIC_RCA_DETECT_PROCESSES": "1"}) == 0  # a flag wins over its variable
    from cli.common import CliError
    for bad in ("two", "-1", "17"):
        with pytest.raises(CliError, match=f"FABRIC_RCA_DETECT_PROCESSES='{bad}': expected a count from 0 to 16"):
            worker.detect_processes(args, {"FABRIC_RCA_DETECT_PROCESSES": bad})


@pytest.mark.parametrize("limits", [(3, 1 << 30), (1 << 20, 1)])
def test_the_agent_waits_for_room_once_its_messages_or_their_bytes_reach_the_bound(scenario, values, monkeypatch,
                                                                                  limits):
    import streams.detect_child as dc

    monkeypatch.setattr(dc, "MAX_IN_FLIGHT", limits[0])
    monkeypatch.setattr(dc, "MAX_IN_FLIGHT_BYTES", limits[1])
    parts = build_engine(EngineSettings(topology=scenario / "topology.dot", jobs_file=scenario / "jobs.jsonl"))

    async def go():
        child = DetectChild(parts)
        child.start()
        answers = asyncio.ensure_future(child.run())
        stage = child.new(KEY, SOURCE)
        most, taken = [], []

        async def then(_answer):
            taken.append(1)

        for value in values[:200]:
            await child.feed(stage, value, then)
            most.append(child.in_flight)
        while child.in_flight:
            await asyncio.sleep(0.01)
        answers.cancel()
        child.close()
        return max(most), len(taken), child.in_flight_bytes

    most, taken, left = asyncio.run(go())
    assert most == min(limits[0], 1 if limits[1] == 1 else 200) and taken == 200 and left == 0
