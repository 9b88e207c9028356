"""The Kafka path end to end: publish a scenario to a real broker, run the faust workers
as separate processes, and get the same incidents as the embedded replay of the same
files: uninterrupted, killed with SIGKILL mid-stream and restarted, and with two workers
sharing the partitions.

KAFKA_BOOTSTRAP=127.0.0.1:9092 pytest tests/test_kafka_workers.py
"""
import threading
import time

import httpx
import pytest

from streams.publish import key_partition
from testkit.metrics import scrape as _metrics
from testkit.ports import free_port as _free_port  # noqa: F401 - modules written against this one import it
from testkit.services import KafkaDev
from testkit.store import incident_summary as _summary
from testkit.workers import Fleet

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.slow,
    pytest.mark.filterwarnings(r"ignore:.*is deprecated\. Use files\(\) instead:DeprecationWarning"),
]


@pytest.fixture
def fleet(tmp_path, scenario_dir, kafka_bootstrap):
    f = Fleet(tmp_path, scenario_dir("pfc_storm"), kafka_bootstrap)
    yield f
    f.stop()


@pytest.fixture(scope="module")
def expected(scenario_dir, replay_once):
    _, incidents, _ = replay_once(scenario_dir("pfc_storm"))
    assert incidents, "the scenario must produce an incident for these tests to mean anything"
    return incidents


def test_workers_give_the_same_incidents_as_replay(fleet, expected):
    base = fleet.start("w1")
    stats = fleet.publish()
    assert stats.failed == 0
    got = fleet.wait_for(expected)
    assert _summary(got) == _summary(expected), fleet.logs()

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # every record consumed, and counted once
        samples = _metrics(base)
        if samples["fabric_rca_records_total"] >= stats.records:
            break
        time.sleep(1)
    assert samples["fabric_rca_records_total"] == stats.records
    assert samples["fabric_rca_incidents_opened_total"] == len(expected)
    # when it read telemetry (what the Kafka benchmark times it by): during this test, in order
    first, last = samples["fabric_rca_first_read_timestamp_seconds"], samples["fabric_rca_last_read_timestamp_seconds"]
    assert time.time() - 600 < first <= last <= time.time()


def test_a_worker_killed_mid_stream_restarts_to_the_same_incidents(fleet, expected):
    fleet.start("first")
    published = []
    # ~30 s of telemetry: the second worker's join and the rebalance (seconds on a loaded
    # machine) end while it still flows, so both workers get messages of their partitions
    publisher = threading.Thread(target=lambda: published.append(fleet.publish(speed=10.0)))
    publisher.start()
    time.sleep(6)
    assert publisher.is_alive(), "the kill must land mid-stream"
    fleet.kill("first")  # SIGKILL: no snapshot, no commit on the way out
    time.sleep(1)
    second = fleet.start("second")
    publisher.join(timeout=120)
    # The second worker takes over once the group has dropped the killed one (its session
    # timeout); a worker that keeps up may have stored the incident before the kill, so
    # wait until the second has read everything before judging the store.
    (stats,) = published
    deadline = time.monotonic() + 120
    while _metrics(second)["fabric_rca_records_total"] < stats.records and time.monotonic() < deadline:
        time.sleep(0.5)
    samples = _metrics(second)
    assert samples["fabric_rca_records_total"] >= stats.records, fleet.logs()
    assert samples["fabric_rca_stages_restored_total"] >= 1  # it resumed from snapshots
    got = fleet.wait_for(expected)
    assert _summary(got) == _summary(expected), fleet.logs()
    assert len({i["id"] for i in got}) == len(got)  # idempotent writes: no duplicate incidents


def test_two_workers_split_partitions_and_agree(fleet, expected):
    a = fleet.start("a")
    b = fleet.start("b")
    time.sleep(3)  # let the group settle after the second member joined
    fleet.publish()
    got = fleet.wait_for(expected)
    assert _summary(got) == _summary(expected), fleet.logs()
    stages = [set(httpx.get(u + "/healthz").json()["stages"]) for u in (a, b)]
    detect = [{s for s in st if s.startswith("detect:")} for st in stages]
    assert all(detect) and not (detect[0] & detect[1]), stages  # both work, on different partitions


def test_a_worker_joining_mid_stream_changes_nothing(fleet, expected):
    """The partitions move while telemetry flows: the stages they take along (snapshots)
    and correlation's wait for every partition keep the incidents those of the replay."""
    a = fleet.start("a")
    published = []
    # ~30 s of telemetry: the second worker's join and the rebalance (seconds on a loaded
    # machine) end while it still flows, so both workers get messages of their partitions
    publisher = threading.Thread(target=lambda: published.append(fleet.publish(speed=10.0)))
    publisher.start()
    time.sleep(4)
    assert publisher.is_alive(), "the second worker must join mid-stream"
    b = fleet.start("b")
    publisher.join(timeout=120)
    got = fleet.wait_for(expected)
    assert _summary(got) == _summary(expected), fleet.logs()
    stages = [set(httpx.get(u + "/healthz").json()["stages"]) for u in (a, b)]
    assert all(any(s.startswith("detect:") for s in st) for st in stages), (stages, fleet.logs())  # split


