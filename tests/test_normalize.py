"""Stage 1: raw Telegraf JSON -> Metric or Reject (contract section 1).

T0 = 1764400000 is 2025-11-29T07:06:40Z, worked by hand: 1764400000 s = 20421 days and
25600 s (7 h 6 min 40 s); 20421 days = 20089 days to 2025-01-01 (55 years, 14 of them
leap) + 332, and day 333 of 2025 is 29 November.
"""
from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.normalize import parse_line, parse_metric, seconds
from engine.types import Metric

T0 = 1764400000


def doc(**over) -> dict:
    base = {
        "name": "switch_port",
        "tags": {"host": "leaf01", "interface": "swp1"},
        "fields": {"if_in_octets": 123456, "oper_status": "up"},
        "timestamp": T0,
    }
    for key, value in over.items():
        if value is ...:
            base.pop(key)
        else:
            base[key] = value
    return base


def line(**over) -> str:
    return json.dumps(doc(**over))


# ------------------------------------------------------------- timestamps


@pytest.mark.parametrize(
    ("stamp", "expected"),
    [
        (T0, T0),  # s
        (T0 * 1000, T0),  # ms
        (T0 * 1_000_000, T0),  # us
        (T0 * 1_000_000_000, T0),  # ns
        (float(T0), T0),  # float s
        (T0 + 0.25, T0 + 0.25),  # float s with a fraction
        (T0 * 1000 + 250, T0 + 0.25),  # ms with a fraction of a second
        (T0 * 1_000_000_000 + 500_000_000, T0 + 0.5),  # ns with a fraction
        ("2025-11-29T07:06:40Z", T0),  # RFC 3339, Z
        ("2025-11-29T07:06:40.250Z", T0 + 0.25),  # RFC 3339 with fraction
        ("2025-11-29T09:06:40+02:00", T0),  # RFC 3339, positive offset
        ("2025-11-29T02:06:40-05:00", T0),  # RFC 3339, negative offset
        ("2025-11-29T07:06:40+00:00", T0),
    ],
)
def test_every_timestamp_unit_maps_to_the_same_second(stamp, expected):
    metrics, rejects = parse_line(line(timestamp=stamp))
    assert rejects == []
    assert len(metrics) == 1
    assert metrics[0].ts == pytest.approx(expected, rel=1e-12, abs=1e-6)


def test_metric_fields_survive_normalisation():
    m = parse_metric(doc())
    assert isinstance(m, Metric)
    assert m.name == "switch_port"
    assert m.tags == {"host": "leaf01", "interface": "swp1"}
    assert m.fields == {"if_in_octets": 123456, "oper_status": "up"}
    assert m.ts == T0


UNITS = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
Y2001 = 978307200  # 2001-01-01T00:00:00Z: 31 years, 8 of them leap -> 11323 days
Y2100 = 4102444800  # 2100-01-01T00:00:00Z


@given(second=st.integers(Y2001, Y2100 - 1), unit=st.sampled_from(sorted(UNITS)))
def test_unit_inference_recovers_the_second(second, unit):
    """Invariant unit_inference: for any epoch second in 2001..2099 and any of s/ms/us/ns,
    seconds(second * scale) is that second."""
    assert seconds(second * UNITS[unit]) == pytest.approx(second, rel=1e-9)


