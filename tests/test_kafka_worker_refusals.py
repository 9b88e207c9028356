"""The worker when the broker refuses what it sends, on a real broker: topics made with a
smaller max.message.bytes than an incident change, a symptoms message or a stage snapshot
(made before streams/topics.py took 16 MiB, or a fabric grown past what its partitions'
snapshots fit). What is refused is counted, said once, and the worker goes on.

KAFKA_BOOTSTRAP=127.0.0.1:9092 pytest tests/test_kafka_worker_refusals.py
"""
import time

import pytest
from test_kafka_worker_faults import _committed, _consume, _statuses, _wait_records, _wait_statuses

from testkit.metrics import scrape as _metrics
from testkit.store import incident_summary as _summary
from testkit.workers import Fleet

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.slow,
    pytest.mark.filterwarnings(r"ignore:.*is deprecated\. Use files\(\) instead:DeprecationWarning"),
]


SMALL_BYTES = "2000"  # a topic's max.message.bytes: under an incident's, and a symptom's with its samples


def _fleet_with_small_topic(tmp_path, folder, bootstrap: str, topic: str) -> Fleet:
    """A fleet whose `topic` (a pipeline topic's name) was made before, with SMALL_BYTES."""
    import uuid

    from streams.topics import ensure_topics, pipeline_topics

    prefix = f"t{uuid.uuid4().hex[:8]}."
    ensure_topics(bootstrap=bootstrap, topics=pipeline_topics(prefix),
                  configs={prefix + topic: {"max.message.bytes": SMALL_BYTES}})
    return Fleet(tmp_path, folder, bootstrap, prefix=prefix)


def test_incident_changes_the_broker_refuses_are_counted_and_stored_all_the_same(tmp_path, scenario_dir,
                                                                                  kafka_bootstrap, replay_once):
    """An incidents topic made before with a smaller max.message.bytes than an incident
    change (an operator's, or one of before streams/topics.py took 16 MiB): the broker
    refuses the change; the worker counts it, says so once, stores every change and goes on."""
    from streams.topics import INCIDENTS

    folder = scenario_dir("pfc_storm")
    _, expected, _ = replay_once(folder)
    fleet = _fleet_with_small_topic(tmp_path, folder, kafka_bootstrap, INCIDENTS)  # (an incident with samples is more)
    prefix = fleet.prefix
    try:
        base = fleet.start("w1")
        fleet.publish()
        got = _wait_statuses(fleet, expected)
        assert _statuses(got) == _statuses(expected) and _summary(got) == _summary(expected), fleet.logs()
        # every change is on the topic or counted as refused (the broker's answers come after the store write)
        on_topic: list = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            samples = _metrics(base)
            on_topic = _consume(fleet.bootstrap, prefix + INCIDENTS, until=lambda g: False, timeout=3)
            total, refused = (samples["fabric_rca_incident_changes_total"],
                              samples["fabric_rca_incident_changes_unpublished_total"])
            if refused + len(on_topic) == total:
                break
        assert refused > 0 and refused + len(on_topic) == total, (total, refused, len(on_topic))
        assert all(len(m.value) <= int(SMALL_BYTES) for m in on_topic)  # (only the small ones got through)
        assert fleet.alive("w1"), fleet.logs()
        log = (tmp_path / "w1.log").read_text()
        assert log.count("fabric_rca_incident_changes_unpublished_total counts them") == 1, fleet.logs()
        assert samples["fabric_rca_symptom_messages_unpublished_total"] == 0
    finally:
        fleet.stop()


def test_symptoms_messages_the_broker_refuses_are_counted_and_said_once(tmp_path, scenario_dir, kafka_bootstrap):
    """A symptoms topic made before with a smaller max.message.bytes than a stage's
    symptoms message: the broker refuses it and its events never reach correlation; the
    worker counts those messages, says so once, and goes on reading its input."""
    from streams.topics import SYMPTOMS

    fleet = _fleet_with_small_topic(tmp_path, scenario_dir("pfc_storm"), kafka_bootstrap, SYMPTOMS)
    try:
        base = fleet.start("w1")
        published = fleet.publish()
        samples = _wait_records(base, published.records)
        deadline = time.monotonic() + 30
        while samples["fabric_rca_symptom_messages_unpublished_total"] == 0 and time.monotonic() < deadline:
            time.sleep(0.5)
            samples = _metrics(base)
        assert samples["fabric_rca_records_total"] == published.records
        assert samples["fabric_rca_symptom_messages_unpublished_total"] > 0
        assert fleet.alive("w1"), fleet.logs()
        log = (tmp_path / "w1.log").read_text()
        assert log.count("fabric_rca_symptom_messages_unpublished_total counts them") == 1, fleet.logs()
    finally:
        fleet.stop()


def test_snapshots_the_broker_refuses_are_counted_and_a_later_one_acks_their_input(tmp_path, scenario_dir,
                                                                                   kafka_bootstrap):
    """A state topic whose max.message.bytes is under a stage's snapshot (a fabric grown
    past what its partitions' snapshots fit): every snapshot is refused, counted, the first
    of each stage logged; the worker goes on and commits nothing. Once the topic takes them,
    the next snapshot of each stage (retried with no new input) acks all the input before it
    (a snapshot is the whole state), so the group commits every message read."""
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType

    from streams.topics import STATE

    fleet = _fleet_with_small_topic(tmp_path, scenario_dir("pfc_storm"), kafka_bootstrap, STATE)
    group, telemetry = fleet.prefix + "fabric-rca", fleet.prefix + "fabric.telemetry:"
    try:
        base = fleet.start("w1")
        published = fleet.publish()
        samples = _wait_records(base, published.records)
        deadline = time.monotonic() + 30
        while samples["fabric_rca_snapshots_undelivered_total"] < 5 and time.monotonic() < deadline:
            time.sleep(0.5)
            samples = _metrics(base)
        assert samples["fabric_rca_snapshots_undelivered_total"] >= 5, samples  # (4 detect stages, correlation)
        assert not any(k.startswith(telemetry) for k in _committed(fleet.bootstrap, group))
        log = (tmp_path / "w1.log").read_text()
        assert log.count("fabric_rca_snapshots_undelivered_total counts them") == 5, fleet.logs()  # once a stage
        admin = KafkaAdminClient(bootstrap_servers=fleet.bootstrap)
        try:
            admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, fleet.prefix + STATE,
                                                configs={"max.message.bytes": str(16 * 1024 * 1024)})])
        finally:
            admin.close()
        deadline = time.monotonic() + 60
        committed = {}
        while time.monotonic() < deadline:
            committed = _committed(fleet.bootstrap, group)
            if sum(n for k, n in committed.items() if k.startswith(telemetry)) == published.messages:
                break
            time.sleep(1)
        assert sum(n for k, n in committed.items() if k.startswith(telemetry)) == published.messages, committed
        assert fleet.alive("w1"), fleet.logs()
    finally:
        fleet.stop()
