"""Kafka with TLS and SASL/SCRAM end to end: `scripts/kafka-dev start --sasl-ssl` on free
ports in a temporary state dir, clients without (or with wrong) credentials refused, and
`fabric-rca replay --to-kafka` plus a `fabric-rca worker` diagnosing a scenario over
SASL_SSL with the credentials the script wrote.

pytest -m kafka tests/test_kafka_security.py   (needs Java 17, openssl and the broker jars)
"""
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest

from streams import security
from streams.topics import KafkaUnavailable, ensure_topics, pipeline_topics
from testkit.ports import free_ports as _free_ports
from testkit.store import incident_causes as _causes
from testkit.store import stored_incidents as _stored
from testkit.workers import WorkerProcess, worker_args

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.slow,
    pytest.mark.filterwarnings(r"ignore:.*is deprecated\. Use files\(\) instead:DeprecationWarning"),
]

REPO = Path(__file__).resolve().parents[1]
KAFKA_DEV = REPO / "scripts" / "kafka-dev"


def _read_env_file(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            key, _, value = line.partition("=")
            out[key] = value
    return out


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """(bootstrap, the FABRIC_RCA_KAFKA_* settings of client.env, state dir) of a secure broker."""
    state = tmp_path_factory.mktemp("kafka-sasl")
    port, cport = _free_ports(2)
    env = os.environ | {"KAFKA_PORT": str(port), "KAFKA_CONTROLLER_PORT": str(cport),
                        "KAFKA_STATE_DIR": str(state), "FABRIC_RCA_PYTHON": sys.executable}
    started = subprocess.run([str(KAFKA_DEV), "start", "--sasl-ssl"], env=env, capture_output=True, text=True,
                             timeout=240)
    try:
        assert started.returncode == 0, f"kafka-dev start --sasl-ssl failed:\n{started.stderr}"
        bootstrap = started.stdout.strip().splitlines()[-1]
        assert bootstrap == f"127.0.0.1:{port}"
        assert str(state / "client.env") in started.stderr, "start must say where the client settings are"
        client = _read_env_file(state / "client.env")
        assert client["FABRIC_RCA_KAFKA_SECURITY_PROTOCOL"] == "SASL_SSL"
        yield bootstrap, client, state
    finally:
        subprocess.run([str(KAFKA_DEV), "stop"], env=env, capture_output=True, timeout=60)


def _client_security(client: dict[str, str]) -> security.KafkaSecurity:
    return security.from_sources(env=client)


def test_a_client_without_credentials_can_neither_produce_nor_consume(broker):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.errors import KafkaTimeoutError

    bootstrap, client, _ = broker
    topic = f"t{uuid.uuid4().hex[:8]}.open"
    ensure_topics(bootstrap=bootstrap, topics={topic: 1}, security=_client_security(client))
    with pytest.raises(KafkaTimeoutError):
        producer = KafkaProducer(bootstrap_servers=bootstrap, bootstrap_timeout_ms=3000, max_block_ms=3000)
        producer.send(topic, b"anyone").get(timeout=3)
    with pytest.raises(KafkaTimeoutError):
        consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, bootstrap_timeout_ms=3000,
                                 auto_offset_reset="earliest", group_id=None)
        consumer.poll(timeout_ms=3000)
    with pytest.raises(KafkaUnavailable):  # our own admin, PLAINTEXT
        ensure_topics(bootstrap=bootstrap, topics={topic + "2": 1}, timeout_s=3)


def test_a_wrong_password_is_refused(broker):
    bootstrap, client, _ = broker
    good = _client_security(client)
    wrong = security.KafkaSecurity(protocol="SASL_SSL", mechanism="SCRAM-SHA-512", username=good.username,
                                   password=good.password + "x", ca_file=good.ca_file)
    with pytest.raises(KafkaUnavailable) as err:
        ensure_topics(bootstrap=bootstrap, topics={f"t{uuid.uuid4().hex[:8]}.x": 1}, timeout_s=3, security=wrong)
    assert good.password not in str(err.value)


def test_replay_and_worker_diagnose_over_sasl_ssl(broker, scenario_dir, tmp_path, replay_once):
    bootstrap, client, _ = broker
    folder = scenario_dir("pfc_storm")
    _, expected, _ = replay_once(folder)
    assert expected, "the scenario must produce an incident for this test to mean anything"
    prefix = f"t{uuid.uuid4().hex[:8]}."
    sec = _client_security(client)
    ensure_topics(bootstrap=bootstrap, topics=pipeline_topics(prefix), security=sec)

    # the publisher takes its credentials from the environment (client.env as written)
    env = os.environ | client | {"PYTHONPATH": str(REPO)}
    sent = subprocess.run(
        [sys.executable, "-m", "cli.main", "replay", "--to-kafka", bootstrap, "--quiet",
         "--topology", str(folder / "topology.dot"), "--jobs", str(folder / "jobs.jsonl"),
         "--topic", prefix + "fabric.telemetry", "--jobs-topic", prefix + "fabric.jobs",
         str(folder / "telemetry.jsonl.gz")],
        env=env, capture_output=True, text=True, timeout=120)
    assert sent.returncode == 0, sent.stderr
    assert "sent " in sent.stdout and sec.password not in sent.stdout + sent.stderr

    # the worker from flags (and no FABRIC_RCA_KAFKA_* in its environment)
    worker_env = {k: v for k, v in os.environ.items() if not k.startswith("FABRIC_RCA_KAFKA_")}
    port = _free_ports(1)[0]
    db = tmp_path / "worker.db"
    log_path = tmp_path / "worker.log"
    args = worker_args(bootstrap=bootstrap, db=db, folder=folder, prefix=prefix, port=port, data_dir=tmp_path / "w") + [
        "--loglevel", "INFO",
        "--kafka-security-protocol", "SASL_SSL", "--kafka-sasl-mechanism", "SCRAM-SHA-512",
        "--kafka-username", client["FABRIC_RCA_KAFKA_USERNAME"],
        "--kafka-password-file", client["FABRIC_RCA_KAFKA_PASSWORD_FILE"],
        "--kafka-ca-file", client["FABRIC_RCA_KAFKA_CA_FILE"]]
    worker = WorkerProcess("worker", args, port=port, log_path=log_path, env=worker_env | {"PYTHONPATH": str(REPO)})
    proc = worker.proc
    try:
        deadline = time.monotonic() + 75
        got: list[dict] = []
        while time.monotonic() < deadline and _causes(got) != _causes(expected):
            assert proc.poll() is None, log_path.read_text()[-3000:]
            time.sleep(1)
            got = _stored(db)
        assert _causes(got) == _causes(expected), f"incidents {_causes(got)}:\n{log_path.read_text()[-3000:]}"
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200
    finally:
        worker.stop()
    assert sec.password not in log_path.read_text(), "the password must never be logged"