@given(second=st.integers(Y2001, Y2100 - 1))
def test_float_seconds_and_rfc3339_recover_the_second(second):
    """Invariant unit_inference (float s and RFC 3339 forms of the same instant)."""
    text = datetime.fromtimestamp(second, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert seconds(float(second)) == pytest.approx(second, rel=1e-9)
    assert seconds(text) == pytest.approx(second, rel=1e-9)


def test_year_bounds_were_worked_out_correctly():
    assert datetime.fromtimestamp(Y2001, tz=timezone.utc) == datetime(2001, 1, 1, tzinfo=timezone.utc)
    assert datetime.fromtimestamp(Y2100, tz=timezone.utc) == datetime(2100, 1, 1, tzinfo=timezone.utc)
    assert datetime.fromtimestamp(T0, tz=timezone.utc) == datetime(2025, 11, 29, 7, 6, 40, tzinfo=timezone.utc)


# ---------------------------------------------------------------- rejects


REJECTS = [
    ("bad_json", '{"name": "switch_port", "tags": {'),
    ("bad_json", "not json at all"),
    ("bad_json", '{"name": "x", "a": ' + "[" * 5000 + "]" * 5000 + "}"),  # deeper than any parser goes
    ("not_an_object", "[1, 2, 3]"),
    ("not_an_object", '"switch_port"'),
    ("not_an_object", "42"),
    ("missing_name", line(name=...)),
    ("missing_name", line(name="")),
    ("missing_name", line(name=7)),
    ("missing_host", line(tags={"interface": "swp1"})),
    ("missing_host", line(tags={"host": "", "interface": "swp1"})),
    ("bad_tags", line(tags=...)),
    ("bad_tags", line(tags=["host", "leaf01"])),
    ("bad_tags", line(tags={"host": "leaf01", "interface": ["swp1"]})),
    ("bad_tags", line(tags={"host": "leaf01", "interface": None})),
    ("bad_fields", line(fields=...)),
    ("bad_fields", line(fields={})),
    ("bad_fields", line(fields=[1, 2])),
    ("bad_fields", line(fields={"if_in_octets": [1, 2]})),
    ("bad_fields", line(fields={"if_in_octets": None})),
    ("bad_fields", line(fields={"if_in_octets": {"value": 1}})),
    ("non_finite_field", line().replace("123456", "NaN")),
    ("non_finite_field", line().replace("123456", "Infinity")),
    ("non_finite_field", line().replace("123456", "-Infinity")),
    ("missing_timestamp", line(timestamp=...)),
    ("bad_timestamp", line(timestamp=12345)),  # 1970: absurd in every unit
    ("bad_timestamp", line(timestamp=-T0)),
    ("bad_timestamp", line(timestamp=10**25)),  # beyond 2100 even as ns
    ("bad_timestamp", line(timestamp=50_000_000_000)),  # year 3554 as s, 1971 as ms
    ("bad_timestamp", line(timestamp=True)),
    ("bad_timestamp", line(timestamp=False)),
    ("bad_timestamp", line(timestamp=None)),
    ("bad_timestamp", line(timestamp=[T0])),
    ("bad_timestamp", line(timestamp="2025-11-29T07:06:40")),  # naive: no time zone
    ("bad_timestamp", line(timestamp="yesterday")),
    ("bad_timestamp", line(timestamp="")),
    ("bad_timestamp", line().replace(str(T0), "NaN")),
]


@pytest.mark.parametrize(("reason", "raw"), REJECTS)
def test_unreadable_records_are_rejected_with_their_reason(reason, raw):
    metrics, rejects = parse_line(raw)
    assert metrics == []
    assert [r.reason for r in rejects] == [reason]
    assert rejects[0].detail  # a human-readable explanation
    assert rejects[0].raw == raw  # the record as received, for the rejects file


def test_bytes_lines_are_read_like_text():
    metrics, rejects = parse_line(line().encode())
    assert rejects == [] and metrics[0].ts == T0
    metrics, rejects = parse_line(b"\xff\xfe garbage")
    assert metrics == [] and [r.reason for r in rejects] == ["bad_json"]


def test_nan_field_detail_names_the_field():
    _, rejects = parse_line(line().replace("123456", "NaN"))
    assert "if_in_octets" in rejects[0].detail


# ---------------------------------------------------------------- batches


def test_batch_with_one_bad_member_keeps_the_good_ones():
    bad = doc(tags={"interface": "swp2"})  # no host
    batch = {"metrics": [doc(tags={"host": "leaf01", "interface": "swp1"}), bad,
                         doc(tags={"host": "leaf02", "interface": "swp1"}, timestamp=T0 * 1000)]}
    metrics, rejects = parse_line(json.dumps(batch))
    assert [m.tags["host"] for m in metrics] == ["leaf01", "leaf02"]
    assert [m.ts for m in metrics] == [T0, T0]
    assert [r.reason for r in rejects] == ["missing_host"]
    assert json.loads(rejects[0].raw) == bad  # the bad member alone, not the whole batch


def test_batch_of_mixed_faults_reports_each():
    batch = {"metrics": [doc(), "oops", doc(timestamp=...), doc(fields={})]}
    metrics, rejects = parse_line(json.dumps(batch))
    assert len(metrics) == 1
    assert sorted(r.reason for r in rejects) == ["bad_fields", "missing_timestamp", "not_an_object"]


def test_a_batch_member_nested_as_deep_as_the_parser_allows_is_rejected_not_a_crash():
    deep = '{"name": "x", "tags": ' + "[" * 1000 + "]" * 1000 + "}"  # orjson reads it; json cannot write it
    metrics, rejects = parse_line('{"metrics": [' + json.dumps(doc()) + ", " + deep + "]}")
    assert len(metrics) == 1 and [r.reason for r in rejects] == ["bad_tags"]
    assert "nested too deeply" in rejects[0].raw


def test_empty_batch_is_nothing():
    assert parse_line('{"metrics": []}') == ([], [])


def test_batch_that_is_not_a_list_is_rejected():
    metrics, rejects = parse_line('{"metrics": {"name": "x"}}')
    assert metrics == []
    assert len(rejects) == 1


# ---------------------------------------------------------------- series key


tag_names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=8).filter(lambda k: k != "host")
tag_values = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789:-.", min_size=1, max_size=8)


