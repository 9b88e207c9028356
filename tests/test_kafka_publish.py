"""Publishing recorded telemetry to a real Kafka broker and reading it back.

KAFKA_BOOTSTRAP=127.0.0.1:9092 pytest tests/test_kafka_publish.py
Without KAFKA_BOOTSTRAP the tests fail in CI (CI set) and are skipped elsewhere.

Expectations are counted from the files with the standard json module, not with the
publisher's own parsing. Lines replay rejects are rejected by the publisher too (counted,
written to its rejects file, never sent).
"""
from __future__ import annotations

import gzip
import json
import time
import uuid
from collections import defaultdict
from pathlib import Path

import pytest

from streams.publish import publish_files
from streams.topics import KafkaUnavailable, TopicError, ensure_topics, partition_counts

pytestmark = [
    pytest.mark.kafka,
    # kafka-python 3.0 loads its protocol schemas with importlib.resources' legacy API
    pytest.mark.filterwarnings(r"ignore:.*is deprecated\. Use files\(\) instead:DeprecationWarning"),
]

PARTITIONS = 4
DEADLINE_S = 15.0
GARBAGE = b"this line is not json {"
NO_HOST = b'{"name":"switch_port","tags":{"interface":"swp9"},"fields":{"if_in_octets":1},"timestamp":1764400000}'
EXTRA_JOB = "9001"
ANY_FILE = Path(__file__).resolve()  # any existing file: the broker is never reached


def consume_all(bootstrap: str, topic: str) -> list:
    """Every record of `topic` up to its end offsets at call time, in offset order per
    partition (no consumer group: assign and read from the beginning)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             request_timeout_ms=10_000, client_id="fabric-rca-test")
    try:
        parts = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        assert parts, f"topic {topic} has no partitions"
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        end = consumer.end_offsets(parts)
        records = []
        deadline = time.monotonic() + DEADLINE_S
        while any(consumer.position(tp) < end[tp] for tp in parts):
            assert time.monotonic() < deadline, f"{topic}: not read to its end within {DEADLINE_S} s"
            for batch in consumer.poll(timeout_ms=500).values():
                records.extend(batch)
        return records
    finally:
        consumer.close()


def metrics_in(path: Path) -> list[object]:
    """The metrics of a recorded file in file order; an unreadable line counts as one."""
    opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
    out: list[object] = []
    with opener(path, "rb") as fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                doc = json.loads(line)
            except ValueError:
                out.append(line.strip())
                continue
            out.extend(doc["metrics"] if isinstance(doc, dict) and "metrics" in doc else [doc])
    return out


def is_job(m: object) -> bool:
    return isinstance(m, dict) and m.get("name") == "job_placement"


def is_sent(m: object) -> bool:
    """A telemetry metric of the odd file that replay accepts (not the garbage, not NO_HOST)."""
    return isinstance(m, dict) and not is_job(m) and bool(m.get("tags", {}).get("host"))


def as_read(m: dict) -> dict:
    """A metric as the engine reads it: a batch member is sent with its time in seconds."""
    from engine.normalize import seconds

    return {**m, "timestamp": seconds(m["timestamp"])}


@pytest.fixture(scope="module")
def published(tmp_path_factory, kafka_bootstrap):
    """A link_flap scenario plus a file of odd lines, published once to fresh topics."""
    import sim

    bootstrap = kafka_bootstrap
    out = tmp_path_factory.mktemp("publish")
    sim.simulate(out=out, scenario="link_flap", seed=3, duration=40)
    recorded = out / "telemetry.jsonl.gz"
    with gzip.open(recorded, "rb") as fh:
        first = [json.loads(line) for _, line in zip(range(3), fh)]
    odd = out / "odd.jsonl"
    placement = {"name": "job_placement", "tags": {"scheduler": "slurm", "cluster": "c1"},
                 "fields": {"job_id": EXTRA_JOB, "account": "acme", "user": "u", "job_state": "RUNNING",
                            "nodes": "gpu001"}, "timestamp": 1764400000}
    odd.write_bytes(b"\n".join([
        GARBAGE,
        json.dumps({"metrics": first[:2]}).encode(),  # a batch: one message per metric
        json.dumps(placement).encode(),
        NO_HOST,
        json.dumps(first[2]).encode(),
    ]) + b"\n")

    tag = uuid.uuid4().hex[:10]
    telemetry, jobs = f"test-pub-{tag}.telemetry", f"test-pub-{tag}.jobs"
    assert ensure_topics(bootstrap=bootstrap, topics={telemetry: PARTITIONS, jobs: PARTITIONS},
                         timeout_s=15) == [telemetry, jobs]
    files = [recorded, odd]
    stats = publish_files(files, bootstrap=bootstrap, topic=telemetry, jobs_topic=jobs, rejects_path=out / "rej.jsonl",
                          jobs_file=out / "jobs.jsonl", batch=1)  # one metric a message: checked one by one
    yield {
        "bootstrap": bootstrap, "stats": stats, "files": files, "jobs_file": out / "jobs.jsonl",
        "rejects": out / "rej.jsonl",
        "telemetry": telemetry, "jobs": jobs,
        "got": consume_all(bootstrap, telemetry), "got_jobs": consume_all(bootstrap, jobs),
    }
    _delete_topics(bootstrap, [telemetry, jobs])


def _delete_topics(bootstrap: str, topics: list[str]) -> None:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        admin.delete_topics(topics, timeout_ms=10_000)
    except Exception:  # cleanup only; the broker's state dir is disposable
        pass
    finally:
        admin.close()


def test_batches_carry_one_hosts_metrics_in_order(published, tmp_path):
    """The default: a message is a `{"metrics": [...]}` batch of one host's metrics."""
    bootstrap = published["bootstrap"]
    topic, jobs = f"test-batch-{uuid.uuid4().hex[:10]}", f"test-batch-jobs-{uuid.uuid4().hex[:10]}"
    ensure_topics(bootstrap=bootstrap, topics={topic: PARTITIONS, jobs: PARTITIONS}, timeout_s=15)
    try:
        recorded = published["files"][0]
        stats = publish_files([recorded], bootstrap=bootstrap, topic=topic, jobs_topic=jobs, batch=50)
        got = consume_all(bootstrap, topic)
    finally:
        _delete_topics(bootstrap, [topic, jobs])
    sent = [m for m in metrics_in(recorded) if not is_job(m)]
    unpacked = []
    for r in got:
        doc = json.loads(r.value)
        batch = doc["metrics"] if "metrics" in doc else [doc]
        assert 1 <= len(batch) <= 50
        assert {m["tags"]["host"] for m in batch} == {r.key.decode()}
        unpacked.append((r.key, r.partition, r.offset, batch))
    assert stats.records == len(sent) == sum(len(b) for *_, b in unpacked)
    assert stats.messages < stats.records / 5  # it really batches
    for host in {m["tags"]["host"] for m in sent}:  # a host's metrics keep their file order
        in_file = [m for m in sent if m["tags"]["host"] == host]
        in_topic = [m for k, _, _, b in sorted(unpacked, key=lambda x: (x[1], x[2])) if k == host.encode() for m in b]
        assert in_topic == in_file


