"""The publisher's pure part, without a broker: bootstrap addresses, what one recorded
line becomes on Kafka (contract section 1: one metric per message, key = host tag), and
job records built from an squeue document."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.job_sources import load_jobs
from engine.jobs import job_from_placement
from engine.replay import ReplayError
from streams.publish import (
    Message,
    PublishStats,
    job_messages,
    messages_of_line,
    publishable,
    publish_files,
)
from streams.topics import ALL_TOPICS, DLQ, JOBS, TELEMETRY, KafkaUnavailable, ensure_topics, parse_bootstrap

T0 = 1764400000


def metric(host: str | None, name: str = "switch_port", **fields) -> dict:
    tags = {"interface": "swp1"} if host is None else {"host": host, "interface": "swp1"}
    return {"name": name, "tags": tags, "fields": fields or {"if_in_octets": 1}, "timestamp": T0}


def line(doc: object) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode() + b"\n"


# ----------------------------------------------------------------- bootstrap


@pytest.mark.parametrize(("text", "want"), [
    ("127.0.0.1:9092", "127.0.0.1:9092"),
    (" kafka-1.example:19092 ", "kafka-1.example:19092"),
    ("a:1,b:2", "a:1,b:2"),
    ("[::1]:9092", "[::1]:9092"),
    ("host:09092", "host:9092"),
])
def test_parse_bootstrap_accepts_host_port(text, want):
    assert parse_bootstrap(text) == want


@pytest.mark.parametrize(("text", "says"), [
    ("", "empty"),
    ("127.0.0.1", "not HOST:PORT"),
    (":9092", "not HOST:PORT"),
    ("host:", "port ''"),
    ("host:http", "port 'http'"),
    ("host:0", "1..65535"),
    ("host:70000", "1..65535"),
    ("bad host:9092", "not a host name"),
    ("a:1,", "not HOST:PORT"),
])
def test_parse_bootstrap_says_what_is_wrong(text, says):
    with pytest.raises(ValueError, match=says):
        parse_bootstrap(text)


def test_topic_names_are_distinct():
    assert len(set(ALL_TOPICS)) == len(ALL_TOPICS)
    assert (TELEMETRY, JOBS, DLQ) == ("fabric.telemetry", "fabric.jobs", "fabric.telemetry.dlq")


def test_ensure_topics_checks_its_arguments_before_connecting():
    with pytest.raises(ValueError, match="not a valid Kafka topic name"):
        ensure_topics(bootstrap="127.0.0.1:1", topics={"bad name": 4})
    with pytest.raises(ValueError, match="positive integer"):
        ensure_topics(bootstrap="127.0.0.1:1", topics={"ok": 0})


def test_kafka_unavailable_names_the_address_and_the_fix():
    err = KafkaUnavailable("127.0.0.1:1", "connection refused")
    assert isinstance(err, RuntimeError)
    assert "127.0.0.1:1" in str(err) and "scripts/kafka-dev start" in str(err)


# ------------------------------------------------------------ messages_of_line


def _read(doc: dict) -> dict:
    """A metric as the engine reads it back (the timestamp in seconds)."""
    return {**doc, "timestamp": doc["timestamp"] / 1.0}


def test_one_metric_is_one_message_keyed_by_host_with_the_line_as_value():
    raw = line(metric("leaf01"))
    [m], rejects = publishable(raw)
    assert rejects == [] and m == Message(TELEMETRY, b"leaf01", raw.strip(), T0)
    [m], _ = publishable(line({"metrics": [metric("leaf01")]}))  # a batch of one: its member
    assert json.loads(m.value) == _read(metric("leaf01"))


def test_a_batch_becomes_one_message_per_metric_in_order():
    batch = [metric("leaf01"), metric("gpu001", name="nic_port"), metric("leaf02")]
    msgs, _ = publishable(line({"metrics": batch}))
    assert [m.key for m in msgs] == [b"leaf01", b"gpu001", b"leaf02"]
    assert [json.loads(m.value) for m in msgs] == [_read(d) for d in batch]
    assert all(b" " not in m.value for m in msgs)  # compact JSON


@pytest.mark.parametrize(("raw", "reason"), [
    (b"this is not json {", "bad_json"),
    (b'{"name":"switch_port","tags":{"host":"leaf01"},"fields":{"x":NaN},"timestamp":1764400000}', "non_finite_field"),
    (b"\xff\xfe not utf-8", "bad_json"),
    (b"[1, 2, 3]", "not_an_object"),
    (b'{"metrics": "not a list"}', "bad_batch"),
    (line(metric(None)), "missing_host"),
    (line({"name": "switch_port", "tags": {"host": ""}, "fields": {"a": 1}, "timestamp": T0}), "missing_host"),
    (line({"name": "switch_port", "tags": {"host": 7}, "fields": {"a": 1}, "timestamp": T0}), "bad_host"),
    (line({"name": "switch_port", "tags": "leaf01", "fields": {"a": 1}, "timestamp": T0}), "bad_tags"),
    (line({"metrics": [{"metrics": [metric("leaf01")]}]}), "nested_batch"),
    (line({**metric("leaf01"), "extra": [[[[1]]]]}), "too_deep"),
    (b'{"name":"x","tags":{"host":"a"},"fields":{"a":1},"timestamp":1' + b"0" * 400 + b"}", "bad_timestamp"),
    (line(metric("leaf01", pad="x" * 1_000_000)), "line_too_long"),
])
def test_a_line_replay_rejects_is_rejected_with_replays_reason_and_not_sent(raw, reason):
    from engine.normalize import parse_line

    msgs, rejects = publishable(raw)
    assert msgs == [] and [r.reason for r in rejects] == [reason]
    assert [r.reason for r in parse_line(raw)[1]] == [reason]  # one truth: replay's own reading


def test_bad_members_of_a_batch_are_rejected_and_the_good_ones_sent():
    msgs, rejects = publishable(line({"metrics": [metric("leaf01"), metric(None), 42]}))
    assert [m.key for m in msgs] == [b"leaf01"]
    assert sorted(r.reason for r in rejects) == ["missing_host", "not_an_object"]


def test_a_member_nested_past_orjsons_limit_is_a_reject_not_a_crash():
    deep = '{"name":"switch_port","tags":{"host":"leaf01"},"fields":{"a":1},"timestamp":%d,"x":%s}' % (
        T0, "[" * 255 + "]" * 255)
    msgs, rejects = publishable('{"metrics":[%s,%s]}' % (json.dumps(metric("leaf02")), deep))
    assert [m.key for m in msgs] == [b"leaf02"] and [r.reason for r in rejects] == ["too_deep"]


def test_job_placement_goes_to_the_jobs_topic_keyed_by_job_id():
    placement = {"name": "job_placement", "tags": {"scheduler": "slurm", "cluster": "c1", "host": "slurmctld"},
                 "fields": {"job_id": 4242.0, "nodes": "gpu[001-002]"}, "timestamp": T0}
    [m], _ = publishable(line(placement))
    assert (m.topic, m.key) == (JOBS, b"4242")
    no_id = {**placement, "fields": {"nodes": "gpu001"}}
    assert [r.reason for r in publishable(line(no_id)).rejects] == ["bad_job"]
    [m], _ = publishable(line({**placement, "tags": {"job_id": "77"}, "fields": {"nodes": "x"}}))
    assert m.key == b"77"


def test_topic_names_can_be_chosen():
    placement = {"name": "job_placement", "tags": {}, "fields": {"job_id": "1"}, "timestamp": T0}
    msgs, _ = publishable(line({"metrics": [metric("leaf01"), placement]}), topic="t.tel", jobs_topic="t.jobs")
    assert [(m.topic, m.key) for m in msgs] == [("t.tel", b"leaf01"), ("t.jobs", b"1")]


def test_line_endings_and_str_input():
    doc = metric("spine01")
    for raw in (line(doc), line(doc)[:-1] + b"\r\n", line(doc)[:-1], line(doc).decode()):
        [m], _ = publishable(raw)
        assert m.key == b"spine01" and json.loads(m.value) == doc and not m.value.endswith(b"\n")


hosts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12)


@given(st.lists(st.one_of(hosts, st.none()), min_size=1, max_size=20))
def test_invariant_every_good_metric_is_one_message_keyed_by_its_host_and_the_others_rejects(batch_hosts):
    batch = [metric(h) for h in batch_hosts]
    msgs, rejects = publishable(line({"metrics": batch}))
    assert len(msgs) + len(rejects) == len(batch)
    assert [m.key for m in msgs] == [h.encode() for h in batch_hosts if h is not None]
    assert [json.loads(m.value) for m in msgs] == [_read(metric(h)) for h in batch_hosts if h is not None]
    assert {r.reason for r in rejects} <= {"missing_host"}


# ---------------------------------------------------------------- jobs files


SQUEUE = {
    "last_update": {"set": True, "infinite": False, "number": T0 + 900},
    "jobs": [
        {"job_id": 4242, "account": "acme", "user_name": "alice", "job_state": ["RUNNING"], "nodes": "gpu[001-002]",
         "cluster": "c9", "start_time": {"set": True, "infinite": False, "number": T0},
         "end_time": {"set": True, "infinite": True, "number": 0}},
        {"job_id": {"set": True, "infinite": False, "number": 4243}, "account": "beta", "user_name": "bob",
         "job_state": "COMPLETED", "nodes": "gpu003", "start_time": T0 - 1000, "end_time": {"set": False, "number": 0}},
    ],
}


def test_an_squeue_document_becomes_one_placement_record_per_job(tmp_path):
    path = tmp_path / "squeue.json"
    path.write_text(json.dumps(SQUEUE))
    msgs = job_messages(path)
    want = load_jobs(path)
    assert [m.key for m in msgs] == [job.job_id.encode() for _, job in want]
    assert {m.topic for m in msgs} == {JOBS}
    for m, (ts, job) in zip(msgs, want):
        rec = json.loads(m.value)
        assert rec["name"] == "job_placement" and rec["timestamp"] == ts
        assert rec["tags"] == {"scheduler": "slurm", "cluster": "c9"}
        # the engine reads the record back as the same job
        assert job_from_placement(tags=rec["tags"], fields=rec["fields"], ts=rec["timestamp"]) == job


def test_a_placement_jsonl_keeps_its_records_and_skips_other_measurements(tmp_path):
    placement = {"name": "job_placement", "tags": {"scheduler": "slurm", "cluster": "c1"},
                 "fields": {"job_id": "7", "account": "a", "user": "u", "job_state": "RUNNING", "nodes": "gpu001"},
                 "timestamp": T0}
    path = tmp_path / "jobs.jsonl"
    path.write_bytes(line(placement) + line({"metrics": [metric("leaf01"), {**placement, "timestamp": T0 + 1}]}))
    msgs = job_messages(path)
    assert [(m.key, json.loads(m.value)["timestamp"]) for m in msgs] == [(b"7", T0), (b"7", T0 + 1)]


def test_publish_checks_files_before_connecting(tmp_path):
    with pytest.raises(ReplayError, match="no such telemetry file"):
        publish_files([tmp_path / "missing.jsonl"], bootstrap="127.0.0.1:1")
    present = tmp_path / "t.jsonl"
    present.write_bytes(line(metric("leaf01")))
    with pytest.raises(ValueError, match="not HOST:PORT"):
        publish_files([present], bootstrap="nowhere")


def test_publish_stats_rate():
    assert PublishStats().rate == 0.0
    assert PublishStats(records=90, jobs=10, seconds=2.0).rate == 50.0


def test_an_squeue_job_without_any_time_is_stamped_with_the_document_time(tmp_path):
    import os

    path = tmp_path / "squeue.json"
    path.write_text(json.dumps({"jobs": [{"job_id": 1, "job_state": "PENDING", "nodes": "", "start_time": 0}]}))
    os.utime(path, (T0, T0))
    [m] = job_messages(path)
    assert json.loads(m.value)["timestamp"] == T0  # a plausible event time, not 0


def test_messages_of_line_is_what_publishable_sends():
    raw = line({"metrics": [metric("leaf01"), metric(None)]})
    assert messages_of_line(raw) == publishable(raw).messages and len(messages_of_line(raw)) == 1


def test_the_publisher_gives_every_corpus_line_replays_outcome(tmp_path):
    """tests/corpus: what the publisher sends and rejects of each line is what replay
    must accept and reject (expected.jsonl), and every message fits the broker."""
    from test_normalize import load_corpus

    from streams.publish import MAX_MESSAGE_BYTES

    lines, expected, _ = load_corpus(tmp_path)
    for raw, want in zip(lines, expected):
        msgs, rejects = publishable(raw) if raw.strip() else ([], [])
        assert (len(msgs), sorted(r.reason for r in rejects)) == (want["accepted"], want["rejected"]), want["kind"]
        assert all(len(m.value) <= MAX_MESSAGE_BYTES and m.key for m in msgs), want["kind"]


def test_a_line_after_a_bom_is_re_encoded_so_a_batch_of_it_stays_json():
    raw = b"\xef\xbb\xbf" + line(metric("leaf01"))
    [m] = messages_of_line(raw)
    assert m.value[:1] == b"{" and json.loads(b'{"metrics":[' + m.value + b"]}")["metrics"][0]["tags"]["host"] == "leaf01"


def test_a_record_late_in_the_file_is_not_sent_behind_newer_records_it_preceded():
    """Batching by host sent a late record behind another host's newer records that came
    after it in the file: its partition's watermark had passed it (`too_late` for the
    worker, kept by replay). What is pending goes out first."""
    from streams.publish import Message, _Batches

    class Sender:
        jobs_topic = JOBS
        sent: list[bytes] = []

        def send_all(self, messages, records=1):
            for m in messages:
                doc = json.loads(m.value)
                self.sent.extend(doc["metrics"] if "metrics" in doc else [doc])

    def msg(host, ts):
        doc = {"name": "switch_port", "tags": {"host": host}, "fields": {"a": 1}, "timestamp": ts}
        return Message(TELEMETRY, host.encode(), json.dumps(doc).encode(), ts)

    sender = Sender()
    batches = _Batches(sender, size=100)
    order = [msg("c", T0 + 3.1), msg("a", T0 + 3.2), msg("c", T0 + 5.9), msg("a", T0 - 0.5), msg("c", T0 + 5.95)]
    for m in order:
        batches.add([m])
    batches.send()
    sent = [(d["tags"]["host"], d["timestamp"]) for d in sender.sent]
    late = sent.index(("a", T0 - 0.5))
    assert max(ts for _, ts in sent[:late]) <= T0 + 5.9  # only what preceded it in the file