@given(tags=st.dictionaries(tag_names, tag_values, max_size=6), data=st.data())
def test_series_key_is_independent_of_tag_order(tags, data):
    """Invariant series_identity: the same tags in any order give the same series key."""
    items = [("host", "leaf01"), *tags.items()]
    shuffled = data.draw(st.permutations(items))
    a = parse_metric(doc(tags=dict(items)))
    b = parse_metric(doc(tags=dict(shuffled)))
    assert isinstance(a, Metric) and isinstance(b, Metric)
    assert a.series == b.series


def test_series_key_separates_series():
    a = parse_metric(doc(tags={"host": "leaf01", "interface": "swp1"}))
    b = parse_metric(doc(tags={"host": "leaf01", "interface": "swp2"}))
    c = parse_metric(doc(name="nic_port", tags={"host": "leaf01", "interface": "swp1"}))
    assert len({a.series, b.series, c.series}) == 3


def test_job_placement_needs_no_host_tag():
    """Contract section 2: job snapshots carry scheduler and cluster tags, not a device."""
    doc = {"name": "job_placement", "tags": {"scheduler": "slurm", "cluster": "c1"},
           "fields": {"job_id": "42", "nodes": "gpu[001-002]", "job_state": "RUNNING"}, "timestamp": 1764400000}
    (m,), rejects = parse_line(json.dumps(doc))
    assert rejects == [] and m.name == "job_placement"
    doc["name"] = "switch_port"
    assert parse_line(json.dumps(doc))[1][0].reason == "missing_host"


def test_tags_are_checked_again_for_a_known_series():
    """The series memo never lets a bad tag through: only checked tags are remembered,
    and a number, boolean or list never equals a remembered string."""
    good = parse_metric(doc(tags={"host": "leaf01", "interface": "1"}))
    assert isinstance(good, Metric)
    numeric = parse_metric(doc(tags={"host": "leaf01", "interface": 1}))
    assert isinstance(numeric, Metric) and numeric.series == good.series and numeric.tags["interface"] == "1"
    assert parse_metric(doc(tags={"host": "leaf01", "interface": True}))[0] == "bad_tags"
    assert parse_metric(doc(tags={"host": "leaf01", "interface": ["1"]}))[0] == "bad_tags"
    assert parse_metric(doc(tags={"host": "", "interface": "1"}))[0] == "missing_host"


# ------------------------------------------------- typed fast path vs. general path

from engine import normalize  # noqa: E402

# JSON texts, not Python values, so that number spellings (1 / 1.0 / 1e2 / 20 digits),
# duplicate keys, NaN literals and invalid text reach both parsers exactly as written.
_json_number = st.from_regex(r"\A-?(0|[1-9][0-9]{0,24})(\.[0-9]{1,20})?([eE][+-]?[0-9]{1,3})?\Z")
_scalar = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.sampled_from([str(2**63 - 1), str(2**63), str(-(2**63)), str(-(2**63) - 1), str(2**64 - 1), str(2**64)]),
    st.floats(allow_nan=True, allow_infinity=True).map(lambda f: json.dumps(f)),  # NaN, Infinity too
    _json_number,
    st.sampled_from(["true", "false", "null", "1e400", "-1e400", "[1]", '{"a": 1}', "1.0", "-0", "-0.0"]),
    st.text(max_size=4).map(json.dumps),
    st.sampled_from(['""', '"1"', '"up"', '"\\ud800"', '"\\u00e9"']),
)
_key = st.sampled_from(["host", "interface", "queue", "a", "b", ""])


def _obj(pairs: list[tuple[str, str]]) -> str:  # a JSON object; keys may repeat
    return "{" + ",".join(f"{json.dumps(k)}:{v}" for k, v in pairs) + "}"


