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


# ------------------------------------------------------------ broken files, hostile input

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from engine.replay import FileBroken, numbered_lines

REPO = Path(__file__).resolve().parent.parent


def _probe_lines(n: int) -> bytes:
    """Records replay reads and no incident can come of (an unknown measurement)."""
    return b"".join(json.dumps({"name": "corpus_probe", "tags": {"host": "probe01"}, "fields": {"v": i},
                                "timestamp": T0}).encode() + b"\n" for i in range(n))


def _broken_files(folder: Path) -> dict[str, Path]:
    packed = gzip.compress(_probe_lines(40000))  # (about 4 MB of text: several of the replay's reads)
    bad_crc = bytearray(packed)
    bad_crc[-6] ^= 0xFF  # the trailer's CRC
    # a good member, then one whose deflate data opens with a block of the reserved type
    corrupt = gzip.compress(_probe_lines(20000)) + packed[:10] + b"\xff" * 64
    files = {"empty.gz": b"", "bad-crc.gz": bytes(bad_crc), "truncated.gz": packed[: len(packed) // 2],
             "header-only.gz": packed[:10], "not-gzip.gz": b"PK\x03\x04 a zip, say\n",
             "corrupt.gz": corrupt}
    out = {}
    for name, data in files.items():
        out[name] = folder / name
        out[name].write_bytes(data)
    return out


def test_a_broken_file_yields_its_good_lines_then_says_how_far_it_got(tmp_path):
    files = _broken_files(tmp_path)
    assert list(numbered_lines(files["empty.gz"])) == []  # empty is empty, whatever its name
    used = {}
    for name, want_error in [("bad-crc.gz", "CRC"), ("truncated.gz", "ended before"),
                             ("header-only.gz", "ended before"), ("not-gzip.gz", "not gzip"),
                             ("corrupt.gz", "invalid block type")]:
        got = []
        with pytest.raises(FileBroken) as err:
            for n, line in numbered_lines(files[name]):
                got.append(n)
        f = err.value.failure
        assert f.path == files[name] and want_error in f.error and f.lines == len(got), (name, f)
        assert got == list(range(1, len(got) + 1))
        used[name] = len(got)
    # every line inflated before the break was used: ISA-L, which inflates the replay's
    # gzip, loses the text of the read that meets a break, and the standard module reads
    # past what it handed on (the break's words are the standard module's)
    assert used["bad-crc.gz"] == 40000 and used["corrupt.gz"] == 20000
    assert 19000 < used["truncated.gz"] < 20000


def test_reject_line_numbers_count_blank_lines(tmp_path):
    topo = tmp_path / "t.dot"
    topo.write_text('graph "f" {\n "leaf01" [function="leaf"]\n}\n')
    tel = tmp_path / "tel.jsonl"
    job = {"name": "job_placement", "tags": {}, "fields": {"job_id": "1", "nodes": "gpu[0-20000]x[0-20000]"},
           "timestamp": T0}
    tel.write_text("\n".join([_rec(1), "", "   ", "{bad", _rec(2), "", json.dumps(job), _rec(3)]) + "\n")
    rejects = tmp_path / "rej.jsonl"
    assert main(["replay", str(tel), "--topology", str(topo), "--db", str(tmp_path / "x.db"),
                 "--rejects", str(rejects), "--quiet"]) == 0
    written = [json.loads(x) for x in rejects.read_text().splitlines()]
    assert [(r["source"], r["reason"]) for r in written] == [(f"{tel}:4", "bad_json"), (f"{tel}:7", "bad_job")]


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "cli.main", *args], env=env, capture_output=True, text=True,
                          timeout=600, cwd=REPO)


def _incidents(db: Path) -> list[dict]:
    done = _cli("incidents", "--db", str(db), "--format", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _replay_cli(folder: Path, files: list[Path], db: Path, rejects: Path) -> subprocess.CompletedProcess:
    return _cli("replay", *map(str, files), "--topology", str(folder / "topology.dot"), "--jobs",
                str(folder / "jobs.jsonl"), "--db", str(db), "--rejects", str(rejects), "--quiet")


@pytest.mark.slow
def test_broken_files_fail_alone_and_the_good_files_incidents_are_stored(scenario_dir, tmp_path):
    folder = scenario_dir("pfc_storm")
    good = folder / "telemetry.jsonl.gz"
    clean = _replay_cli(folder, [good], tmp_path / "clean.db", tmp_path / "r0.jsonl")
    assert clean.returncode == 0, clean.stderr
    want = _incidents(tmp_path / "clean.db")
    assert want, "the scenario opens an incident"
    broken = _broken_files(tmp_path)
    files = [broken["empty.gz"], broken["bad-crc.gz"], broken["truncated.gz"], broken["not-gzip.gz"], good]
    done = _replay_cli(folder, files, tmp_path / "mixed.db", tmp_path / "r1.jsonl")
    assert done.returncode == 1, done.stderr
    summary = [x for x in done.stderr.splitlines() if "file(s) failed" in x]
    assert len(summary) == 1 and "3 of 5 file(s) failed" in summary[0]
    for name, why in [("bad-crc.gz", "CRC check failed"), ("truncated.gz", "ended before"), ("not-gzip.gz", "not gzip")]:
        assert f"{broken[name]}: " in summary[0] and why in summary[0]
    assert "empty.gz:" not in summary[0]
    assert _incidents(tmp_path / "mixed.db") == want


@pytest.mark.slow
def test_the_hostile_corpus_mixed_into_telemetry_gets_its_outcomes_and_changes_no_incident(scenario_dir, tmp_path):
    from test_normalize import load_corpus

    folder = scenario_dir("pfc_storm")
    good = folder / "telemetry.jsonl.gz"
    clean = _replay_cli(folder, [good], tmp_path / "clean.db", tmp_path / "r0.jsonl")
    assert clean.returncode == 0, clean.stderr
    _, expected, hostile = load_corpus(tmp_path / "corpus")
    rejects = tmp_path / "r1.jsonl"
    done = _replay_cli(folder, [hostile, good], tmp_path / "mixed.db", rejects)
    assert done.returncode == 0, done.stderr
    got: dict[int, list[str]] = {}
    for rec in map(json.loads, rejects.read_text().splitlines()):
        source, _, n = rec["source"].rpartition(":")
        if source == str(hostile):
            got.setdefault(int(n), []).append(rec["reason"])
        assert len(rec["detail"]) <= 200
    for want in expected:
        assert sorted(got.get(want["line"], [])) == want["rejected"], want["kind"]
    clean_rejects = Counter(json.loads(x)["reason"] for x in (tmp_path / "r0.jsonl").read_text().splitlines()) \
        if (tmp_path / "r0.jsonl").exists() else Counter()
    assert sum(len(v) for v in got.values()) == sum(len(e["rejected"]) for e in expected)
    assert clean_rejects == Counter()  # the scenario itself is clean
    assert _incidents(tmp_path / "mixed.db") == _incidents(tmp_path / "clean.db")
