"""The hard scenario suite (sim/suite.py) and the scenarios it adds: gray failures,
concurrent faults, the one-hour clean run. Table checks read the SUITE table; the
generated ones use short durations and small fabrics, so the file runs in seconds."""
from __future__ import annotations

import json
import statistics
from dataclasses import replace
from pathlib import Path

import pytest

import sim
from cli.main import main
from sim import ALL_SCENARIOS, GRAY_SCENARIOS, SUITE, FabricSpec, simulate
from sim.scenarios import TABLE, make_plan
from sim.suite import build, select
from test_sim import by_series, rates, seconds

# Contract section 5.
CAUSES = ("link_flap", "link_degraded", "pfc_storm", "congestion", "microburst", "nic_degraded",
          "storage_slow", "device_down", "noisy_neighbor")
FILES = ("topology.dot", "jobs.jsonl", "telemetry.jsonl.gz", "truth.json")


def causes_of(entry) -> tuple[str, ...]:
    return TABLE[entry.scenario].causes


# --- the table ---------------------------------------------------------------------------
def test_entry_names_are_unique_folder_names_and_settings_valid():
    names = [e.name for e in SUITE]
    assert len(names) == len(set(names))
    for e in SUITE:
        assert "/" not in e.name and ":" not in e.name and not e.name.startswith(".")
        assert e.scenario in ALL_SCENARIOS and e.intensity in sim.INTENSITIES


def test_every_entry_plans_with_its_target():
    """Targets resolve on the entry's fabric and the faults are the scenario's causes."""
    for e in SUITE:
        plan = make_plan(e.scenario, seed=1 + e.seed, fabric=e.fabric, duration=e.duration,
                         intensity=e.intensity, target=e.target)
        assert tuple(f.cause for f in plan.faults) == causes_of(e), e.name
        assert plan.duration == (e.duration or TABLE[e.scenario].duration)


@pytest.mark.parametrize("cause", CAUSES)
def test_every_cause_at_three_placements_and_intensities_with_a_weak_one(cause):
    entries = [e for e in SUITE if causes_of(e) == (cause,)]
    placements = {e.placement for e in entries}
    intensities = {e.intensity for e in entries}
    assert len(placements) >= 3, cause
    assert len({(e.placement, e.intensity) for e in entries}) >= 3, cause
    assert {"strong", "medium", "weak"} <= intensities, cause


def test_gray_failures_of_the_four_kinds():
    assert set(GRAY_SCENARIOS) == {"fec_creep", "pcie_stall", "storage_drift", "pfc_storm_low"}
    assert {TABLE[g].causes for g in GRAY_SCENARIOS} == {
        ("link_degraded",), ("nic_degraded",), ("storage_slow",), ("pfc_storm",)}
    for g in GRAY_SCENARIOS:
        assert {e.intensity for e in SUITE if e.scenario == g} >= {"strong", "weak"}, g


def test_concurrent_clean_and_large_entries():
    by_scenario = {}
    for e in SUITE:
        by_scenario.setdefault(e.scenario, []).append(e)
    assert len(TABLE["concurrent2"].causes) == 2 and len(set(TABLE["concurrent2"].causes)) == 2
    assert len(TABLE["concurrent3"].causes) == 3 and len(set(TABLE["concurrent3"].causes)) == 3
    assert by_scenario["concurrent2"] and by_scenario["concurrent3"]
    (hour,) = by_scenario["clean_1h"]
    assert (hour.duration or TABLE["clean_1h"].duration) == 3600.0
    assert any((e.duration or TABLE["clean"].duration) == 900.0 for e in by_scenario["clean"])
    big = [e for e in SUITE if e.hosts >= 512]
    assert big and all(causes_of(e) for e in big)


def test_select_globs_entry_names():
    assert [e.name for e in select("clean*")] == ["clean", "clean-m64", "clean_1h"]
    with pytest.raises(ValueError, match="no suite entry"):
        select("nothing-*")


