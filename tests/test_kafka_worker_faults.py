"""The worker under faults, on a real broker: hostile records, a refused checkpoint (at
the start and mid-stream), a PostgreSQL outage mid-stream. Each ends with the replay's incidents.

KAFKA_BOOTSTRAP=127.0.0.1:9092 pytest tests/test_kafka_worker_faults.py
"""
import gzip
import os
import threading
import time
from collections import Counter

import httpx
import orjson
import pytest
from kafka import KafkaProducer

from evaluation.scenarios import replay_scenario
from engine.replay import open_lines
from testkit.metrics import scrape as _metrics
from testkit.services import PgDev
from testkit.store import incident_summary as _summary
from testkit.workers import Fleet

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.slow,
    pytest.mark.filterwarnings(r"ignore:.*is deprecated\. Use files\(\) instead:DeprecationWarning"),
]


def _statuses(incidents: list[dict]) -> list[tuple]:
    return sorted((i["id"], i["status"], tuple(r["cause"] for r in i["root_causes"])) for i in incidents)


def _wait_statuses(fleet: Fleet, expected: list[dict], timeout: float = 120, key=None) -> list[dict]:
    """The stored incidents once their ids, statuses and causes are the replay's (a later
    change, such as a resolution, may follow the incident's first appearance), or once
    `key` of them is (what the caller will compare: a wait on more than that runs out
    its timeout whenever the rest differs)."""
    key = key or _statuses
    deadline = time.monotonic() + timeout
    got = fleet.stored()
    while key(got) != key(expected) and time.monotonic() < deadline:
        time.sleep(1)
        got = fleet.stored()
    return got


def _consume(bootstrap: str, topic: str, *, until, timeout: float = 60) -> list:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=1000, max_partition_fetch_bytes=4 * 1024 * 1024)
    got = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and not until(got):
            got.extend(consumer)
    finally:
        consumer.close()
    return got


def _wait_records(base: str, n: int, timeout: float = 90) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        samples = _metrics(base)
        if samples["fabric_rca_records_total"] >= n:
            return samples
        time.sleep(0.5)
    return _metrics(base)


# ------------------------------------------------------------------ hostile records

def _record(host, ts, **fields) -> dict:
    tags = {"interface": "swp1"} | ({"host": host} if host else {})
    return {"name": "switch_port", "tags": tags, "fields": fields or {"if_in_octets": 1}, "timestamp": ts}


def test_hostile_records_are_dead_lettered_with_their_bytes_and_the_rest_is_diagnosed_as_replay_does(
        tmp_path, scenario_dir, kafka_bootstrap):
    folder = scenario_dir("pfc_storm")
    lines = list(open_lines(folder / "telemetry.jsonl.gz"))
    first = orjson.loads(lines[0])
    ts = (first["metrics"][0] if "metrics" in first else first)["timestamp"]
    nested = orjson.dumps({"metrics": [_record("leaf01", ts)]})
    big = orjson.dumps(_record(None, ts, s="x" * 600_000))  # 600 KB, no host
    hostile = {
        b"{not json": "bad_json",
        b'{"name":"switch_port","tags":{"host":"leaf01"},"fields":{"x":NaN},"timestamp":%d}' % ts: "non_finite_field",
        big: "missing_host",
        nested: "nested_batch",  # a batch inside a batch
        b"42": "not_an_object",
    }
    line_of_members = b'{"metrics":[42,' + nested + b"]}"
    own = tmp_path / "hostile"
    own.mkdir()
    for f in folder.iterdir():
        if f.name != "telemetry.jsonl.gz":
            os.symlink(f, own / f.name)
    with gzip.open(own / "telemetry.jsonl.gz", "wb") as fh:
        k = len(lines) // 3
        fh.writelines(lines[:k])
        fh.writelines(v + b"\n" for v in list(hostile)[:3])
        fh.write(line_of_members + b"\n")
        fh.writelines(lines[k:])
    _, expected, stats = replay_scenario(own)
    assert expected and stats.rejects == Counter(hostile.values())  # replay refuses each, for its reason

    fleet = Fleet(tmp_path, own, kafka_bootstrap)
    try:
        base = fleet.start("w1")
        published = fleet.publish()  # the publisher refuses the hostile lines (it judges as replay does) ...
        assert published.rejected == len(hostile)
        raw = KafkaProducer(bootstrap_servers=fleet.bootstrap, max_request_size=2_000_000)
        for value in [*list(hostile)[:3], line_of_members]:  # ... so they go raw, as any client could send them
            raw.send(fleet.prefix + "fabric.telemetry", key=b"leaf01", value=value)
        raw.flush()
        raw.close()
        dlq = _consume(fleet.bootstrap, fleet.prefix + "fabric.telemetry.dlq", until=lambda g: len(g) >= len(hostile))
        assert {m.value: dict(m.headers)["reason"].decode() for m in dlq} == hostile, fleet.logs()
        assert all(len(dict(m.headers)["detail"]) <= 256 for m in dlq)
        got = _wait_statuses(fleet, expected)
        assert _statuses(got) == _statuses(expected), fleet.logs()
        samples = _wait_records(base, published.records)
        assert samples["fabric_rca_dead_lettered_total"] == len(dlq) == len(hostile)
        assert samples["fabric_rca_dead_letter_failed_total"] == 0
    finally:
        fleet.stop()