_tags = st.one_of(
    st.lists(st.tuples(_key, st.one_of(st.sampled_from(['"leaf01"', '"swp1"', '""', '"3"']), _scalar)), max_size=4),
    st.lists(st.tuples(st.sampled_from(["interface", "queue", "a"]), st.sampled_from(['"swp1"', '"3"', '"x"'])),
             max_size=3).map(lambda p: [("host", '"leaf01"'), *p]),  # the common, valid case
).map(_obj)
_fields = st.lists(st.tuples(st.sampled_from(["x", "y", "up", "z"]), _scalar), max_size=4).map(_obj)
_timestamp = st.one_of(
    st.sampled_from([T0, T0 * 1000, T0 * 10**6, T0 * 10**9, T0 + 0.5, 1, -T0, 2**63, 2**64, 4102444800 * 10**9 + 1]).map(json.dumps),
    st.sampled_from(['"2025-11-29T07:06:40Z"', '"2025-11-29T07:06:40"', f'"{T0}"', "true", "null", "NaN", "1e400",
                     f"{T0}.0", f"{T0}e3"]),
    _scalar,
)
_name = st.sampled_from(['"switch_port"', '"job_placement"', '""', "1", "null", '"x"'])
_top = st.lists(st.one_of(
    st.tuples(st.just("name"), _name), st.tuples(st.just("tags"), _tags),
    st.tuples(st.just("fields"), _fields), st.tuples(st.just("timestamp"), _timestamp),
    st.tuples(st.sampled_from(["extra", "metrics"]), _scalar),
), max_size=6)
_full = st.tuples(_name, _tags, _fields, _timestamp, st.lists(st.tuples(st.just("extra"), _scalar), max_size=1)).map(
    lambda t: [("name", t[0]), ("tags", t[1]), ("fields", t[2]), ("timestamp", t[3]), *t[4]])


_plausible = st.tuples(  # mostly what the fast path takes, with an odd value now and then
    st.sampled_from(['"switch_port"', '"job_placement"']),
    st.lists(st.tuples(st.sampled_from(["host", "interface", "queue"]), st.sampled_from(['"leaf01"', '"swp1"', '"3"'])),
             max_size=3).map(_obj),
    st.lists(st.tuples(st.sampled_from(["x", "y", "up", "z"]), st.one_of(
        _json_number, st.integers(min_value=-(2**65), max_value=2**65).map(str), st.floats().map(json.dumps),
        st.sampled_from(["true", "false", '"up"', '""', "NaN"]))), max_size=4).map(_obj),
    st.sampled_from([T0, T0 * 1000, T0 * 10**6, T0 * 10**9, T0 + 0.5, T0 * 1e9, 1]).map(json.dumps),
).map(lambda t: [("name", t[0]), ("tags", t[1]), ("fields", t[2]), ("timestamp", t[3])])


@st.composite
def _records(draw) -> str | bytes:
    text = _obj(draw(st.one_of(_plausible, _plausible, _full, _top)))
    shape = draw(st.sampled_from(["plain", "plain", "batch", "typed_batch", "truncated", "trailing", "spaces"]))
    if shape == "batch":
        text = '{"metrics": [' + text + "," + _obj(draw(_full)) + "]}"
    elif shape == "typed_batch":  # what the publisher sends: mostly taken by the typed batch decoder
        text = '{"metrics": [' + ",".join([text] + [_obj(draw(_plausible)) for _ in range(draw(st.integers(0, 3)))]) + "]}"
    elif shape == "truncated":
        text = text[: draw(st.integers(0, len(text)))]
    elif shape == "trailing":
        text += draw(st.sampled_from([" x", ",", "\n", "}"]))
    elif shape == "spaces":
        text = " " + text + " \n"
    return text.encode("utf-8", "surrogatepass") if draw(st.booleans()) else text


def _outcome(result) -> str:
    return repr(result)  # repr tells 1 from 1.0 from True, -0.0 from 0.0, and keeps key order


@settings(max_examples=400, deadline=None)
@given(raw=_records())
def test_typed_fast_path_gives_what_the_general_path_gives(raw):
    """parse_line's msgspec fast path is only a shortcut: every record, valid or not,
    gives the same metrics (values, types, key order, series) and the same rejects as
    orjson + parse_metric alone, with a parser's tags memo cold or warm."""
    parser = normalize.Parser()
    fast_cold = _outcome(parser.parse_line(raw))
    general_warm = _outcome(normalize._parse_line(raw))
    fast_warm = _outcome(parser.parse_line(raw))
    general_cold = _outcome(normalize._parse_line(raw))
    assert fast_cold == general_cold == general_warm == fast_warm