# --- budget: records per entry and in total, from a few seconds of each fabric ---------------
def test_record_budget(tmp_path):
    per_s: dict[FabricSpec, float] = {}
    for e in SUITE:
        if e.fabric not in per_s:
            truth = simulate(out=tmp_path / str(len(per_s)), scenario="clean", fabric=e.fabric,
                             duration=3)
            per_s[e.fabric] = truth["records"] / 3 * 1.01  # messy: duplicates, about 0.2 %
    est = {e.name: per_s[e.fabric] * (e.duration or TABLE[e.scenario].duration) for e in SUITE}
    assert max(v for k, v in est.items() if "h512" in k) <= 1.5e6
    assert sum(est.values()) <= 10e6  # replay at 20,000 records/s in about 8 minutes


# --- generated -----------------------------------------------------------------------------
def test_gray_truth_says_gradual_and_gray(tmp_path):
    for name in ("fec_creep", "pcie_stall", "storage_drift"):
        (f,) = simulate(out=tmp_path / name, scenario=name, duration=60)["faults"]
        assert f["onset"] == "gradual" and f["gray"] is True, name
        assert 0 < f["detail"]["ramp_s"] < f["end"] - f["start"]
    (f,) = simulate(out=tmp_path / "low", scenario="pfc_storm_low", duration=60)["faults"]
    assert f["cause"] == "pfc_storm" and f["onset"] == "abrupt" and f["gray"] is True
    (f,) = simulate(out=tmp_path / "loud", scenario="pfc_storm", duration=60)["faults"]
    assert f["onset"] == "abrupt" and f["gray"] is False


def _thirds(values: list[tuple[float, float]], lo: float, hi: float) -> tuple[float, float]:
    """Mean of the first and the last third of (time, value) within (lo, hi]."""
    third = (hi - lo) / 3
    first = [v for t, v in values if lo < t <= lo + third]
    last = [v for t, v in values if hi - third < t <= hi]
    return statistics.mean(first), statistics.mean(last)


def test_fec_creep_rises_slowly_on_both_ends_and_stays_low(tmp_path):
    truth = simulate(out=tmp_path, scenario="fec_creep", duration=160, seed=4)
    (f,) = truth["faults"]
    ramp_end = f["start"] + f["detail"]["ramp_s"]
    groups = by_series(tmp_path / "telemetry.jsonl.gz")
    ends = f["entity"]["id"].split("--")
    for key, recs in groups.items():
        if key[0] != "switch_port":
            continue
        tags = dict(key[1:])
        fec = rates(recs, "if_in_fec_correctable_frames")
        if f"{tags['host']}:{tags['interface']}" in ends:
            first, last = _thirds(fec, f["start"], ramp_end)
            assert last > 3 * first and last > 100, (key, first, last)
            assert max(r for _, r in fec) < 1000  # a creep, not the 50,000/s of a bad optic
        else:
            assert max(r for _, r in fec) < 30, key
    nic = [rates(recs, "rx_bytes") for key, recs in groups.items() if key[0] == "nic_port"]
    assert nic  # throughput untouched: no NIC loses a tenth of its rate
    for rs in nic:
        before = [r for t, r in rs if t < f["start"]]
        during = [r for t, r in rs if ramp_end < t < f["end"]]
        if before and during and statistics.mean(before) > 0:
            assert statistics.mean(during) > 0.9 * statistics.mean(before)


def test_pcie_stall_rises_without_drops(tmp_path):
    truth = simulate(out=tmp_path, scenario="pcie_stall", duration=160, seed=4)
    (f,) = truth["faults"]
    host = f["entity"]["id"].split(":")[0]
    ramp_end = f["start"] + f["detail"]["ramp_s"]
    for key, recs in by_series(tmp_path / "telemetry.jsonl.gz").items():
        if key[0] != "nic_port":
            continue
        stall = [(seconds(m["timestamp"]), max(m["fields"]["outbound_pci_stalled_rd"],
                                               m["fields"]["outbound_pci_stalled_wr"]))
                 for m in recs]
        assert max(r for _, r in rates(recs, "rx_out_of_buffer")) == 0
        assert max(r for _, r in rates(recs, "rx_discards_phy")) == 0
        if dict(key[1:])["host"] == host:
            first, last = _thirds(stall, f["start"], ramp_end)
            assert last > first + 1.0 and last > 2.5, (first, last)
        else:
            assert max(v for _, v in stall) <= 2.0