def test_every_metric_is_one_message_except_job_placements(published):
    want = [m for f in published["files"] for m in metrics_in(f) if is_sent(m)]
    assert len(published["got"]) == len(want)
    assert published["stats"].records == len(want)
    assert published["stats"].failed == 0


def test_every_key_is_the_host_tag_of_its_value(published):
    keyed = [r for r in published["got"] if r.key is not None]
    assert len(keyed) == len(published["got"])  # (the garbage line and the metric without host: rejected)
    for rec in keyed:
        assert rec.key == json.loads(rec.value)["tags"]["host"].encode()


def test_messages_of_one_host_arrive_in_file_order_in_one_partition(published):
    want: dict[str, list[object]] = defaultdict(list)
    for f in published["files"]:
        for m in metrics_in(f):
            if is_sent(m):
                want[m["tags"]["host"]].append(as_read(m))
    got: dict[str, list[object]] = defaultdict(list)
    partitions: dict[str, set[int]] = defaultdict(set)
    for rec in sorted(published["got"], key=lambda r: (r.partition, r.offset)):
        if rec.key is not None:
            got[rec.key.decode()].append(as_read(json.loads(rec.value)))
            partitions[rec.key.decode()].add(rec.partition)
    assert len(want) > 10
    assert got == want
    assert all(len(p) == 1 for p in partitions.values())
    assert len({p for ps in partitions.values() for p in ps}) > 1, "hosts should spread over partitions"


