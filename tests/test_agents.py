"""The faust agents of `streams.app` without a broker.

Each agent runs in its own `test_context()`: a local channel stands in for its topic, and
`put` hands it one message (from partition 0 of the agent's topic) and waits until the
agent has taken it. What the agents send is captured by replacing the public
`faust.Topic.send` with an autospec mock, so every send is recorded with the topic it
went to and nothing needs a producer. The mocked send never suspends, so by the time
`put` returns the agent has finished with the message.

The expectations come from the scenario's truth and from the pure core fed the same
input: an agent is a thin adapter, so it must send exactly what its stage produces.
"""
from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple
from unittest import mock

import faust
import orjson
import pytest
from sqlmodel import Session

from api.store.db import make_engine
from api.store.repository import list_incidents
from compose import EngineSettings
from engine.events import SYMPTOM, TICK, StageEvent, decode_batch, encode_batch
from engine.jobs import JobBook
from engine.pipeline import CorrelateStage, DetectStage
from engine.topology import load_topology
from rules.loader import load_rules
from streams.app import build_app
from streams.publish import messages_of_line
from streams.settings import WorkerSettings
from testkit.ports import free_port as _free_port

SOURCE = "fabric.telemetry:0"  # the detect stage that owns partition 0 of the telemetry topic


class Sent(NamedTuple):
    key: bytes | None
    value: bytes
    headers: dict[str, bytes]


@pytest.fixture(scope="module")
def scenario(tmp_path_factory) -> Path:
    import sim

    out = tmp_path_factory.mktemp("pfc_storm")
    sim.simulate(out=out, scenario="pfc_storm", seed=2, duration=60)
    return out


@pytest.fixture(scope="module")
def truth(scenario) -> dict:
    return json.loads((scenario / "truth.json").read_text())


@pytest.fixture(scope="module")
def telemetry(scenario) -> list[bytes]:
    with gzip.open(scenario / "telemetry.jsonl.gz") as fh:
        return fh.read().splitlines()


@pytest.fixture
def settings(tmp_path, scenario) -> WorkerSettings:
    return WorkerSettings(
        bootstrap="127.0.0.1:1",  # nothing listens there: any attempt to reach a broker fails
        db_url=f"sqlite:///{tmp_path}/a.db",
        engine=EngineSettings(topology=scenario / "topology.dot", jobs_file=scenario / "jobs.jsonl"),
        web_port=_free_port(),
        data_dir=tmp_path,
        checkpoint_every_s=3600,  # checkpoints go to a broker; the KAFKA tests cover them
    )


@pytest.fixture
def sent() -> Iterator[mock.MagicMock]:
    with mock.patch.object(faust.Topic, "send", autospec=True) as send:
        yield send


def sent_to(send: mock.MagicMock, topic: str) -> list[Sent]:
    """The messages sent to `topic`, in order."""
    return [
        Sent(c.kwargs.get("key"), c.kwargs["value"], dict(c.kwargs.get("headers") or []))
        for c in send.call_args_list
        if c.args[0].get_topic_name() == topic
    ]


def run_agent(settings: WorkerSettings, name: str, messages: Iterable[tuple[bytes | None, bytes]],
              read_partitions=None) -> faust.App:
    """Build the worker app, run agent `name` over (key, value) messages from partition 0; return the app."""

    async def go() -> faust.App:
        # no broker: no earlier snapshots, and one telemetry partition per topic
        app = build_app(settings, read_snapshots=dict,
                        read_partitions=read_partitions or (lambda: dict.fromkeys(settings.telemetry_topics, 1)))
        async with app.agents[f"streams.app.{name}"].test_context() as agent:
            for key, value in messages:
                await agent.put(value, key=key, partition=0)
        return app

    return asyncio.run(go())


def detect_stage_events(settings: WorkerSettings, lines: list[bytes], models=None) -> list[StageEvent]:
    """What the pure stage 1 emits for `lines`, as the detect agent's partition-0 stage would."""
    topology = load_topology(settings.engine.topology)
    stage = DetectStage(rules=load_rules(None), roles={d: topology.role(d) for d in topology.devices()},
                        source=SOURCE, scorer=models.scorer() if models is not None else None)
    events: list[StageEvent] = []
    for line in lines:
        stage.feed(line)
        # Encoded as they are emitted, as the agent does: a Symptom is updated in place
        # (last, end) after it has been emitted.
        events.extend(StageEvent.from_bytes(e.to_bytes()) for e in stage.events())
    return events