def test_storage_drift_latency_rises_gradually(tmp_path):
    truth = simulate(out=tmp_path, scenario="storage_drift", duration=200, seed=4)
    (f,) = truth["faults"]
    recs = by_series(tmp_path / "telemetry.jsonl.gz")[
        ("storage", ("host", f["entity"]["id"]), ("kind", "nvmf"), ("name", "nvme0"))]
    lat = [(seconds(b["timestamp"]),
            (b["fields"]["read_time"] - a["fields"]["read_time"])
            / (b["fields"]["reads"] - a["fields"]["reads"])) for a, b in zip(recs, recs[1:])]
    ramp_end = f["start"] + f["detail"]["ramp_s"]
    first, last = _thirds(lat, f["start"], ramp_end)
    before = statistics.mean(v for t, v in lat if t < f["start"])
    plateau = statistics.mean(v for t, v in lat if ramp_end < t < f["end"])
    assert last > first * 1.3 and 2.2 * before < plateau < 4 * before, (before, first, last)


def test_pfc_storm_low_pauses_from_one_nic_at_a_low_rate(tmp_path):
    truth = simulate(out=tmp_path, scenario="pfc_storm_low", duration=80, seed=4)
    (f,) = truth["faults"]
    origin = f["entity"]["id"].split(":")[0]
    senders, receivers = {}, set()
    for key, recs in by_series(tmp_path / "telemetry.jsonl.gz").items():
        if key[0] == "nic_port":
            host = dict(key[1:])["host"]
            tx = [r for t, r in rates(recs, "tx_prio3_pause") if f["start"] + 2 < t < f["end"]]
            if tx and statistics.mean(tx) > 5:
                senders[host] = statistics.mean(tx)
            if any(r > 2 for _, r in rates(recs, "rx_prio3_pause")):
                receivers.add(host)
        if key[0] == "switch_queue":
            assert all(m["fields"]["pfcwd_status"] == "operational" for m in recs)
    assert list(senders) == [origin] and 10 < senders[origin] < 60
    assert receivers and origin not in receivers


@pytest.mark.parametrize("name,count", [("concurrent2", 2), ("concurrent3", 3)])
def test_concurrent_faults_are_independent_distant_and_overlap(tmp_path, name, count):
    truth = simulate(out=tmp_path, scenario=name, duration=200, seed=5)
    faults = truth["faults"]
    assert len(faults) == count and len({f["cause"] for f in faults}) == count
    assert len({f["entity"]["id"] for f in faults}) == count
    assert max(f["start"] for f in faults) < min(f["end"] for f in faults)  # all overlap
    leaves = [_leaf_of(tmp_path, f["entity"]["id"]) for f in faults]
    assert len(set(leaves)) == count, leaves  # far apart: each on a leaf of its own
    for f in faults:
        assert f["affected_jobs"] and f["onset"] == "abrupt" and not f["gray"]


def _leaf_of(folder: Path, ident: str) -> str:
    """The leaf an entity sits on: a leaf named in it, else the leaf of its host."""
    names = [part.split(":")[0] for part in ident.split("--")]
    leaf = [n for n in names if n.startswith("leaf")]
    if leaf:
        return leaf[0]
    for line in (folder / "topology.dot").read_text().splitlines():
        if f'"{names[0]}":"eth0"' in line:
            return line.split('"')[1]
    raise AssertionError(ident)