def test_fast_path_takes_a_batch_whole_or_not_at_all():
    rec = '{"name":"switch_port","tags":{"host":"leaf0%d","interface":"swp1"},"fields":{"a":%d},"timestamp":%d}'
    batch = '{"metrics":[' + ",".join(rec % (i, i, T0 + i) for i in range(3)) + "]}"
    assert len(normalize._decode_batch(batch).metrics) == 3  # the typed decoder accepts it
    metrics, rejects = parse_line(batch)
    assert rejects == [] and [(m.tags["host"], m.fields["a"], m.ts) for m in metrics] == \
        [(f"leaf0{i}", i, T0 + i) for i in range(3)]
    # one record without a host: the general path parses the batch and names that record alone
    bad = batch.replace('"host":"leaf01",', "")
    metrics, rejects = parse_line(bad)
    assert [m.tags["host"] for m in metrics] == ["leaf00", "leaf02"]
    assert [r.reason for r in rejects] == ["missing_host"]


def test_fast_path_takes_the_common_record_and_keeps_types():
    raw = ('{"name":"switch_port","tags":{"host":"leaf01","interface":"swp1"},'
           '"fields":{"a":1,"b":1.0,"c":true,"d":"up","e":9223372036854775807},"timestamp":%d}' % (T0 * 10**9))
    assert normalize._decode_record(raw)  # the typed decoder accepts it
    (m,), rejects = parse_line(raw)
    assert rejects == [] and m.ts == T0
    assert [type(v) for v in m.fields.values()] == [int, float, bool, str, int]
    # orjson reads integers beyond 64 bits as floats; the fast path leaves them to it
    (m,), _ = parse_line(raw.replace("9223372036854775807", "99999999999999999999"))
    assert m.fields["e"] == 1e20 and type(m.fields["e"]) is float


def test_records_of_a_series_share_one_tags_dict_and_bad_tags_are_not_remembered():
    """The fast path decodes a series' tags text once: every record of it gets the same
    (read-only) dict, however its text is spaced or ordered; tags that fail a check are
    not remembered, so they fail again."""
    parser = normalize.Parser()
    parse_line = parser.parse_line
    rec = '{"name":"switch_port","tags":%s,"fields":{"a":%d},"timestamp":%d}'
    batch = '{"metrics":[' + ",".join(rec % ('{"host":"leaf01","interface":"swp1"}', i, T0 + i) for i in range(3)) + "]}"
    metrics, _ = parse_line(batch)
    assert metrics[0].tags is metrics[1].tags is metrics[2].tags
    (other,), _ = parse_line(rec % ('{ "interface": "swp1", "host": "leaf01" }', 9, T0 + 9))
    assert other.tags == metrics[0].tags and other.series == metrics[0].series
    bad = rec % ('{"host":"","interface":"swp1"}', 1, T0)
    for _ in range(2):
        assert [r.reason for r in parse_line(bad)[1]] == ["missing_host"]
    assert all(tags.get("host") for tags, _ in parser._tags.values())


def test_records_share_their_field_keys_and_a_long_key_is_refused_after_short_ones(monkeypatch):
    """The fast path's field keys come from msgspec's cache of short keys (one string per
    key for every record), and are checked by length before a measurement remembers them:
    a key over MAX_KEY_CHARS is refused after any number of good records of its kind, and
    the memo forgets all at its bound."""
    parser = normalize.Parser()
    rec = '{"name":"switch_port","tags":{"host":"leaf01","interface":"swp%d"},"fields":%s,"timestamp":%d}'
    (a,), _ = parser.parse_line(rec % (1, '{"if_in_octets":1,"if_out_octets":2}', T0))
    (b,), _ = parser.parse_line(rec % (2, '{"if_in_octets":3,"if_out_octets":4}', T0))
    assert [k for k in a.fields] == [k for k in b.fields] and all(x is y for x, y in zip(a.fields, b.fields))
    long = '{"if_in_octets":5,"%s":6}' % ("k" * 257)
    for _ in range(2):
        metrics, rejects = parser.parse_line(rec % (1, long, T0 + 1))
        assert metrics == [] and [r.reason for r in rejects] == ["key_too_long"]
    monkeypatch.setattr(normalize, "_KEYS_MEMO", 4)
    parser.parse_line(rec % (3, '{"x1":1,"x2":2,"x3":3}', T0))
    assert parser._key_count < 4 and sum(map(len, parser._keys.values())) == parser._key_count