# ------------------------------------------------------------------------- detect


def test_detect_dead_letters_unreadable_records_with_their_reason(settings, sent):
    garbage = b'{"name": "switch_port", "tags": {'
    no_host = orjson.dumps({"name": "switch_port", "tags": {"interface": "swp1"},
                            "fields": {"if_in_octets": 1}, "timestamp": 1764400000000})

    run_agent(settings, "detect", [(None, garbage), (None, no_host)])

    dlq = sent_to(sent, settings.dlq_topic)
    assert [m.value for m in dlq] == [garbage, no_host]  # the original bytes, untouched
    assert [m.headers["reason"] for m in dlq] == [b"bad_json", b"missing_host"]
    assert all(m.headers["detail"] for m in dlq)
    assert [m.headers["source"] for m in dlq] == [f"{SOURCE}@0".encode(), f"{SOURCE}@1".encode()]
    assert sent_to(sent, settings.symptoms_topic) == []


def test_detect_turns_scenario_telemetry_into_stage_events(settings, sent, telemetry, truth):
    messages = [(m.key, m.value) for line in telemetry for m in messages_of_line(line)]
    assert all(key for key, _ in messages)  # every record is keyed by its host

    run_agent(settings, "detect", messages)

    assert sent_to(sent, settings.dlq_topic) == []
    out = sent_to(sent, settings.symptoms_topic)
    assert {m.key for m in out} == {b"stage"}
    events = [e for m in out for e in decode_batch(m.value)]
    assert {e.source for e in events} == {SOURCE}
    assert len(out) < len(events)  # what one message produced goes out as one message

    ticks = [e.tick for e in events if e.kind == TICK]
    assert len(ticks) > 10
    assert ticks == sorted(set(ticks))  # strictly increasing

    fault = truth["faults"][0]
    injected = (fault["entity"]["kind"], fault["entity"]["id"])
    pause_tx = [e.symptom for e in events
                if e.kind == SYMPTOM and e.symptom.kind == "pfc_pause_tx"
                and (e.symptom.entity.kind, e.symptom.entity.id) == injected]
    assert pause_tx, f"no pfc_pause_tx symptom on {injected}"
    assert fault["start"] <= pause_tx[0].start <= fault["end"]

    # A thin adapter: exactly what stage 1 emits for the same lines.
    assert events == detect_stage_events(settings, [v for _, v in messages])


def test_detect_scores_with_the_workers_anomaly_models(settings, sent, telemetry, tmp_path):
    import dataclasses

    import sim
    from models.store import load, save
    from models.train import train

    clean = tmp_path / "clean"
    sim.simulate(out=clean, scenario="clean", seed=11, duration=300)
    models, training = train([clean / "telemetry.jsonl.gz"], seed=1)
    save(models, tmp_path / "models", training=training)
    engine = dataclasses.replace(settings.engine, models_dir=tmp_path / "models")
    settings = dataclasses.replace(settings, engine=engine)
    messages = [(m.key, m.value) for line in telemetry for m in messages_of_line(line)]

    run_agent(settings, "detect", messages)

    events = [e for m in sent_to(sent, settings.symptoms_topic) for e in decode_batch(m.value)]
    assert any(e.kind == SYMPTOM and e.symptom.rule.startswith("model:") for e in events)
    assert events == detect_stage_events(settings, [v for _, v in messages], models=load(tmp_path / "models"))


# ---------------------------------------------------------------------- correlate