def test_job_records_land_on_the_jobs_topic_keyed_by_job_id(published):
    recorded = [json.loads(line) for line in published["jobs_file"].read_text().splitlines() if line.strip()]
    want = sorted([str(r["fields"]["job_id"]) for r in recorded] + [EXTRA_JOB])
    got = published["got_jobs"]
    assert sorted(r.key.decode() for r in got) == want
    for rec in got:
        value = json.loads(rec.value)
        assert value["name"] == "job_placement" and rec.key == str(value["fields"]["job_id"]).encode()
    assert published["stats"].jobs == len(want)
    assert not any(is_job(json.loads(r.value)) for r in published["got"] if r.key is not None)


@pytest.mark.parametrize(("source", "scheduler", "ids"), [
    ("slurm/slurmrestd_jobs_v0.0.43_slurm25.05_slurmweb.json", "slurm", ["4730", "4734", "4741"]),
    ("k8s", "k8s", ["infra:nccl-allreduce-check", "monitoring:dcgm-exporter-5d9c7b8f6", "research:llama-pretrain",
                    "research:vit-sweep"]),
])
def test_scheduler_documents_become_placements_on_the_jobs_topic(published, tmp_path, source, scheduler, ids):
    """An squeue answer saved as `.out` and a `kubectl get pods -o json`: one job_placement per job."""
    from testkit.samples import samples_dir

    given = Path(__file__).parent / "data" / "k8s" / "pods.json" if source == "k8s" else samples_dir() / source
    jobs_file = tmp_path / ("squeue.out" if scheduler == "slurm" else "pods.txt")
    jobs_file.write_bytes(given.read_bytes())
    bootstrap = published["bootstrap"]
    topic, jobs = f"test-sched-{uuid.uuid4().hex[:10]}", f"test-sched-jobs-{uuid.uuid4().hex[:10]}"
    ensure_topics(bootstrap=bootstrap, topics={topic: PARTITIONS, jobs: PARTITIONS}, timeout_s=15)
    try:
        stats = publish_files([], bootstrap=bootstrap, topic=topic, jobs_topic=jobs, jobs_file=jobs_file)
        got = consume_all(bootstrap, jobs)
    finally:
        _delete_topics(bootstrap, [topic, jobs])
    assert stats.jobs == len(ids) and sorted(r.key.decode() for r in got) == ids
    for rec in got:
        value = json.loads(rec.value)
        assert value["name"] == "job_placement" and value["tags"]["scheduler"] == scheduler
        assert rec.key == value["fields"]["job_id"].encode()


def test_unreadable_lines_are_rejected_as_replay_rejects_them_and_not_sent(published):
    assert not any(r.value in (GARBAGE, NO_HOST) for r in published["got"])
    assert published["stats"].rejects == {"bad_json": 1, "missing_host": 1} and published["stats"].unkeyed == 0
    written = [json.loads(x) for x in published["rejects"].read_text().splitlines()]
    assert sorted((r["reason"], r["raw"].strip().encode()) for r in written) == [("bad_json", GARBAGE), ("missing_host", NO_HOST)]
    assert {r["source"] for r in written} == {f"{published['files'][1]}:1", f"{published['files'][1]}:4"}


def test_ensure_topics_creates_nothing_the_second_time(kafka_bootstrap):
    bootstrap = kafka_bootstrap
    name = f"test-ensure-{uuid.uuid4().hex[:10]}"
    try:
        assert ensure_topics(bootstrap=bootstrap, topics={name: 2}, timeout_s=15) == [name]
        assert ensure_topics(bootstrap=bootstrap, topics={name: 2}, timeout_s=15) == []
    finally:
        _delete_topics(bootstrap, [name])


def test_partition_counts_are_read_from_the_broker(kafka_bootstrap):
    names = [f"test-parts-{uuid.uuid4().hex[:10]}" for _ in range(2)]
    try:
        ensure_topics(bootstrap=kafka_bootstrap, topics={names[0]: 3, names[1]: 1}, timeout_s=15)
        assert partition_counts(bootstrap=kafka_bootstrap, topics=names) == {names[0]: 3, names[1]: 1}
        with pytest.raises(TopicError, match=r"test-parts-missing.*not found.*topics create"):
            partition_counts(bootstrap=kafka_bootstrap, topics=[names[0], "test-parts-missing"])
    finally:
        _delete_topics(kafka_bootstrap, names)