def test_clean_1h_is_an_hour_of_messy_benign_telemetry(tmp_path):
    plan = make_plan("clean_1h")
    assert plan.duration == 3600.0 and plan.messy and not plan.faults
    assert len({p for _, p in plan.resets}) >= 5 and len({t for t, _ in plan.resets}) >= 4
    truth = simulate(out=tmp_path, scenario="clean_1h", duration=120, seed=2)
    assert truth["clean"] and truth["faults"] == [] and truth["base_scenario"] == "clean_1h"
    assert truth["late_records"] > 0 and truth["duplicate_records"] > 0
    assert len(truth["counter_resets"]) >= 5
    assert {b["kind"] for b in truth["benign"]} == {"collective_burst", "checkpoint"}
    recs = [json.loads(x) for x in (tmp_path / "jobs.jsonl").read_text().splitlines()]
    done = [r for r in recs if r["fields"]["job_state"] == "COMPLETED"]
    assert len(done) == 3 and len(recs) == 3 + len(truth["jobs"])
    # benign: nothing marks, drops or pauses
    for key, rs in by_series(tmp_path / "telemetry.jsonl.gz").items():
        if key[0] == "switch_port":
            for field in ("ecn_marked_packets", "if_out_discards", "pfc_3_tx_pkts"):
                assert max((r for _, r in rates(rs, field)), default=0) <= 0, (key, field)


def test_medium_lies_between_strong_and_weak(tmp_path):
    means = {}
    for level in ("strong", "medium", "weak"):
        truth = simulate(out=tmp_path / level, scenario="nic_degraded", duration=60,
                         intensity=level, seed=3)
        (f,) = truth["faults"]
        assert f["intensity"] == level
        host = f["entity"]["id"].split(":")[0]
        recs = [rs for key, rs in by_series(tmp_path / level / "telemetry.jsonl.gz").items()
                if key[0] == "nic_port" and dict(key[1:])["host"] == host][0]
        means[level] = statistics.mean(r for t, r in rates(recs, "rx_out_of_buffer")
                                       if f["start"] + 1 < t <= f["end"])
    assert means["strong"] > means["medium"] > means["weak"] > 0


def test_suite_entry_is_reproducible_and_the_classic_entry_is_the_plain_scenario(tmp_path):
    entry = replace(next(e for e in SUITE if e.name == "fec_creep-medium-leaf04-swp51"),
                    duration=40)
    a, b = build(entry, out=tmp_path / "a", seed=3), build(entry, out=tmp_path / "b", seed=3)
    assert a == b and a["scenario"] == entry.name and a["base_scenario"] == "fec_creep"
    assert a["target"] == entry.target and a["intensity"] == "medium"
    for n in FILES:
        assert (tmp_path / "a" / n).read_bytes() == (tmp_path / "b" / n).read_bytes(), n
    classic = replace(next(e for e in SUITE if e.name == "pfc_storm"), duration=40)
    build(classic, out=tmp_path / "c", seed=1)
    simulate(out=tmp_path / "d", scenario="pfc_storm", seed=1, duration=40)
    for n in FILES:
        assert (tmp_path / "c" / n).read_bytes() == (tmp_path / "d" / n).read_bytes(), n


def test_cli_suite_only_and_scenario_flags(tmp_path, capsys):
    assert main(["simulate", "--suite", str(tmp_path / "s"), "--only", "pfc_storm-weak"]) == 0
    out = capsys.readouterr().out
    assert "pfc_storm-weak " in out and "records" in out and "26,400" in out
    truth = json.loads((tmp_path / "s" / "pfc_storm-weak" / "truth.json").read_text())
    assert truth["scenario"] == "pfc_storm-weak" and truth["intensity"] == "weak"
    assert main(["simulate", "--scenario", "storage_drift", "--out", str(tmp_path / "one"),
                 "--duration", "30", "--intensity", "medium", "--target", "stor01",
                 "--fabric", "2x3x2x1"]) == 0
    truth = json.loads((tmp_path / "one" / "truth.json").read_text())
    assert truth["faults"][0]["entity"]["id"] == "stor01" and truth["hosts"] == 7
    assert truth["fabric"]["leaves"] == 3 and truth["faults"][0]["intensity"] == "medium"
    # the form scripts/accuracy uses: --suite --out DIR
    assert main(["simulate", "--suite", "--out", str(tmp_path / "t"), "--only", "link_flap-weak"]) == 0
    assert (tmp_path / "t" / "link_flap-weak" / "truth.json").exists()
    assert main(["simulate", "--scenario", "concurrent2", "--target", "gpu001",
                 "--out", str(tmp_path / "bad")]) == 2