# ------------------------------------------------------------------ a refused checkpoint

def test_a_refused_checkpoint_is_never_used_and_the_stage_rebuilt_from_input(tmp_path, scenario_dir,
                                                                           kafka_bootstrap, replay_once):
    """Garbage and a crafted value (a pickle that would run a command) as the snapshots of
    every stage: each is refused, logged and counted, the stages start fresh, and the
    scenario is diagnosed as replay does."""
    from kafka import KafkaProducer

    from streams import state

    folder = scenario_dir("pfc_storm")
    _, expected, _ = replay_once(folder)
    fleet = Fleet(tmp_path, folder, kafka_bootstrap)
    keys = [f"detect:{fleet.prefix}fabric.telemetry:{p}" for p in range(4)] + [f"correlate:{fleet.prefix}fabric.symptoms"]
    crafted = b"\x80\x04cos\nsystem\n(S'touch " + str(tmp_path / "pwned").encode() + b"'\ntR."
    producer = KafkaProducer(bootstrap_servers=fleet.bootstrap)
    for i, key in enumerate(keys):
        blob = crafted if i % 2 else b"garbage"
        producer.send(fleet.prefix + "fabric.state", key=key.encode(), value=state.encode(10**6, blob))
    producer.flush()
    producer.close()
    try:
        base = fleet.start("w1")
        published = fleet.publish()
        samples = _wait_records(base, published.records)
        assert samples["fabric_rca_records_total"] == published.records, fleet.logs()  # none skipped as covered
        got = _wait_statuses(fleet, expected)
        assert _statuses(got) == _statuses(expected), fleet.logs()
        samples = _metrics(base)
        assert samples["fabric_rca_checkpoints_refused_total"] == len(keys)
        assert samples["fabric_rca_stages_restored_total"] == 0
        log = (tmp_path / "w1.log").read_text()
        assert all(f"checkpoint of {key} at offset 1000000 refused" in log for key in keys)
        assert not (tmp_path / "pwned").exists()
    finally:
        fleet.stop()