def test_correlate_stores_and_publishes_incident_changes(settings, sent, telemetry, truth):
    events = detect_stage_events(settings, telemetry)
    assert any(e.kind == SYMPTOM for e in events)

    app = run_agent(settings, "correlate", [(b"stage", e.to_bytes()) for e in events])

    published = sent_to(sent, settings.incidents_topic)
    assert published, "no incident was published"
    docs = [orjson.loads(m.value) for m in published]
    assert [m.key for m in published] == [d["id"].encode() for d in docs]

    # One message per change of the core's stage 2, fed the same events one at a time.
    stage = CorrelateStage(topology=load_topology(settings.engine.topology), rules=load_rules(None),
                           jobs=JobBook.from_file(settings.engine.jobs_file))
    changes: list[dict] = []
    for e in events:
        stage.add(e)
        stage.advance()
        changes.extend(stage.changes())
    assert docs == [orjson.loads(orjson.dumps(c)) for c in changes]
    assert app.fabric_sink.written == len(changes)

    fault = truth["faults"][0]
    final = {d["id"]: d for d in docs}  # the last change of each incident
    assert len(final) == 1
    (incident,) = final.values()
    top = incident["root_causes"][0]
    assert (top["cause"], top["entity"]["id"]) == (fault["cause"], fault["entity"]["id"])

    with Session(make_engine(settings.db_url)) as session:
        stored = list_incidents(session, limit=None)
    assert [i["id"] for i in stored] == [incident["id"]]
    assert stored[0]["status"] == incident["status"]
    assert [(r["cause"], r["entity"]["id"]) for r in stored[0]["root_causes"]] == \
        [(r["cause"], r["entity"]["id"]) for r in incident["root_causes"]]


def test_correlate_takes_batches_as_the_detect_agent_sends_them(settings, sent, telemetry):
    """Events in batches of a few (as detect sends one message per input message) reach
    the same final incidents as one event per message."""
    events = detect_stage_events(settings, telemetry)
    singles = run_agent(settings, "correlate", [(b"stage", e.to_bytes()) for e in events])
    one = {d["id"]: d for d in (orjson.loads(m.value) for m in sent_to(sent, settings.incidents_topic))}
    sent.reset_mock()
    batches = [(b"stage", encode_batch(events[i:i + 3])) for i in range(0, len(events), 3)]
    run_agent(settings, "correlate", batches)
    got = {d["id"]: d for d in (orjson.loads(m.value) for m in sent_to(sent, settings.incidents_topic))}
    assert one and got == one
    assert singles.fabric_sink.written >= 1


# --------------------------------------------------------------- broker reads


def test_broker_reads_are_retried_until_they_succeed(caplog):
    from streams.checkpoints import patiently

    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionError("broker away")
        return {"t": 4}

    with caplog.at_level("WARNING", logger="fabric_rca.worker"):
        got = asyncio.run(patiently(flaky, "reading partition counts", first_wait_s=0.01))
    assert got == {"t": 4} and len(calls) == 3
    assert sum("reading partition counts failed (ConnectionError: broker away)" in r.message for r in caplog.records) == 2


def test_correlate_waits_for_the_partition_counts_instead_of_crashing(settings, sent, telemetry):
    events = detect_stage_events(settings, telemetry)
    tries = []

    def counts():
        tries.append(1)
        if len(tries) == 1:
            raise ConnectionError("broker away")
        return dict.fromkeys(settings.telemetry_topics, 1)

    run_agent(settings, "correlate", [(b"stage", e.to_bytes()) for e in events], read_partitions=counts)
    assert len(tries) == 2
    assert sent_to(sent, settings.incidents_topic), "the incident came out once the counts were read"


def test_checkpoints_are_read_once_from_assignment_and_again_after_a_rebalance():
    """The state topic is read when partitions are assigned (`prefetch`), so the read
    overlaps the first fetch; the first message's stage waits for that same read, not a
    second one. A rebalance during the read (`forget_cache`) discards it: the stage then
    waits for a read that began after the rebalance, never for snapshots from before it."""
    from streams.checkpoints import Checkpoints

    reads: list[int] = []

    def read() -> dict:
        reads.append(len(reads))
        import time

        time.sleep(0.2)
        return {"detect:t:0": (-1, b"")} if len(reads) > 1 else {}

    async def scenario() -> None:
        cp = Checkpoints(app=None, settings=None, topic=None, read=read)
        cp.prefetch()  # on assignment
        cp.prefetch()  # a second assignment signal while reading: still one read
        await cp.stage("detect:t:0", lambda: "stage")
        assert reads == [0]
        cp.forget_cache()  # a rebalance
        cp.prefetch()
        first = asyncio.ensure_future(cp.stage("detect:t:1", lambda: "stage"))
        await asyncio.sleep(0.05)
        cp.forget_cache()  # another, while that read is under way
        assert await first == "stage"
        assert reads == [0, 1, 2]  # the stage waited for the read begun after the last rebalance

    asyncio.run(scenario())
