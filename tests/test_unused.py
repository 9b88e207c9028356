"""Nothing is lost quietly (issue 13, point 3): what was read and not used is counted by
reason, each with an example, in the replay summary (`--json` and the printed lines, on
one process and on shards alike) and in the worker's /metrics."""
from __future__ import annotations

import json

import pytest

from cli.main import main
from compose import EngineSettings, build_engine, new_detect_stage
from engine.topology import load_topology
from streams.health import _detect_figures
from streams.metrics import WorkerMetrics, render
from testkit.metrics import samples

T0 = 1764400000
TOPOLOGY = ('graph "f" {\n "leaf01" [function="leaf"]\n "gpu001" [function="host"]\n'
            ' "leaf01":"swp1" -- "gpu001":"eth0"\n}\n')
EXPECTED = {
    "unknown_measurement": {"count": 20, "example": "weird"},
    "unknown_field": {"count": 20, "example": "switch_port.bogus"},
    "non_numeric_field": {"count": 20, "example": "switch_port.if_out_octets"},
    "unknown_device": {"count": 20, "example": "ghost"},
    "unknown_interface": {"count": 20, "example": "leaf01:swp7"},
}


def _lines() -> list[str]:
    out = []
    for t in range(20):
        def rec(name, tags, fields):
            return json.dumps({"name": name, "tags": tags, "fields": fields, "timestamp": T0 + t})
        out += [rec("switch_port", {"host": "leaf01", "interface": "swp1"},
                    {"if_in_errors": t, "bogus": 1, "if_out_octets": "abc"}),
                rec("switch_port", {"host": "ghost", "interface": "swp9"}, {"if_in_errors": t}),
                rec("switch_port", {"host": "leaf01", "interface": "swp7"}, {"if_in_errors": t}),
                rec("weird", {"host": "leaf01"}, {"x": t}),
                # CRC errors on a NIC record without its interface tag: nic_rx_errors hits, its
                # entity "{host}:{interface}" has no interface to name
                rec("nic_port", {"host": "gpu001"}, {"rx_crc_errors_phy": 1000 * t})]
    return out


@pytest.fixture
def files(tmp_path):
    (tmp_path / "t.dot").write_text(TOPOLOGY)
    (tmp_path / "tel.jsonl").write_text("\n".join(_lines()) + "\n")
    return tmp_path


@pytest.mark.parametrize("shards", ["1", "2"])
def test_the_replay_summary_counts_what_it_did_not_use_by_reason_with_an_example(files, capsys, shards):
    code = main(["replay", str(files / "tel.jsonl"), "--topology", str(files / "t.dot"), "--db",
                 f"sqlite:///{files / 'x.db'}", "--json", "--quiet", "--shards", shards])
    assert code == 0
    unused = json.loads(capsys.readouterr().out)["unused"]
    hit = unused.pop("unresolved_hit")
    assert unused == EXPECTED
    assert hit["count"] >= 1 and hit["example"].startswith("rule nic_rx_errors ({host}:{interface}) on nic_port")


def test_the_printed_summary_names_each_reason_and_its_example(files, capsys):
    main(["replay", str(files / "tel.jsonl"), "--topology", str(files / "t.dot"), "--db",
          f"sqlite:///{files / 'x.db'}", "--quiet"])
    out = capsys.readouterr().out
    assert "not used (unknown device): 20, e.g. ghost" in out
    assert "not used (unknown interface): 20, e.g. leaf01:swp7" in out
    assert "not used (non numeric field): 20, e.g. switch_port.if_out_octets" in out


def test_the_workers_metrics_count_them_too(files):
    parts = build_engine(EngineSettings(), topology=load_topology(files / "t.dot"))
    stages = [new_detect_stage(parts, "fabric.telemetry:0")]
    for line in _lines():
        stages[0].feed(line)
    stages[0].finish()
    m = WorkerMetrics()
    _detect_figures(m, stages)
    s = samples(render(m))
    assert s['fabric_rca_unused_total{example="ghost",reason="unknown_device"}'] == 20
    assert s['fabric_rca_unused_total{example="leaf01:swp7",reason="unknown_interface"}'] == 20
    assert s['fabric_rca_unused_total{example="weird",reason="unknown_measurement"}'] == 20


def test_a_clean_fabric_has_nothing_unused(scenario_dir, capsys):
    folder = scenario_dir("pfc_storm")
    main(["replay", str(folder / "telemetry.jsonl.gz"), "--topology", str(folder / "topology.dot"), "--db",
          f"sqlite:///{folder / 'unused.db'}", "--json", "--quiet"])
    assert json.loads(capsys.readouterr().out)["unused"] == {}


def test_a_restored_stage_counts_the_series_it_restored(files):
    """The place of a series restored from a checkpoint is judged at its next record (the
    checkpoint keeps the field memo, not the place); counts start again at the restore, so
    the two stages' counts add up to the whole input's (held records go with the checkpoint)."""
    parts = build_engine(EngineSettings(), topology=load_topology(files / "t.dot"))
    lines = _lines()
    first = new_detect_stage(parts, "p0")
    for line in lines[:50]:
        first.feed(line)
    second = new_detect_stage(parts, "p0")
    second.restore(first.snapshot())
    for line in lines[50:]:
        second.feed(line)
    second.finish()
    before, after = first.stats.summary()["unused"], second.stats.summary()["unused"]
    for reason, example in (("unknown_device", "ghost"), ("unknown_interface", "leaf01:swp7")):
        assert after[reason]["example"] == example and after[reason]["count"] > 0
        assert before.get(reason, {"count": 0})["count"] + after[reason]["count"] == 20