def _halves(folder, tmp_path) -> list:
    """The scenario's telemetry as two files, the first half of its lines and the rest."""
    lines = list(open_lines(folder / "telemetry.jsonl.gz"))
    paths = [tmp_path / "first.jsonl.gz", tmp_path / "rest.jsonl.gz"]
    for path, part in zip(paths, (lines[: len(lines) // 2], lines[len(lines) // 2:])):
        with gzip.open(path, "wb") as fh:
            fh.writelines(line.rstrip(b"\n") + b"\n" for line in part)
    return paths


def _committed(bootstrap: str, group: str) -> dict[str, int]:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        if hasattr(admin, "list_group_offsets"):  # kafka-python 3
            offsets = admin.list_group_offsets(group)[group]
        else:
            offsets = admin.list_consumer_group_offsets(group)
        return {f"{tp.topic}:{tp.partition}": meta.offset for tp, meta in offsets.items() if meta.offset >= 0}
    finally:
        admin.close()


def test_a_checkpoint_refused_mid_stream_is_rebuilt_from_the_partitions_earliest_input(tmp_path, scenario_dir,
                                                                                     kafka_bootstrap, replay_once):
    """A worker reads the first half of the scenario and stops (its snapshots saved, its
    input committed); every snapshot is then replaced by garbage or a crafted pickle. The
    next worker refuses each, re-reads each partition from its earliest offset up to the
    committed one (a consumer of its own) and, fed the rest, holds the incidents of the
    clean replay: the records read before the restart still count, nothing they produced
    is published twice, and nothing the crafted values hold runs."""
    from streams import state

    folder = scenario_dir("pfc_storm")
    _, expected, _ = replay_once(folder)
    first, rest = _halves(folder, tmp_path)
    fleet = Fleet(tmp_path, folder, kafka_bootstrap)
    crafted = b"\x80\x04cos\nsystem\n(S'touch " + str(tmp_path / "pwned").encode() + b"'\ntR."
    try:
        base = fleet.start("w1")
        before = fleet.publish([first])
        _wait_records(base, before.records)
        group, telemetry = fleet.prefix + "fabric-rca", fleet.prefix + "fabric.telemetry:"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # every message of the first half inside a snapshot, and committed
            committed = _committed(fleet.bootstrap, group)
            if sum(n for k, n in committed.items() if k.startswith(telemetry)) == before.messages:
                break
            time.sleep(1)
        fleet._named("w1")[0].stop()  # SIGTERM
        snapshots = state.read_latest(bootstrap=fleet.bootstrap, topic=fleet.prefix + "fabric.state")
        committed = _committed(fleet.bootstrap, group)
        keys = sorted(snapshots)
        assert len(keys) == 5 and sum(n for k, n in committed.items() if k.startswith(telemetry)) == before.messages, (
            keys, committed, before.messages)
        producer = KafkaProducer(bootstrap_servers=fleet.bootstrap)
        for i, key in enumerate(keys):
            offset, _ = snapshots[key]
            producer.send(fleet.prefix + "fabric.state", key=key.encode(),
                          value=state.encode(offset, crafted if i % 2 else b"garbage"))
        producer.flush()
        producer.close()

        base = fleet.start("w2")
        after = fleet.publish([rest])
        samples = _wait_records(base, before.records + after.records)
        # the rebuilt stages count the records read before the restart once, as restored ones would
        assert samples["fabric_rca_records_total"] == before.records + after.records, fleet.logs()
        got = _wait_statuses(fleet, expected)
        assert _statuses(got) == _statuses(expected) and _summary(got) == _summary(expected), fleet.logs()
        samples = _metrics(base)
        assert samples["fabric_rca_checkpoints_refused_total"] == len(keys)
        assert samples["fabric_rca_stages_restored_total"] == 0
        reread = {k: n for k, n in committed.items() if ".fabric.telemetry:" in k or ".fabric.symptoms:" in k}
        assert samples["fabric_rca_state_rebuilt_records_total"] == sum(reread.values()), (reread, fleet.logs())
        log = (tmp_path / "w2.log").read_text()
        assert all(f"rebuilt {key} from" in log for key in keys), log[-3000:]
        assert not (tmp_path / "pwned").exists()
        changes = _consume(fleet.bootstrap, fleet.prefix + "fabric.incidents", until=lambda g: False, timeout=5)
        sent = Counter((m.key, m.value) for m in changes)
        assert max(sent.values()) == 1, "an incident change published twice"
    finally:
        fleet.stop()


# ------------------------------------------------------------------ a store outage

def test_a_store_outage_mid_stream_loses_no_incident_change(tmp_path, scenario_dir, kafka_bootstrap, replay_once):
    if not os.path.isdir("/usr/lib/postgresql") and not os.environ.get("PG_BIN"):
        pytest.skip("no PostgreSQL server binaries (scripts/pg-dev installs them as root)")
    folder = scenario_dir("pfc_storm")
    _, expected, _ = replay_once(folder)
    pg = PgDev()
    fleet = Fleet(tmp_path, folder, kafka_bootstrap, db=pg.start())
    try:
        base = fleet.start("w1")
        published = []
        publisher = threading.Thread(target=lambda: published.append(fleet.publish(speed=25.0)))  # ~12 s
        publisher.start()
        time.sleep(2)
        pg.stop()
        seen_down = []
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            health = httpx.get(base + "/healthz", timeout=5).json()
            if health["status"] == "store_unavailable":
                seen_down.append((health["store"], _metrics(base)["fabric_rca_store_available"]))
            assert fleet.alive("w1"), fleet.logs()
            time.sleep(0.5)
        pg.start()
        publisher.join(timeout=120)
        got = _wait_statuses(fleet, expected)
        assert fleet.alive("w1"), fleet.logs()
        assert seen_down and all(not s["available"] and m == 0 for s, m in seen_down), seen_down
        assert max(s["pending_changes"] for s, _ in seen_down) > 0, "the outage must hold back changes"
        assert _statuses(got) == _statuses(expected) and _summary(got) == _summary(expected), fleet.logs()
        health = httpx.get(base + "/healthz").json()
        assert health["status"] == "ok" and health["store"] == {"available": True, "pending_changes": 0}
        # the incidents topic holds every change too: its latest per id is the replay's
        latest: dict[str, dict] = {}
        for m in _consume(fleet.bootstrap, fleet.prefix + "fabric.incidents",
                          until=lambda g: False, timeout=5):  # (all of it: read for 5 s)
            latest[m.key.decode()] = orjson.loads(m.value)
        assert _statuses(list(latest.values())) == _statuses(expected)
    finally:
        fleet.stop()
        pg.remove()