def test_an_unreachable_broker_is_named_quickly():
    started = time.monotonic()
    with pytest.raises(KafkaUnavailable, match=r"127\.0\.0\.1:1\b.*scripts/kafka-dev start"):
        ensure_topics(bootstrap="127.0.0.1:1", topics={"fabric.telemetry": 4}, timeout_s=3)
    assert time.monotonic() - started < 15
    started = time.monotonic()
    with pytest.raises(KafkaUnavailable, match=r"127\.0\.0\.1:1\b"):
        publish_files([ANY_FILE], bootstrap="127.0.0.1:1", connect_timeout_s=2)
    assert time.monotonic() - started < 15


def test_speed_paces_event_time_and_reports_progress(published):
    from engine.normalize import seconds

    recorded = published["files"][0]
    times = [seconds(m["timestamp"]) for m in metrics_in(recorded)]
    span = max(times) - min(times)
    speed = span / 1.5  # the whole recording in about 1.5 s
    reports = []
    stats = publish_files([recorded], bootstrap=published["bootstrap"], topic=published["telemetry"],
                          jobs_topic=published["jobs"], speed=speed, progress=reports.append)
    assert 1.5 * 0.8 <= stats.seconds <= 1.5 + 5
    assert len(reports) >= 2 and reports[-1] is stats and stats.rate > 0


def test_a_line_over_the_bound_is_rejected_and_one_at_the_bound_delivered(published, tmp_path):
    """A line over 1,000,000 bytes is replay's `line_too_long`: rejected, never sent (the
    broker would refuse it); a line of exactly 1,000,000 bytes reaches the topic."""
    small = {"name": "switch_port", "tags": {"host": "leaf01"}, "fields": {"if_in_octets": 1}, "timestamp": 1764400000}
    huge = {**small, "fields": {"message": "x" * 1_500_000}}
    at_bound = {**small, "fields": {f"m{i:02d}": "x" * 62_000 for i in range(16)}}
    text = json.dumps(at_bound, separators=(",", ":"))
    at_bound["fields"]["pad"] = "y" * (1_000_000 - len(text) - len(',"pad":""'))
    exact = json.dumps(at_bound, separators=(",", ":")).encode()
    assert len(exact) == 1_000_000
    path = tmp_path / "huge.jsonl"
    path.write_bytes(b"\n".join([json.dumps(small).encode(), json.dumps(huge).encode(), exact,
                                  json.dumps(small).encode()]) + b"\n")
    topic = f"test-pub-{uuid.uuid4().hex[:10]}"
    ensure_topics(bootstrap=published["bootstrap"], topics={topic: 1}, timeout_s=15)
    try:
        stats = publish_files([path], bootstrap=published["bootstrap"], topic=topic, jobs_topic=published["jobs"],
                              rejects_path=tmp_path / "rej.jsonl")
        assert (stats.failed, stats.records, stats.rejects) == (0, 3, {"line_too_long": 1})
        got = [json.loads(r.value) for r in consume_all(published["bootstrap"], topic)]
        assert [len(m["fields"]) for m in got] == [1, 17, 1]
    finally:
        _delete_topics(published["bootstrap"], [topic])


def test_the_hostile_corpus_is_sent_and_rejected_as_replay_would(published, tmp_path):
    """tests/corpus on the real broker: every message the publisher sends is delivered
    (none refused), and it rejects what replay rejects, for the same reasons."""
    from collections import Counter

    from test_normalize import load_corpus

    _, expected, hostile = load_corpus(tmp_path)
    topic, jobs = f"test-corpus-{uuid.uuid4().hex[:10]}", f"test-corpus-jobs-{uuid.uuid4().hex[:10]}"
    ensure_topics(bootstrap=published["bootstrap"], topics={topic: PARTITIONS, jobs: PARTITIONS}, timeout_s=15)
    try:
        stats = publish_files([hostile], bootstrap=published["bootstrap"], topic=topic, jobs_topic=jobs,
                              rejects_path=tmp_path / "rej.jsonl")
        got = consume_all(published["bootstrap"], topic) + consume_all(published["bootstrap"], jobs)
    finally:
        _delete_topics(published["bootstrap"], [topic, jobs])
    assert stats.failed == 0
    assert stats.rejects == Counter(r for e in expected for r in e["rejected"])
    delivered = sum(len(json.loads(r.value).get("metrics", [None])) for r in got)
    assert delivered == stats.records + stats.jobs == sum(e["accepted"] for e in expected)
