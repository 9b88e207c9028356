"""Influx line protocol beside JSON: the real Telegraf samples, escapes, value kinds,
specific rejects, and a round trip of generated metrics."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from testkit.samples import samples_dir
from engine import lineproto
from engine.lineproto import LineError, dumps, parse
from engine.normalize import parse_line

SAMPLES = samples_dir()
LP_FILES = sorted(SAMPLES.rglob("*.lp")) if SAMPLES.is_dir() else []
# The diskio README's last three lines write `io_await:0.33` (a typo of the README: no
# Telegraf serializer writes `:`). They are the one known bad input among the samples.
README_TYPO = "io_await:"


@pytest.mark.skipif(not LP_FILES, reason="no real samples on this machine")
@pytest.mark.parametrize("path", LP_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_real_sample_line_parses(path):
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    for line in lines:
        if README_TYPO in line:
            with pytest.raises(LineError) as err:
                parse(line)
            assert err.value.reason == "lp_bad_field" and "io_await:" in err.value.detail
            continue
        doc = parse(line)
        assert doc["name"] and doc["fields"] and isinstance(doc["timestamp"], int)


def test_ethtool_line_reads_like_its_json():
    line = "ethtool,driver=mlx5_core,host=gpu01,interface=eth0 rx_bytes=123i,link=1i 1764400000000000000"
    assert parse(line) == {"name": "ethtool", "tags": {"driver": "mlx5_core", "host": "gpu01", "interface": "eth0"},
                           "fields": {"rx_bytes": 123, "link": 1}, "timestamp": 1764400000000000000}
    metrics, rejects = parse_line(line.encode())
    assert rejects == [] and metrics[0].ts == 1764400000.0 and metrics[0].series == \
        "ethtool|driver=mlx5_core|host=gpu01|interface=eth0"


def test_escapes_strings_and_kinds():
    doc = parse(r'my\ meas\,x,ta\=g=v\ 1\,2 s="a \"q\" \\ b",u=7u,f=1.5,e=-2e3,b1=t,b2=FALSE,b3=True,n=3 1700000000')
    assert doc["name"] == "my meas,x"
    assert doc["tags"] == {"ta=g": "v 1,2"}
    assert doc["fields"] == {"s": 'a "q" \\ b', "u": 7, "f": 1.5, "e": -2000.0, "b1": True, "b2": False,
                             "b3": True, "n": 3.0}
    assert isinstance(doc["fields"]["n"], float)  # no suffix: a float, as InfluxDB reads it
    assert parse('m,host=h s="a=b,c d" 1')["fields"] == {"s": "a=b,c d"}


def test_timestamp_is_optional_in_the_syntax_but_required_by_the_engine():
    assert "timestamp" not in parse("m,host=h v=1i")
    metrics, rejects = parse_line("m,host=h v=1i")
    assert metrics == [] and [r.reason for r in rejects] == ["missing_timestamp"]


@pytest.mark.parametrize("line, reason", [
    ("m,host=h", "lp_no_fields"),
    ("m,host=h  v=1i 1", "lp_syntax"),
    ("m,host=h v=1i 1 extra", "lp_syntax"),
    ("m,host v=1i 1", "lp_bad_tag"),
    ("m,host= v=1i 1", "lp_bad_tag"),
    ("m,host=h v 1", "lp_bad_field"),
    ("m,host=h v= 1", "lp_bad_field"),
    ("m,host=h v=12x 1", "lp_bad_field"),
    ("m,host=h v=nan 1", "lp_bad_field"),
    ("m,host=h v=99999999999999999999i 1", "lp_bad_field"),
    ("m,host=h v=-1u 1", "lp_bad_field"),
    ('m,host=h v="open 1', "lp_bad_string"),
    ("m,host=h v=1i 12:00", "lp_bad_timestamp"),
    ("m,host=h v=1i 1.5", "lp_bad_timestamp"),
    (",host=h v=1i 1", "lp_syntax"),
])
def test_bad_lines_are_rejected_with_a_specific_reason(line, reason):
    with pytest.raises(LineError) as err:
        parse(line)
    assert err.value.reason == reason and err.value.detail
    if line[0].isalnum():  # (the hook only takes lines that start like a name)
        metrics, rejects = parse_line(line)
        assert metrics == [] and [r.reason for r in rejects] == [reason] and rejects[0].raw == line


def test_a_message_of_many_lines_gives_each_record_and_each_reject():
    text = b"m,host=a v=1i 1700000000\n\n# a comment\nm,host=b v=2i 1700000001\nm,host=c v 1\n"
    metrics, rejects = parse_line(text)
    assert [m.tags["host"] for m in metrics] == ["a", "b"] and [r.reason for r in rejects] == ["lp_bad_field"]


def test_device_tag_stands_in_for_a_missing_host():
    metrics, _ = parse_line("ifcounters,name=Ethernet35,source=127.0.0.1:57400 in_octets=5u 1704442117721474264")
    assert metrics[0].tags["host"] == "127.0.0.1"
    metrics, rejects = parse_line("diskio,name=sda reads=1i 1578326400000000000")
    assert metrics == [] and [r.reason for r in rejects] == ["missing_host"]


def test_json_and_old_rejects_are_unchanged_by_the_hook():
    assert [r.reason for r in parse_line("not json at all")[1]] == ["bad_json"]
    assert [r.reason for r in parse_line("[1, 2, 3]")[1]] == ["not_an_object"]
    assert [r.reason for r in parse_line(b"\xff\xfe a=1")[1]] == ["bad_json"]
    metrics, _ = parse_line('{"name":"switch_port","tags":{"host":"l","interface":"s"},"fields":{"if_in_octets":1},'
                            '"timestamp":1764400000}')
    assert metrics[0].name == "switch_port"


_name = st.text(st.characters(codec="utf-8", exclude_characters="\\\n\r\t\"", exclude_categories=("Cs", "Cc")),
                min_size=1, max_size=12).filter(lambda s: s.strip() == s and not s.startswith("#"))
_value = st.one_of(st.integers(-(2**63), 2**63 - 1), st.booleans(),
                   st.floats(allow_nan=False, allow_infinity=False),
                   st.text(st.characters(codec="utf-8", exclude_characters="\n\r", exclude_categories=("Cs",)),
                           max_size=20))


@settings(max_examples=300, deadline=None)
@given(name=_name, tags=st.dictionaries(_name, _name, max_size=4), fields=st.dictionaries(_name, _value, min_size=1,
       max_size=5), ts=st.integers(0, 2**62))
def test_a_generated_metric_survives_a_round_trip(name, tags, fields, ts):
    doc = parse(dumps(name, tags, fields, ts).strip())
    assert doc == {"name": name, "tags": tags, "fields": fields, "timestamp": ts}


def test_parse_lines_keeps_errors_in_place():
    out = lineproto.parse_lines("a v=1i 1\nb v 1")
    assert out[0]["name"] == "a" and isinstance(out[1], LineError)


def _outcome(fn, line: str):
    try:
        return fn(line)
    except LineError as exc:
        return exc.reason


@settings(max_examples=500, deadline=None)
@given(st.text(st.sampled_from('ab=, "1i.ut-'), min_size=1, max_size=30).map(str.strip).filter(bool))
def test_without_backslashes_the_fast_cut_reads_as_the_character_loop(line):
    from engine.lineproto import parse_escaped
    assert _outcome(parse, line) == _outcome(parse_escaped, line)


def test_quoted_strings_with_blanks_and_commas_without_backslashes():
    doc = parse('gnmi,host=h,name=e1 oper_status="UP, mostly",descr="a b=c",n=3i 1700000000000000000')
    assert doc["fields"] == {"oper_status": "UP, mostly", "descr": "a b=c", "n": 3}
    assert doc["timestamp"] == 1700000000000000000


def _typed(fields: dict) -> list:
    return [(k, type(v), v) for k, v in fields.items()]


_token = st.sampled_from(["1", "0", "1i", "-1i", "-0i", "01i", "1u", "-1u", "1.5", "1.", ".5", "+1", "-2.5e-3", "1e5",
                          "1E+5", "1e999", "t", "true", "True", "f", "false", "FALSE", "truei", "1.5i", '"x"', '""',
                          '"a,b"', '"a=b"', '"a b"', '"x"i', '"x', "nan", "inf", "9223372036854775807i",
                          "123456789012345678i", "1234567890123456789i", "18446744073709551615u", "99999999999999999999u"])
_fields_text = st.lists(st.tuples(st.sampled_from(["a", "b", "a b", 'k"', "", "é", "x:y", "i"]), _token), min_size=1,
                        max_size=4).map(lambda kv: ",".join(f"{k}={v}" for k, v in kv))
_fieldset = st.one_of(st.text(st.sampled_from('ab=, "1i.uet-E0f+:'), min_size=1, max_size=30), _fields_text)


@settings(max_examples=300, deadline=None)
@given(name=_name.filter(lambda s: s[0].isascii() and (s[0].isalnum() or s[0] == "_")),  # (as the hook takes)
       tags=st.dictionaries(_name, _name, max_size=3), fields=st.dictionaries(_name, _value, min_size=1, max_size=5),
       ts=st.integers(1_600_000_000, 2**62))
def test_the_reader_gives_what_parse_and_the_record_checks_give(name, tags, fields, ts):
    """Parser.parse_line (the common forms, the head memo) against the general path
    (lineproto.parse, then normalize.parse_metric) on generated lines, twice (the
    second time from the memo)."""
    from engine import normalize
    line = dumps(name, {"host": "h", **tags}, fields, ts)
    try:
        doc = parse(line.strip())
        result = normalize.parse_metric(doc)
        want = ([(result.name, result.tags, _typed(result.fields), result.ts)], []) \
            if isinstance(result, normalize.Metric) else ([], [result[0]])
    except LineError as exc:
        want = ([], [exc.reason])
    reader = normalize.Parser()
    for _ in range(2):
        metrics, rejects = reader.parse_line(line.encode())
        assert ([(m.name, m.tags, _typed(m.fields), m.ts) for m in metrics], [r.reason for r in rejects]) == want


_kind_tokens = {  # (value texts of one kind: a layout fits any of its kind)
    "i": ["1i", "-0i", "0i", "123456789012345678i", "-5i"],
    "u": ["1u", "0u", "9999999999999999999u"],
    "f": ["1.5", "-2.5e-3", "1e5", "1E+5", "1e999", "0.0"],
    "b": ["true", "false"],
    "s": ['"x"', '""', '"a b"', '"é"'],
}
_other = ["1", "1.5i", "truei", "t", "01i", '"a,b"', "1e5u", "nan"]
_layout_key = st.sampled_from(["a", "b", "a:b", "é", "i", "k{", "x"])


@settings(max_examples=600, deadline=None)
@given(st.lists(st.tuples(_layout_key, st.sampled_from(sorted(_kind_tokens))), min_size=1, max_size=4),
       st.lists(st.tuples(st.integers(0, 3), st.integers(0, 6), st.sampled_from(_kind_tokens["f"] + _other)),
                max_size=6),
       st.sampled_from([" 1700000000", "", " 17x"]), st.sampled_from(["m,host=h", "m,host=g"]))
def test_a_layout_reads_every_line_as_common_bytes_does(layout, draws, ts, head):
    """lineproto.Layouts.read gives what common_bytes gives, on a sequence of lines of
    one head: a first line teaches its layout, the next ones fit it with other values
    of each kind, or break it (a value of another kind, a key more or less, no
    timestamp), or belong to another head, in any order."""
    reader = lineproto.Layouts()
    lines = []
    base = [(k, _kind_tokens[c][0]) for k, c in layout]
    lines.append(f"{head} " + ",".join(f"{k}={v}" for k, v in base) + " 1700000000")
    for where, pick, odd in draws:
        fields = [(k, _kind_tokens[c][(pick + i) % len(_kind_tokens[c])]) for i, (k, c) in enumerate(layout)]
        if where == 1:  # a value of another kind (or no value a layout reads)
            fields[pick % len(fields)] = (fields[pick % len(fields)][0], odd)
        elif where == 2:  # a key more
            fields.append(("z", "1i"))
        elif where == 3 and len(fields) > 1:  # a key less
            fields.pop()
        lines.append(f"{head if pick % 3 else 'm,host=o'} " + ",".join(f"{k}={v}" for k, v in fields) + ts)
    for line in lines + lines[::-1]:
        raw = line.encode()
        got, want = reader.read(raw), lineproto.common_bytes(raw)
        assert (got is None) == (want is None), (line, got, want)
        if want is not None:
            assert got[0] == want[0] and got[2] == want[2] and _typed(got[1]) == _typed(want[1]), (line, got, want)
            assert list(got[1]) == list(want[1])  # (the same order of fields)


def test_a_head_whose_lines_alternate_between_two_field_sets_keeps_both_layouts():
    reader = lineproto.Layouts()
    a = b"interface,host=sw1,ifName=swp1 ifInOctets=5i,ifOperStatus=1i 1700000000"
    b = b"interface,host=sw1,ifName=swp1 ifHCInOctets=7i,ifHighSpeed=400000i 1700000000"
    for line in (a, b, a, b):
        assert reader.read(line) == lineproto.common_bytes(line)
    layouts = reader._heads[b"interface,host=sw1,ifName=swp1"]
    assert len(layouts) == 2 and {keys for _, keys in layouts} == {("ifInOctets", "ifOperStatus"),
                                                                    ("ifHCInOctets", "ifHighSpeed")}
