"""Round trip through a real Kafka broker (scripts/kafka-dev start prints its address).

KAFKA_BOOTSTRAP=127.0.0.1:9092 pytest tests/test_kafka_broker.py
Without KAFKA_BOOTSTRAP the test fails in CI (CI set) and is skipped elsewhere.
"""

import time
import uuid

import pytest

pytestmark = [
    pytest.mark.kafka,
    # kafka-python 3.0 loads its protocol schemas with importlib.resources' legacy API
    pytest.mark.filterwarnings(r"ignore:.*is deprecated\. Use files\(\) instead:DeprecationWarning"),
]

N_MESSAGES = 100
DEADLINE_S = 15.0


def test_keyed_round_trip(kafka_bootstrap):
    bootstrap = kafka_bootstrap
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    topic = f"fabric-rca-test-{uuid.uuid4().hex[:12]}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="fabric-rca-test",
                             request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=4, replication_factor=1)],
                            timeout_ms=10_000, wait_for_metadata=True)
        assert topic in admin.list_topics()

        sent = {f"key-{i:03d}".encode(): f"value-{i}".encode() for i in range(N_MESSAGES)}
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5,
                                 request_timeout_ms=10_000, max_block_ms=10_000)
        try:
            futures = [producer.send(topic, key=k, value=v) for k, v in sent.items()]
            producer.flush(timeout=10)
            partitions = {f.get(timeout=10).partition for f in futures}
        finally:
            producer.close(timeout=5)
        assert len(partitions) > 1, "keys should spread over the topic's partitions"

        consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap,
                                 group_id=f"{topic}-group", auto_offset_reset="earliest",
                                 enable_auto_commit=False, request_timeout_ms=10_000)
        got: dict[bytes, bytes] = {}
        deadline = time.monotonic() + DEADLINE_S
        try:
            while len(got) < N_MESSAGES and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=500).values():
                    for rec in records:
                        got[rec.key] = rec.value
        finally:
            consumer.close()

        missing = sorted(set(sent) - set(got))
        assert not missing, f"{len(missing)} of {N_MESSAGES} messages not consumed " \
                            f"within {DEADLINE_S} s, e.g. {missing[:5]}"
        assert got == sent
    finally:
        try:
            admin.delete_topics([topic], timeout_ms=10_000)
        except Exception:  # cleanup only; the broker's state dir is disposable
            pass
        admin.close()


def test_the_pipeline_topics_take_an_incident_and_symptoms_over_one_mib(kafka_bootstrap):
    """An incident of a pause tree with hundreds of symptoms (each with its samples) is
    over the broker's default max.message.bytes (1 MiB): the topics `ensure_topics`
    creates for incidents and symptoms take it, as the state topic takes a snapshot."""
    import os

    from kafka import KafkaConsumer, KafkaProducer

    from streams.topics import INCIDENTS, STATE, SYMPTOMS, ensure_topics, pipeline_topics

    prefix = f"fabric-rca-test-{uuid.uuid4().hex[:12]}."
    ensure_topics(bootstrap=kafka_bootstrap, topics=pipeline_topics(prefix))
    value = os.urandom(3 * 1024 * 1024)  # (incompressible; no compression anyway)
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all", max_request_size=16 * 1024 * 1024,
                             request_timeout_ms=20_000, max_block_ms=20_000)
    try:
        for name in (INCIDENTS, SYMPTOMS, STATE):
            producer.send(prefix + name, key=b"k", value=value).get(timeout=20)  # raises if the broker refuses
    finally:
        producer.close(timeout=5)
    for name in (INCIDENTS, SYMPTOMS, STATE):
        consumer = KafkaConsumer(prefix + name, bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest",
                                 enable_auto_commit=False, request_timeout_ms=20_000)
        try:
            got, deadline = [], time.monotonic() + DEADLINE_S
            while not got and time.monotonic() < deadline:
                got = [r.value for records in consumer.poll(timeout_ms=500).values() for r in records]
        finally:
            consumer.close()
        assert got == [value], f"{name}: {len(got)} messages read back"
