"""The Kafka path end to end: publish a scenario to a real broker, run the faust workers
as a separate process, and get the same incidents as the embedded replay of the same files.

KAFKA_BOOTSTRAP=127.0.0.1:9092 pytest tests/test_kafka_workers.py
"""
import os
import signal
import socket
import subprocess
import sys
import time
import uuid

import httpx
import pytest
from sqlmodel import Session

from api.store.db import make_engine
from api.store.repository import list_incidents
from cli.run import replay_scenario
from streams.publish import publish_files
from streams.topics import ALL_TOPICS, ensure_topics

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.slow,
    pytest.mark.filterwarnings(r"ignore:.*is deprecated\. Use files\(\) instead:DeprecationWarning"),
]


def kafka_bootstrap() -> str:
    addr = os.environ.get("KAFKA_BOOTSTRAP", "").strip()
    if not addr:
        msg = "KAFKA_BOOTSTRAP is not set: start a broker with `scripts/kafka-dev start`"
        if os.environ.get("CI", "").lower() not in ("", "0", "false", "no"):
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    return addr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _summary(incidents: list[dict]) -> list[tuple]:
    return sorted(
        (i["id"], tuple((r["rank"], r["cause"], r["entity"]["id"]) for r in i["root_causes"]),
         tuple(sorted(j["job_id"] for j in i["affected_jobs"])))
        for i in incidents
    )


@pytest.fixture
def worker(tmp_path, scenario_dir):
    """Start `fabric-rca worker` on fresh topics; yield (prefix, db, health URL); SIGTERM at the end."""
    bootstrap = kafka_bootstrap()
    folder = scenario_dir("pfc_storm")
    prefix = f"t{uuid.uuid4().hex[:8]}."
    ensure_topics(bootstrap=bootstrap, topics={prefix + t: 1 if t.endswith("symptoms") else 4 for t in ALL_TOPICS})
    db = tmp_path / "worker.db"
    port = _free_port()
    log = open(tmp_path / "worker.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "worker", "--bootstrap", bootstrap, "--db", str(db),
         "--topology", str(folder / "topology.dot"), "--jobs", str(folder / "jobs.jsonl"),
         "--topic-prefix", prefix, "--metrics-port", str(port), "--data-dir", str(tmp_path / "faust")],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    health = f"http://127.0.0.1:{port}/healthz"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, (tmp_path / "worker.log").read_text()[-3000:]
        try:
            if httpx.get(health, timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.3)
    else:
        pytest.fail("worker did not answer /healthz within 60 s: " + (tmp_path / "worker.log").read_text()[-3000:])
    yield {"bootstrap": bootstrap, "prefix": prefix, "db": db, "folder": folder, "log": tmp_path / "worker.log",
           "base": f"http://127.0.0.1:{port}"}
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


def _stored(db) -> list[dict]:
    engine = make_engine(f"sqlite:///{db}")
    try:
        with Session(engine) as session:
            return list_incidents(session, limit=None)
    except Exception:  # the worker creates the schema; not there yet
        return []
    finally:
        engine.dispose()


def test_workers_give_the_same_incidents_as_replay(worker):
    folder = worker["folder"]
    _, expected, _ = replay_scenario(folder)
    assert expected, "the scenario must produce an incident for this test to mean anything"
    stats = publish_files([folder / "telemetry.jsonl.gz"], bootstrap=worker["bootstrap"],
                          topic=worker["prefix"] + "fabric.telemetry", jobs_topic=worker["prefix"] + "fabric.jobs")
    assert stats.failed == 0
    deadline = time.monotonic() + 90
    got: list[dict] = []
    while time.monotonic() < deadline:
        got = _stored(worker["db"])
        if _summary(got) == _summary(expected):
            break
        time.sleep(1)
    assert _summary(got) == _summary(expected), worker["log"].read_text()[-3000:]

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # every record consumed, and counted once
        samples = _metrics(worker["base"])
        if samples["fabric_rca_records_total"] >= stats.records:
            break
        time.sleep(1)
    assert samples["fabric_rca_records_total"] == stats.records
    assert samples["fabric_rca_incidents_opened_total"] == len(expected)
    assert samples["fabric_rca_rejects_total{reason=\"none\"}"] == 0


def _metrics(base: str) -> dict[str, float]:
    text = httpx.get(base + "/metrics").text
    return {name: float(v) for name, v in (line.rsplit(" ", 1) for line in text.splitlines()
                                           if line and not line.startswith("#"))}


def test_unreadable_records_are_dead_lettered_with_their_bytes(worker):
    from kafka import KafkaConsumer, KafkaProducer

    bad = [b"{not json", b'{"name":"switch_port","tags":{},"fields":{"a":1},"timestamp":1764400000}']
    producer = KafkaProducer(bootstrap_servers=worker["bootstrap"])
    for value in bad:
        producer.send(worker["prefix"] + "fabric.telemetry", key=b"leaf01", value=value)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(worker["prefix"] + "fabric.telemetry.dlq", bootstrap_servers=worker["bootstrap"],
                             auto_offset_reset="earliest", consumer_timeout_ms=1000)
    seen: dict[bytes, dict] = {}
    deadline = time.monotonic() + 45
    while len(seen) < len(bad) and time.monotonic() < deadline:
        for msg in consumer:
            seen[msg.value] = {k: v.decode() for k, v in msg.headers}
    consumer.close()
    assert set(seen) == set(bad)
    assert seen[bad[0]]["reason"] == "bad_json"
    assert seen[bad[1]]["reason"] == "missing_host"
    assert all(h["detail"] for h in seen.values())