def test_integers_past_64_bits_read_as_orjson_reads_them_on_every_path():
    """orjson reads an integer beyond 64 bits as a double and refuses one beyond a double's
    range. A batch with a NaN member is read by the standard parser, which keeps every
    digit: it now gives the same values, and a stage fed a 400-digit counter rejects it
    instead of raising OverflowError on its rate (which stopped the worker's agent)."""
    from engine.pipeline import DetectStage
    from rules.loader import load_rules

    rec = '{"name":"storage","tags":{"host":"st01"},"fields":{"reads":%s,"writes":5},"timestamp":%d}'
    nan_batch = '{"metrics":[' + rec % ("NaN", T0) + "," + rec % (str(10**30), T0 + 1) + "]}"
    (m,), (r,) = parse_line(nan_batch)
    assert r.reason == "non_finite_field" and m.fields["reads"] == 1e30 and type(m.fields["reads"]) is float
    assert parse_line(rec % (str(10**30), T0))[0][0].fields["reads"] == 1e30  # orjson's reading
    huge = str(10**400)
    assert [x.reason for x in parse_line(rec % (huge, T0))[1]] == ["non_finite_field"]
    stage = DetectStage(rules=load_rules(None), roles={}, source="t")
    for i in range(12):
        stage.feed(rec % (str(10**400 + i * 10**395), T0 + i))
    stage.finish()
    assert stage.stats.rejects["non_finite_field"] == 12


# ---------------------------------------------------------------- bounds and the hostile corpus


def load_corpus(folder):
    """The hostile corpus written into `folder`: (its lines, their expected outcomes)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("make_corpus", Path(__file__).parent / "corpus" / "make_corpus.py")
    make = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make)
    hostile, expected = make.write_corpus(folder)
    lines = hostile.read_bytes().split(b"\n")[:-1]
    return lines, [json.loads(x) for x in expected.read_text().splitlines()], hostile


def _corpus_outcome(metrics, rejects) -> tuple[int, list[str]]:
    return len(metrics), sorted(r.reason for r in rejects)


def test_every_line_of_the_hostile_corpus_gets_its_expected_outcome(tmp_path):
    lines, expected, _ = load_corpus(tmp_path)
    assert len(lines) == len(expected) >= 600 and len({e["kind"] for e in expected}) >= 30
    for raw, want in zip(lines, expected):
        metrics, rejects = parse_line(raw) if raw.strip() else ([], [])
        assert _corpus_outcome(metrics, rejects) == (want["accepted"], want["rejected"]), want["kind"]
        assert all(len(r.detail) <= 200 for r in rejects), want["kind"]  # bounded, never the whole value


def test_a_detect_stage_books_each_corpus_reject_to_its_own_line_and_counts_non_numeric_counters(tmp_path):
    from engine.pipeline import DetectStage
    from rules.loader import load_rules

    lines, expected, _ = load_corpus(tmp_path)
    stage = DetectStage(rules=load_rules(None), roles={}, source="corpus")
    for raw, want in zip(lines, expected):
        if raw.strip():
            stage.feed(raw)
        assert sorted(r.reason for r in stage.take_rejects()) == want["rejected"], want["kind"]
    stage.finish()
    assert stage.take_rejects() == []  # nothing booked later (bad_job used to be, after reordering)
    kinds = [e["kind"] for e in expected]
    assert stage.stats.non_numeric_fields == kinds.count("accepted_string_counter") + kinds.count("accepted_bool_counter")


@pytest.mark.parametrize(("reason", "raw"), [
    ("bad_host", line(tags={"host": 7, "interface": "swp1"})),
    ("bad_host", line(tags={"host": True})),
    ("bad_string", line(tags={"host": "leaf01\ud800"})),
    ("bad_timestamp", line(timestamp="\u0661\u0667\u0666\u0664\u0664\u0660\u0660\u0660\u0660\u0660")),
    ("bad_timestamp", line().replace(str(T0), "1" + "0" * 400)),
    ("nested_batch", json.dumps({"metrics": [{"metrics": [doc()]}]})),
    ("too_deep", line(extra=[[[[1]]]])),
    ("too_many_fields", line(fields={f"f{i}": i for i in range(1025)})),
    ("key_too_long", line(fields={"k" * 257: 1})),
    ("line_too_long", line(fields={"a": 1, "pad": "x" * 1_000_000})),
])
def test_bounds_and_types_are_rejected_with_their_own_reason(reason, raw):
    metrics, rejects = parse_line(raw)
    assert metrics == [] and [r.reason for r in rejects] == [reason]
    assert len(rejects[0].detail) <= 200
