"""What the worker dead-letters for a message, judged by the engine (`streams.deadletter`)."""
from __future__ import annotations

import asyncio

import orjson

from engine.pipeline import DetectStage
from rules.loader import load_rules
from streams.deadletter import MAX_HEADER_BYTES, DeadLetters, Letter, bounded, letters

T0 = 1764400000


def rec(host: str | None, ts: float = T0, **fields) -> bytes:
    tags = {"interface": "swp1"} | ({"host": host} if host else {})
    return orjson.dumps({"name": "switch_port", "tags": tags, "fields": fields or {"if_in_octets": 1}, "timestamp": ts})


def batch(*members: bytes) -> bytes:
    return b'{"metrics":[' + b",".join(members) + b"]}"


def rejects_of(value: bytes):
    stage = DetectStage(rules=load_rules(None), roles={})
    stage.feed(value)
    return stage, stage.take_rejects()


def test_a_single_bad_record_is_dead_lettered_as_its_message():
    value = b'{"name": "switch_port", "tags": {'
    _, rejects = rejects_of(value)
    [letter] = letters(value, rejects)
    assert (letter.value, letter.reason, letter.whole) == (value, "bad_json", False)


def test_only_the_bad_members_of_a_batch_are_dead_lettered_with_their_own_bytes():
    good = [rec("leaf01", T0 + i) for i in range(3)]
    no_host = rec(None)
    nested = batch(rec("leaf02"))
    value = batch(good[0], no_host, good[1], nested, good[2])
    stage, rejects = rejects_of(value)
    got = letters(value, rejects)
    assert [(x.value, x.reason) for x in got] == [(no_host, "missing_host"), (nested, "nested_batch")]
    assert stage.stats.records == 5 and sum(stage.stats.rejects.values()) == 2  # the good three were read


def test_a_too_late_member_is_cut_out_by_its_series_and_time():
    stage = DetectStage(rules=load_rules(None), roles={})
    for t in range(40, 61):  # three devices at 1 s: the fleet's time is known, and leaf01's interval
        for host in ("leaf01", "leaf02", "leaf03"):
            stage.feed(rec(host, T0 + t))
    stage.take_rejects()
    late = rec("leaf01", T0)
    value = batch(rec("leaf01", T0 + 61), late)
    stage.feed(value)
    [letter] = letters(value, stage.take_rejects())
    assert (letter.value, letter.reason) == (late, "too_late")


def test_headers_are_bounded_and_an_oversized_value_is_sent_truncated_and_marked():
    assert len(bounded("é" * 1000)) <= MAX_HEADER_BYTES
    sent = []

    class Topic:
        async def send(self, *, key, value, headers):
            sent.append((value, dict(headers)))

    dl = DeadLetters(Topic(), max_value_bytes=1000)
    big = Letter(b"x" * 600_000, "bad_fields", "field 'a' is " + "x" * 600_000)
    asyncio.run(dl.send_all(b"k", [big], source="t:0@5"))
    [(value, headers)] = sent
    assert value == b"x" * 1000 and headers["truncated"].startswith(b"600000 bytes")
    assert len(headers["detail"]) <= MAX_HEADER_BYTES
    assert (dl.delivered, dl.truncated, dl.failed) == (1, 1, 0)


def test_a_refused_send_is_retried_and_counted_only_when_acknowledged():
    tries = []

    class Topic:
        async def send(self, *, key, value, headers):
            tries.append(len(value))
            if len(tries) < 3:
                raise RuntimeError("MessageSizeTooLargeError")

    dl = DeadLetters(Topic(), first_wait_s=0.001)
    asyncio.run(dl.send_all(None, [Letter(b"y" * 5000, "bad_json", "")], source="s"))
    assert tries[0] == 5000 and tries[-1] < 5000 and (dl.delivered, dl.failed) == (1, 0)

    class Down:
        async def send(self, **kw):
            raise ConnectionError("broker away")

    down = DeadLetters(Down(), retries=2, first_wait_s=0.001)
    asyncio.run(down.send_all(None, [Letter(b"z", "bad_json", "")], source="s"))
    assert (down.delivered, down.failed) == (0, 1)
