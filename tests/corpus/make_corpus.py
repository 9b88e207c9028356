"""Write the hostile corpus: hostile.jsonl (lines that try to break the engine) and
expected.jsonl (what the engine must make of each line), deterministically.

    python tests/corpus/make_corpus.py OUT_DIR

The expected outcomes are written here by hand, case by case, from the data contract
and the bounds of engine/bounds.py, not computed by the engine. See README.md.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

T0 = 1764400000  # 2025-11-29T07:06:40Z, the simulator's start: accepted records sit there
ROUNDS = 8  # the small cases are written once per round, each round with its own host
HOSTILE, EXPECTED = "hostile.jsonl", "expected.jsonl"


def _dump(doc: object) -> str:
    return json.dumps(doc, separators=(",", ":"))


def _rec(host: str = "corpus01", *, name: str = "corpus_probe", tags: dict | None = None,
         fields: dict | None = None, ts: object = T0) -> dict:
    """A metric that the engine accepts and ignores (an unknown measurement on a host
    that no topology has): mixed into real telemetry it can change no incident."""
    return {"name": name, "tags": {"host": host, "interface": "swp1"} if tags is None else tags,
            "fields": {"value": 1} if fields is None else fields, "timestamp": ts}


def _with(doc: dict, **changes) -> dict:
    out = dict(doc)
    for key, value in changes.items():
        if value is ...:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def _job(**fields) -> dict:
    base = {"job_id": "corpus-1", "account": "corpus", "user": "c", "job_state": "RUNNING",
            "nodes": "corpus[1-2]", "start_time": T0}
    return {"name": "job_placement", "tags": {"scheduler": "slurm", "cluster": "corpus"},
            "fields": {k: v for k, v in (base | fields).items() if v is not ...}, "timestamp": T0}


def _round(r: int) -> list[tuple[str, str | bytes, int, list[str]]]:
    """(kind, line, metrics accepted, reasons rejected) of one round's small cases."""
    host = f"corpus{r:02d}"
    ts = T0  # (all at the start: mixed in before real telemetry, none makes it late)
    good = _rec(host, ts=ts)
    s = _dump(good)
    cases: list[tuple[str, str | bytes, int, list[str]]] = [
        ("blank", "", 0, []),
        ("blank_spaces", "   \t", 0, []),
        ("accepted", s, 1, []),
        ("accepted_duplicate", s, 1, []),
        ("accepted_crlf", s + "\r", 1, []),
        ("accepted_unknown_measurement", _dump(_rec(host, name="gpu_temperature", ts=ts)), 1, []),
        ("accepted_numeric_tag", _dump(_rec(host, tags={"host": host, "interface": 7}, ts=ts)), 1, []),
        ("accepted_rfc3339", _dump(_rec(host, ts="2025-11-29T07:06:40Z")), 1, []),
        ("accepted_ms", _dump(_rec(host, ts=ts * 1000)), 1, []),
        ("accepted_ns", _dump(_rec(host, ts=ts * 10**9)), 1, []),
        ("accepted_unicode_host", _dump(_rec(f"córpus-{r}", ts=ts)), 1, []),
        ("accepted_batch_of_one", _dump({"metrics": [good]}), 1, []),
        ("accepted_empty_batch", '{"metrics":[]}', 0, []),
        # strings and booleans in counters are read (the record is valid) and counted as
        # non-numeric by the stage (Stats.non_numeric_fields), never used as numbers
        ("accepted_string_counter", _dump(_rec(host, name="switch_port", ts=ts,
                                               fields={"if_in_errors": "N/A", "oper_status": "up"})), 1, []),
        ("accepted_bool_counter", _dump(_rec(host, name="switch_port", ts=ts, tags={"host": host, "interface": "swp2"},
                                             fields={"if_in_errors": True, "oper_status": "up"})), 1, []),
        ("accepted_job_elsewhere", _dump(_job(job_id=f"corpus-{r}")), 1, []),
        ("bad_json_truncated", s[: len(s) // 2], 0, ["bad_json"]),
        ("bad_json_text", "this is not json", 0, ["bad_json"]),
        ("bad_json_trailing", s + " x", 0, ["bad_json"]),
        ("bad_json_utf8", b"\xff\xfe{" + s.encode(), 0, ["bad_json"]),
        ("accepted_bom", b"\xef\xbb\xbf" + s.encode(), 1, []),  # the standard parser skips a UTF-8 BOM
        ("bad_json_too_deep_to_parse", '{"name":"x","a":' + "[" * 5000 + "]" * 5000 + "}", 0, ["bad_json"]),
        ("not_an_object_list", "[1,2,3]", 0, ["not_an_object"]),
        ("not_an_object_number", "42", 0, ["not_an_object"]),
        ("not_an_object_null", "null", 0, ["not_an_object"]),
        ("missing_name", _dump(_with(good, name=...)), 0, ["missing_name"]),
        ("missing_name_empty", _dump(_with(good, name="")), 0, ["missing_name"]),
        ("missing_name_number", _dump(_with(good, name=7)), 0, ["missing_name"]),
        ("missing_host", _dump(_rec(tags={"interface": "swp1"}, ts=ts)), 0, ["missing_host"]),
        ("missing_host_empty", _dump(_rec(tags={"host": "", "interface": "swp1"}, ts=ts)), 0, ["missing_host"]),
        ("bad_host_number", _dump(_rec(tags={"host": 7, "interface": "swp1"}, ts=ts)), 0, ["bad_host"]),
        ("bad_host_bool", _dump(_rec(tags={"host": True}, ts=ts)), 0, ["bad_host"]),
        ("bad_host_list", _dump(_rec(tags={"host": [host]}, ts=ts)), 0, ["bad_host"]),
        ("bad_tags_missing", _dump(_with(good, tags=...)), 0, ["bad_tags"]),
        ("bad_tags_list", _dump(_with(good, tags=["host", host])), 0, ["bad_tags"]),
        ("bad_tags_value", _dump(_rec(tags={"host": host, "interface": {"a": 1}}, ts=ts)), 0, ["bad_tags"]),
        ("bad_fields_missing", _dump(_with(good, fields=...)), 0, ["bad_fields"]),
        ("bad_fields_empty", _dump(_with(good, fields={})), 0, ["bad_fields"]),
        ("bad_fields_null", _dump(_rec(host, fields={"value": None}, ts=ts)), 0, ["bad_fields"]),
        ("bad_fields_list", _dump(_rec(host, fields={"value": [1]}, ts=ts)), 0, ["bad_fields"]),
        ("non_finite_nan", s.replace('"value":1', '"value":NaN'), 0, ["non_finite_field"]),
        ("non_finite_infinity", s.replace('"value":1', '"value":-Infinity'), 0, ["non_finite_field"]),
        ("non_finite_float_overflow", s.replace('"value":1', '"value":1e400'), 0, ["non_finite_field"]),
        ("non_finite_int_overflow", s.replace('"value":1', '"value":1' + "0" * 400), 0, ["non_finite_field"]),
        ("accepted_int_past_64_bits", s.replace('"value":1', '"value":1' + "0" * 25), 1, []),
        ("missing_timestamp", _dump(_with(good, timestamp=...)), 0, ["missing_timestamp"]),
        ("bad_timestamp_1970", _dump(_with(good, timestamp=12345)), 0, ["bad_timestamp"]),
        ("bad_timestamp_negative", _dump(_with(good, timestamp=-T0)), 0, ["bad_timestamp"]),
        ("bad_timestamp_beyond_ns", _dump(_with(good, timestamp=10**25)), 0, ["bad_timestamp"]),
        ("bad_timestamp_400_digits", s.replace(str(ts), "1" + "0" * 400), 0, ["bad_timestamp"]),
        ("bad_timestamp_float_overflow", s.replace(str(ts), "1e400"), 0, ["bad_timestamp"]),
        ("bad_timestamp_nan", s.replace(str(ts), "NaN"), 0, ["bad_timestamp"]),
        ("bad_timestamp_bool", _dump(_with(good, timestamp=True)), 0, ["bad_timestamp"]),
        ("bad_timestamp_null", _dump(_with(good, timestamp=None)), 0, ["bad_timestamp"]),
        ("bad_timestamp_list", _dump(_with(good, timestamp=[ts])), 0, ["bad_timestamp"]),
        ("bad_timestamp_naive", _dump(_with(good, timestamp="2025-11-29T07:06:40")), 0, ["bad_timestamp"]),
        ("bad_timestamp_words", _dump(_with(good, timestamp="yesterday")), 0, ["bad_timestamp"]),
        ("bad_timestamp_string_inf", _dump(_with(good, timestamp="1e400")), 0, ["bad_timestamp"]),
        ("bad_timestamp_arabic_digits", _dump(_with(good, timestamp="".join(chr(0x660 + int(c)) for c in str(ts)))),
         0, ["bad_timestamp"]),
        ("bad_timestamp_year_3554", _dump(_with(good, timestamp=50_000_000_000)), 0, ["bad_timestamp"]),
        ("bad_string_host", s.replace(f'"host":"{host}"', f'"host":"{host}\\ud800"'), 0, ["bad_string"]),
        ("bad_string_field", s.replace('"value":1', '"value":1,"msg":"x\\udfffy"'), 0, ["bad_string"]),
        ("bad_string_key", s.replace('"value":1', '"value":1,"\\ud83d":2'), 0, ["bad_string"]),
        ("bad_batch", '{"metrics":"not a list"}', 0, ["bad_batch"]),
        ("nested_batch", _dump({"metrics": [{"metrics": [good]}]}), 0, ["nested_batch"]),
        ("nested_batch_beside_good", _dump({"metrics": [good, {"metrics": [good, good]}]}), 1, ["nested_batch"]),
        ("too_deep_extra_key", _dump(_with(good, extra=[[[[1]]]])), 0, ["too_deep"]),
        ("too_deep_member_255", '{"metrics":[%s,%s]}' % (s, s[:-1] + ',"x":' + "[" * 255 + "]" * 255 + "}"),
         1, ["too_deep"]),
        ("mixed_batch", _dump({"metrics": [good, _with(good, name=...), 42, _with(good, fields={})]}),
         1, ["bad_fields", "missing_name", "not_an_object"]),
        ("too_many_fields", _dump(_rec(host, fields={f"f{i}": i for i in range(1025)}, ts=ts)), 0, ["too_many_fields"]),
        ("too_many_tags", _dump(_rec(tags={"host": host} | {f"t{i}": "v" for i in range(64)}, ts=ts)),
         0, ["too_many_tags"]),
        ("key_too_long_field", _dump(_rec(host, fields={"k" * 257: 1}, ts=ts)), 0, ["key_too_long"]),
        ("key_too_long_name", _dump(_rec(host, name="n" * 257, ts=ts)), 0, ["key_too_long"]),
        ("string_too_long_tag", _dump(_rec(tags={"host": host, "interface": "i" * 4097}, ts=ts)),
         0, ["string_too_long"]),
        ("bad_job_hostlist_bomb", _dump(_job(nodes="gpu[0-20000]x[0-20000]")), 0, ["bad_job"]),
        ("bad_job_many_brackets", _dump(_job(nodes="g" + "[1-2]" * 40)), 0, ["bad_job"]),
        ("bad_job_no_id", _dump(_job(job_id=...)), 0, ["bad_job"]),
        ("bad_job_backwards", _dump(_job(nodes="gpu[9-1]")), 0, ["bad_job"]),
        ("bad_job_arabic_digits", _dump(_job(nodes="gpu[\u0661-\u0663]")), 0, ["bad_job"]),
        ("bad_job_superscript", _dump(_job(nodes="gpu[\u00b2-\u00b3]")), 0, ["bad_job"]),
        ("bad_job_huge_time", _dump(_job(start_time="1" + "0" * 400)), 0, ["bad_job"]),
        ("non_finite_job_field", _dump(_job(start_time=10**400)), 0, ["non_finite_field"]),
        ("bad_job_in_batch", _dump({"metrics": [good, _job(nodes="gpu[")]}), 1, ["bad_job"]),
    ]
    return cases


def _once() -> list[tuple[str, str | bytes, int, list[str]]]:
    """The large cases, once each."""
    host = "corpus99"
    tiny = {"name": "p", "tags": {"host": "h"}, "fields": {"v": 1}, "timestamp": T0}  # 10,000 fit in a line
    pad = "x" * 1_000_000
    return [
        ("line_too_long", _dump(_rec(host, fields={"value": 1, "pad": pad})), 0, ["line_too_long"]),
        ("accepted_line_near_the_bound", _dump(_rec(host, fields={"value": 1, **{f"p{i}": "x" * 60_000
                                                                               for i in range(15)}})), 1, []),
        ("batch_too_large", _dump({"metrics": [tiny] * 10_001}), 0, ["batch_too_large"]),
        ("accepted_batch_at_the_bound", _dump({"metrics": [tiny] * 10_000}), 10_000, []),
        ("string_too_long_field", _dump(_rec(host, fields={"value": "v" * 65_537})), 0, ["string_too_long"]),
    ]


def cases() -> list[tuple[str, str | bytes, int, list[str]]]:
    out = []
    for r in range(1, ROUNDS + 1):
        out.extend(_round(r))
    out.extend(_once())
    return out


def write_corpus(folder: Path) -> tuple[Path, Path]:
    """hostile.jsonl and expected.jsonl in `folder`; the same bytes every time."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    hostile, expected = folder / HOSTILE, folder / EXPECTED
    with open(hostile, "wb") as h, open(expected, "w", encoding="utf-8") as e:
        for n, (kind, text, accepted, reasons) in enumerate(cases(), start=1):
            raw = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
            assert b"\n" not in raw, kind
            h.write(raw + b"\n")
            e.write(_dump({"line": n, "kind": kind, "accepted": accepted, "rejected": sorted(reasons)}) + "\n")
    return hostile, expected


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_corpus.py OUT_DIR")
    for path in write_corpus(Path(sys.argv[1])):
        print(path, path.stat().st_size, "bytes")