def _split_by_partition(fleet, n: int):
    """The scenario's telemetry in two files: hosts of the first n/2 partitions, the rest."""
    import gzip

    import orjson
    from engine.replay import open_lines

    early, late = fleet.tmp / "early.jsonl.gz", fleet.tmp / "late.jsonl.gz"
    with gzip.open(early, "wb") as e, gzip.open(late, "wb") as lt:
        for line in open_lines(fleet.folder / "telemetry.jsonl.gz"):
            doc = orjson.loads(line)
            host = (doc["metrics"][0] if "metrics" in doc else doc)["tags"]["host"]
            (key_partition(host.encode(), range(n)) < n // 2 and e or lt).write(line.rstrip(b"\n") + b"\n")
    return early, late


def test_partitions_whose_telemetry_starts_late_change_nothing(fleet, expected):
    """Half of the partitions get their telemetry only after the other half's is all in:
    correlation waits for them (and says so on /healthz) instead of applying the early
    half alone, so the incidents are still the replay's."""
    n = 4  # pipeline_topics' default
    early, late = _split_by_partition(fleet, n)
    base = fleet.start("w1")
    stats = fleet.publish([early])
    deadline = time.monotonic() + 60
    while _metrics(base)["fabric_rca_records_total"] < stats.records and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _metrics(base)["fabric_rca_records_total"] == stats.records  # the early half is all in
    health = httpx.get(base + "/healthz").json()
    assert health["waiting_for"] == [f"{fleet.prefix}fabric.telemetry:{p}" for p in range(n // 2, n)], health
    assert health["idle_sources"] == [] and health["applied_to"] is None
    assert fleet.stored() == []  # nothing correlated from half of the fabric
    fleet.publish([late])
    got = fleet.wait_for(expected)
    assert _summary(got) == _summary(expected), fleet.logs()


def test_partitions_without_telemetry_stop_holding_correlation_back(fleet):
    """Partitions that never get a record (no hosts hashed to them) count as idle after
    --idle-partition-s, and the others' telemetry is correlated without them."""
    n = 4
    early, _ = _split_by_partition(fleet, n)
    base = fleet.start("w1", "--idle-partition-s", "2")
    fleet.publish([early])
    deadline = time.monotonic() + 60
    health = {}
    while time.monotonic() < deadline:
        health = httpx.get(base + "/healthz").json()
        if health.get("idle_sources") and (health.get("applied_to") or 0) > 0:
            break
        time.sleep(0.5)
    assert health["idle_sources"] == [f"{fleet.prefix}fabric.telemetry:{p}" for p in range(n // 2, n)], health
    assert health["waiting_for"] == []
    assert health["applied_to"] > 0
    assert _metrics(base)["fabric_rca_idle_partitions"] == n - n // 2


def test_unreadable_records_are_dead_lettered_with_their_bytes(fleet):
    from kafka import KafkaConsumer, KafkaProducer

    fleet.start("w1")
    bad = [b"{not json", b'{"name":"switch_port","tags":{},"fields":{"a":1},"timestamp":1764400000}']
    producer = KafkaProducer(bootstrap_servers=fleet.bootstrap)
    for value in bad:
        producer.send(fleet.prefix + "fabric.telemetry", key=b"leaf01", value=value)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(fleet.prefix + "fabric.telemetry.dlq", bootstrap_servers=fleet.bootstrap,
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

    worker = fleet._named("w1")[0]
    worker.stop(timeout=20)  # SIGTERM: it shuts down by itself (not SIGKILLed), no agent crashed on the way
    assert worker.proc.returncode == 0 and "Crashed" not in worker.log_path.read_text(), worker.tail()


def test_workers_survive_a_broker_restart_mid_stream(tmp_path, scenario_dir, expected, kafka_bootstrap):
    """Needs the shared broker too (CI's rule), but stops and restarts one of its own."""
    import gzip

    from engine.replay import open_lines

    folder = scenario_dir("pfc_storm")
    lines = list(open_lines(folder / "telemetry.jsonl.gz"))
    halves = [tmp_path / "first.jsonl.gz", tmp_path / "second.jsonl.gz"]
    for path, part in zip(halves, (lines[: len(lines) // 2], lines[len(lines) // 2:])):
        with gzip.open(path, "wb") as fh:
            fh.writelines(part)
    broker = KafkaDev(tmp_path / "broker", timeout=180)
    fleet = Fleet(tmp_path, folder, bootstrap=broker.start())
    try:
        fleet.start("w")
        fleet.publish([halves[0]])
        time.sleep(3)
        broker.stop()
        time.sleep(5)
        assert fleet.alive("w"), fleet.logs()
        broker.start()
        fleet.publish([halves[1]])
        got = fleet.wait_for(expected, timeout=180)
        assert fleet.alive("w"), fleet.logs()
        assert _summary(got) == _summary(expected), fleet.logs()
    finally:
        fleet.stop()
        broker.stop()


def test_a_record_from_2030_changes_no_incident(fleet, expected):
    """One record dated 2030 from an unknown host, after line 1001: the worker holding its
    partition quarantines it (future_timestamp, to the dead-letter topic) and still finds
    what replay finds; no false device_down from a hijacked watermark."""
    import gzip
    import json

    from engine.replay import open_lines

    bad = json.dumps({"name": "switch_port", "tags": {"host": "rogue99", "interface": "swp1"},
                      "fields": {"if_in_octets": 1}, "timestamp": 1_900_000_000})
    path = fleet.tmp / "telemetry-2030.jsonl.gz"
    with gzip.open(path, "wt") as fh:
        for n, line in enumerate(open_lines(fleet.folder / "telemetry.jsonl.gz"), 1):
            fh.write(line.decode().rstrip("\n") + "\n")
            if n == 1001:
                fh.write(bad + "\n")
    fleet.start("w1")
    stats = fleet.publish([path])
    assert stats.failed == 0
    got = fleet.wait_for(expected)
    assert _summary(got) == _summary(expected), fleet.logs()
