"""The replay adapter: files, rejects, pacing, and the end summary."""
import gzip
import json

from cli.main import main
from engine.replay import Pacer, open_lines

T0 = 1764400000


def _rec(t, host="leaf01", **fields):
    return json.dumps({"name": "switch_port", "tags": {"host": host, "interface": "swp1"},
                       "fields": fields or {"if_in_octets": t}, "timestamp": T0 + t})


def test_gzip_is_recognised_by_content_not_name(tmp_path):
    plain, packed = tmp_path / "a.jsonl", tmp_path / "b.data"
    plain.write_text(_rec(1) + "\n\n" + _rec(2) + "\n")
    with gzip.open(packed, "wt") as fh:
        fh.write(_rec(1) + "\n" + _rec(2) + "\n")
    assert len(list(open_lines(plain))) == 2  # blank lines skipped
    assert list(open_lines(packed)) == [line.encode() for line in (_rec(1) + "\n", _rec(2) + "\n")]


def test_pacer_sleeps_event_time_over_speed():
    now = [100.0]
    slept = []
    pacer = Pacer(speed=10.0, clock=lambda: now[0], sleep=slept.append)
    pacer.wait_for(T0)  # origin
    pacer.wait_for(T0 + 20)  # 20 s of event time at 10x = 2 s of wall time
    assert slept == [2.0]
    now[0] = 103.0  # already late: no sleep
    pacer.wait_for(T0 + 25)
    assert slept == [2.0]


def test_pacer_without_speed_never_sleeps():
    slept = []
    pacer = Pacer(speed=None, sleep=slept.append)
    for t in range(100):
        pacer.wait_for(T0 + t)
    assert slept == []


def test_replay_writes_rejects_and_summary(tmp_path, capsys):
    topo = tmp_path / "t.dot"
    topo.write_text('graph "f" {\n "leaf01" [function="leaf"]\n "gpu001" [function="host"]\n'
                    ' "leaf01":"swp1" -- "gpu001":"eth0"\n}\n')
    tel = tmp_path / "tel.jsonl"
    lines = [_rec(t) for t in range(10)] + [
        "{not json",
        json.dumps({"name": "switch_port", "tags": {}, "fields": {"a": 1}, "timestamp": T0}),
        json.dumps({"name": "switch_port", "tags": {"host": "x"}, "fields": {"a": 1}, "timestamp": 12}),
        json.dumps({"name": "gpu_temp", "tags": {"host": "gpu001"}, "fields": {"c": 50}, "timestamp": T0 + 10}),
        _rec(5),  # a duplicate
    ]
    tel.write_text("\n".join(lines) + "\n")
    rejects = tmp_path / "rej.jsonl"
    code = main(["replay", str(tel), "--topology", str(topo), "--db", str(tmp_path / "x.db"),
                 "--rejects", str(rejects), "--json", "--quiet"])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["rejects"] == {"bad_json": 1, "missing_host": 1, "bad_timestamp": 1}
    assert summary["duplicates"] == 1
    assert summary["ignored_measurements"] == {"gpu_temp": 1}
    written = [json.loads(x) for x in rejects.read_text().splitlines()]
    assert sorted(r["reason"] for r in written) == ["bad_json", "bad_timestamp", "missing_host"]
    assert all(r["source"].startswith(str(tel)) and r["raw"] for r in written)


def test_missing_telemetry_file_is_a_clear_error(tmp_path, capsys):
    topo = tmp_path / "t.dot"
    topo.write_text('graph "f" {\n "leaf01" [function="leaf"]\n}\n')
    assert main(["replay", str(tmp_path / "nope.jsonl"), "--topology", str(topo), "--db", str(tmp_path / "x.db")]) == 2
    assert "nope.jsonl: no such telemetry file" in capsys.readouterr().err
