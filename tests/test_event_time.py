"""Event time that one record cannot hijack (contract section 1), on whole replays: a
record dated 2030, a device whose clock runs 2 h ahead, a fabric whose clocks all jump.

Each variant rewrites one generated scenario's telemetry and replays it; the clean
replay of the same scenario is the reference."""
import gzip
import json
import shutil

import pytest

from evaluation.scenarios import replay_scenario
from engine.replay import open_lines
from testkit.store import incident_causes as _summary

pytestmark = pytest.mark.slow

FUTURE = 1_900_000_000  # 2030-03-17: a clock that jumped years ahead


def _variant(folder, out, edit):
    """A copy of the scenario whose telemetry lines went through edit(n, line) -> lines."""
    out.mkdir()
    for name in ("topology.dot", "jobs.jsonl", "truth.json"):
        shutil.copy(folder / name, out / name)
    with gzip.open(out / "telemetry.jsonl.gz", "wt") as fh:
        for n, line in enumerate(open_lines(folder / "telemetry.jsonl.gz"), 1):
            for x in edit(n, line.decode()):
                fh.write(x.rstrip("\n") + "\n")
    return out


def _shift(line: str, seconds: float, when=lambda m: True) -> str:
    """The line with the timestamps of its metrics that `when` picks moved by `seconds`."""
    doc = json.loads(line)
    for m in doc.get("metrics", [doc]):
        if when(m):
            ts = m["timestamp"]
            scale = 1e9 if ts > 1e17 else 1e6 if ts > 1e14 else 1e3 if ts > 1e11 else 1
            m["timestamp"] = int(ts + seconds * scale) if isinstance(ts, int) else ts + seconds * scale
    return json.dumps(doc)


@pytest.fixture(scope="module")
def clean(scenario_dir, replay_once):
    folder = scenario_dir("pfc_storm")
    _, incidents, stats = replay_once(folder)
    assert incidents and not stats.rejects
    return folder, incidents


BAD = json.dumps({"name": "switch_port", "tags": {"host": "rogue99", "interface": "swp1"},
                  "fields": {"if_in_octets": 1}, "timestamp": FUTURE})


def test_one_record_from_2030_changes_nothing(clean, tmp_path):
    folder, expected = clean
    bad = _variant(folder, tmp_path / "v", lambda n, line: [line, BAD] if n == 1001 else [line])
    _, incidents, stats = replay_scenario(bad)
    assert _summary(incidents) == _summary(expected)
    assert dict(stats.rejects) == {"future_timestamp": 1}
    assert stats.summary()["clock_suspect_devices"]["rogue99"]["future_timestamps"] == 1


def test_the_first_record_from_2030_does_not_set_the_time(clean, tmp_path):
    folder, expected = clean
    first = json.loads(next(iter(open_lines(folder / "telemetry.jsonl.gz"))))
    first = first.get("metrics", [first])[0]
    known = json.dumps(first | {"timestamp": FUTURE})  # a host the fabric has, its clock gone wrong once
    bad = _variant(folder, tmp_path / "v", lambda n, line: [known, line] if n == 1 else [line])
    _, incidents, stats = replay_scenario(bad)
    assert _summary(incidents) == _summary(expected)
    assert dict(stats.rejects) == {"future_timestamp": 1}


def test_a_device_two_hours_ahead_is_quarantined_and_reported(clean, tmp_path):
    folder, expected = clean
    truth = json.loads((folder / "truth.json").read_text())
    hosts = sorted({json.loads(x).get("tags", {}).get("host") for x in list(open_lines(folder / "telemetry.jsonl.gz"))[:3000]
                    if not x.startswith(b'{"metrics"')} - {None})
    victim = next(h for h in hosts if h.startswith("stor")) if any(h.startswith("stor") for h in hosts) else hosts[-1]
    ahead = _variant(folder, tmp_path / "v", lambda n, line: [_shift(line, 7200, lambda m: m["tags"].get("host") == victim)])
    _, incidents, stats = replay_scenario(ahead)
    report = stats.summary()["clock_suspect_devices"]
    assert list(report) == [victim]
    assert report[victim]["ahead_s"] > 7000
    assert set(stats.rejects) == {"future_timestamp"}  # nothing of the others rejected (no too_late)
    assert stats.rejects["future_timestamp"] == report[victim]["future_timestamps"] > 100
    causes = {(r["cause"], r["entity"]["id"]) for i in incidents for r in i["root_causes"][:1]}
    for fault in truth["faults"]:
        assert (fault["cause"], fault["entity"]["id"]) in causes, (truth["faults"], causes)


def test_a_fabric_whose_clocks_all_jump_still_advances(clean, tmp_path):
    folder, _ = clean
    n_lines = sum(1 for _ in open_lines(folder / "telemetry.jsonl.gz"))
    jump_at = n_lines // 2
    jumped = _variant(folder, tmp_path / "v", lambda n, line: [_shift(line, 3600) if n > jump_at else line])
    _, _, stats = replay_scenario(jumped)
    last = max(json.loads(x).get("timestamp", 0) for x in list(open_lines(folder / "telemetry.jsonl.gz"))[-200:]
               if not x.startswith(b'{"metrics"'))
    last = last / 1e9 if last > 1e17 else last / 1e3 if last > 1e11 else last
    assert stats.watermark > last + 3600 - 10  # event time followed the fabric
    lost = sum(stats.rejects.values())
    assert lost < stats.records * 0.01, dict(stats.rejects)  # a few records at the jump, not half the run
