"""The scenario generator: deterministic, well-formed, physically plausible output whose
truth matches the contract. Expectations are worked out from the contract and the
scenario descriptions, not read back from the generator's internals."""
from __future__ import annotations

import functools
import gzip
import json
import re
from collections import defaultdict
from pathlib import Path

import pytest

from sim import ALL_SCENARIOS, GRAY_SCENARIOS, SCENARIOS, FabricSpec, simulate
from sim.jobs import hostlist
from sim.scenarios import TABLE

SHORT = 45.0  # seconds of event time per scenario in these tests
CLEAN = ("clean", "clean_1h")
GRADUAL = ("fec_creep", "pcie_stall", "storage_drift")
CAUSE_KIND = {
    "link_flap": "link", "link_degraded": "link", "pfc_storm": "interface",
    "congestion": "interface", "microburst": "interface", "nic_degraded": "interface",
    "storage_slow": "storage", "device_down": "switch", "noisy_neighbor": "job",
}
# Contract section 2: cumulative counter fields, per measurement.
PFC = [f"pfc_{p}_{k}" for p in range(8)
       for k in ("rx_pkts", "tx_pkts", "rx_pause_duration_us", "tx_pause_duration_us")]
COUNTERS = {
    "switch_port": {"if_in_octets", "if_out_octets", "if_in_ucast_pkts", "if_out_ucast_pkts",
                    "if_in_errors", "if_in_discards", "if_out_discards",
                    "if_in_fec_correctable_frames", "if_in_fec_not_correctable_frames",
                    "if_in_fec_symbol_errors", "wred_dropped_packets", "ecn_marked_packets",
                    "carrier_changes", *PFC},
    "switch_queue": {"packets", "bytes", "dropped_packets", "dropped_bytes",
                     "wred_ecn_marked_packets", "wred_dropped_packets",
                     "pfcwd_deadlock_detected", "pfcwd_deadlock_restored"},
    "nic_port": {"rx_bytes", "tx_bytes", "rx_packets", "tx_packets", "rx_prio3_pause",
                 "tx_prio3_pause", "rx_prio3_pause_duration", "tx_prio3_pause_duration",
                 "tx_pause_storm_warning_events", "tx_pause_storm_error_events",
                 "rx_discards_phy", "tx_discards_phy", "rx_out_of_buffer", "rx_crc_errors_phy",
                 "rx_symbol_err_phy", "rx_corrected_bits_phy", "rx_bits_phy",
                 "link_down_events_phy", "np_ecn_marked_roce_packets", "np_cnp_sent",
                 "rp_cnp_handled", "out_of_buffer", "out_of_sequence", "packet_seq_err",
                 "local_ack_timeout_err"},
    "storage": {"reads", "writes", "read_bytes", "write_bytes", "read_time", "write_time",
                "io_time"},
}


# --- helpers -------------------------------------------------------------------------------
def read_lines(path: Path) -> list[str]:
    with gzip.open(path, "rt") as fh:
        return fh.read().splitlines()


@functools.lru_cache(maxsize=32)
def metrics(path: Path) -> list[dict]:
    out = []
    for line in read_lines(path):
        obj = json.loads(line)
        out.extend(obj["metrics"] if "metrics" in obj else [obj])
    return out


def seconds(ts: int) -> float:
    for scale in (1e9, 1e6, 1e3):
        if ts > 1e10 * scale / 10:
            return ts / scale
    return float(ts)


def series_key(m: dict) -> tuple:
    return (m["name"], *sorted(m["tags"].items()))


def topology(path: Path) -> tuple[set[str], set[str], set[str]]:
    """Devices, interface ids and link ids of a DOT topology."""
    text = path.read_text()
    devices = set(re.findall(r'^\s*"([^"]+)" \[function="\w+"\]', text, re.M))
    ifaces, links = set(), set()
    for a, ai, b, bi in re.findall(r'"([^"]+)":"([^"]+)" -- "([^"]+)":"([^"]+)"', text):
        x, y = f"{a}:{ai}", f"{b}:{bi}"
        ifaces |= {x, y}
        links.add("--".join(sorted((x, y))))
    return devices, ifaces, links


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, tuple[Path, dict]]:
    base = tmp_path_factory.mktemp("sim")
    out = {}
    for name in ALL_SCENARIOS:
        duration = 150.0 if name in CLEAN else SHORT
        out[name] = (base / name, simulate(out=base / name, scenario=name, seed=3,
                                           duration=duration))
    return out


def by_series(path: Path) -> dict[tuple, list[dict]]:
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for m in metrics(path):
        groups[series_key(m)].append(m)
    for recs in groups.values():
        recs.sort(key=lambda m: m["timestamp"])
    return groups


def rates(recs: list[dict], field: str) -> list[tuple[float, float]]:
    """(time, per-second rate) between consecutive distinct samples."""
    out = []
    for a, b in zip(recs, recs[1:]):
        ta, tb = seconds(a["timestamp"]), seconds(b["timestamp"])
        if tb > ta:
            out.append((tb, (b["fields"][field] - a["fields"][field]) / (tb - ta)))
    return out


def during(truth: dict, t: float) -> bool:
    f = truth["faults"][0]
    return f["start"] + 1 < t <= f["end"]


# --- API -------------------------------------------------------------------------------------
def test_unknown_scenario_lists_the_valid_names(tmp_path):
    with pytest.raises(ValueError, match="link_flap"):
        simulate(out=tmp_path, scenario="nope")


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    names = ("topology.dot", "jobs.jsonl", "telemetry.jsonl.gz", "truth.json")
    for scenario in ("clean", "pfc_storm"):
        a = simulate(out=tmp_path / "a", scenario=scenario, seed=7, duration=40)
        b = simulate(out=tmp_path / "b", scenario=scenario, seed=7, duration=40)
        assert a == b
        for n in names:
            assert (tmp_path / "a" / n).read_bytes() == (tmp_path / "b" / n).read_bytes(), n
        simulate(out=tmp_path / "c", scenario=scenario, seed=8, duration=40)
        assert ((tmp_path / "a" / "telemetry.jsonl.gz").read_bytes()
                != (tmp_path / "c" / "telemetry.jsonl.gz").read_bytes())


def test_hostlist_is_compressed_slurm_syntax():
    assert hostlist(["gpu001", "gpu002", "gpu003", "gpu004", "gpu009"]) == "gpu[001-004,009]"
    assert hostlist(["gpu011"]) == "gpu011"
    assert hostlist(["gpu015", "gpu016"]) == "gpu[015-016]"


# --- every scenario ----------------------------------------------------------------------
@pytest.mark.parametrize("name", ALL_SCENARIOS)
def test_records_are_well_formed_telegraf_json(runs, name):
    out, truth = runs[name]
    for n in ("topology.dot", "jobs.jsonl", "telemetry.jsonl.gz", "truth.json"):
        assert (out / n).exists()
    lines = read_lines(out / "telemetry.jsonl.gz")
    for line in lines:  # compact, canonical JSON
        assert line == json.dumps(json.loads(line), separators=(",", ":"))
    ms = metrics(out / "telemetry.jsonl.gz")
    assert len(ms) == truth["records"]
    for m in ms:
        assert isinstance(m["name"], str) and m["tags"]["host"]
        assert isinstance(m["timestamp"], int)
        assert truth["start"] - 60 <= seconds(m["timestamp"]) <= truth["end"] + 5
    units = {m["name"]: len(str(m["timestamp"])) for m in ms}
    assert units["switch_port"] == 13 and units["nic_port"] == 19 and units["storage"] == 10
    for rec in map(json.loads, (out / "jobs.jsonl").read_text().splitlines()):
        assert rec["name"] == "job_placement"
        assert rec["tags"] == {"scheduler": "slurm", "cluster": "c1"}
        assert isinstance(rec["fields"]["job_id"], str)


@pytest.mark.parametrize("name", ALL_SCENARIOS)
def test_counters_never_decrease_except_listed_resets(runs, name):
    out, truth = runs[name]
    resets = {(r["interface"], round(r["at"])) for r in truth["counter_resets"]}
    for key, recs in by_series(out / "telemetry.jsonl.gz").items():
        counters = COUNTERS.get(key[0])
        if not counters:
            continue
        tags = dict(key[1:])
        for a, b in zip(recs, recs[1:]):
            for f in counters:
                if b["fields"][f] < a["fields"][f]:
                    iface = f"{tags['host']}:{tags.get('interface')}"
                    assert (iface, round(seconds(b["timestamp"]))) in resets, (key, f)


@pytest.mark.parametrize("name", [n for n in ALL_SCENARIOS if n not in CLEAN])
def test_truth_names_the_fault_with_ids_from_the_topology(runs, name):
    out, truth = runs[name]
    devices, ifaces, links = topology(out / "topology.dot")
    jobs = {json.loads(x)["fields"]["job_id"] for x in (out / "jobs.jsonl").read_text().split()}
    assert not truth["clean"] and truth["faults"]
    if name in SCENARIOS and name != "demo":
        assert [f["cause"] for f in truth["faults"]] == [name]
    assert [f["cause"] for f in truth["faults"]] == list(TABLE[name].causes)
    assert truth["scenario"] == truth["base_scenario"] == name
    for f in truth["faults"]:
        kind, ident = f["entity"]["kind"], f["entity"]["id"]
        assert kind == CAUSE_KIND[f["cause"]]
        assert {"link": links, "interface": ifaces, "switch": devices,
                "storage": devices, "job": jobs}[kind] >= {ident}
        assert truth["start"] < f["start"] < f["end"] <= truth["end"]
        assert f["intensity"] == "strong"
        assert f["onset"] == ("gradual" if name in GRADUAL else "abrupt")
        assert f["gray"] is (name in GRAY_SCENARIOS)
        assert f["affected_jobs"] == sorted(f["affected_jobs"]) and set(f["affected_jobs"]) <= jobs
        assert f["affected_jobs"]


def test_affected_jobs_follow_the_contract(runs):
    """Default placement: 4242 on leaf01+02 (all storage), 4243 on leaf03 + 2 hosts of
    leaf04 (stor01), 4244 on leaf04 (stor02, local), 4246 shares leaf01+02 in the
    noisy_neighbor placement. Worked out by hand from contract section 6."""
    expect = {"link_flap": ["4242"], "link_degraded": ["4242"], "pfc_storm": ["4242"],
              "congestion": ["4243"], "microburst": ["4242"], "nic_degraded": ["4243"],
              "storage_slow": ["4242", "4243"], "device_down": ["4242", "4243"],
              "noisy_neighbor": ["4242", "4243", "4246"]}
    for name, jobs in expect.items():
        truth = json.loads((runs[name][0] / "truth.json").read_text())
        assert truth["faults"][0]["affected_jobs"] == jobs, name


# --- clean -----------------------------------------------------------------------------------
def test_clean_has_no_fault_but_late_duplicate_and_batched_records(runs):
    out, truth = runs["clean"]
    assert truth["clean"] and truth["faults"] == []
    assert truth["late_records"] > 0 and truth["duplicate_records"] > 0
    lines = read_lines(out / "telemetry.jsonl.gz")
    assert any(line.startswith('{"metrics":[') for line in lines)
    assert len(lines) != len(set(lines))  # duplicates
    newest, late = 0.0, 0
    for m in metrics(out / "telemetry.jsonl.gz"):
        t = seconds(m["timestamp"])
        late += t < newest - 0.5
        newest = max(newest, t)
    assert late > 0
    assert len(truth["counter_resets"]) == 1


def test_clean_job_churn(runs):
    out, truth = runs["clean"]
    recs = [json.loads(x) for x in (out / "jobs.jsonl").read_text().splitlines()]
    states = [(r["fields"]["job_id"], r["fields"]["job_state"]) for r in recs]
    assert ("4244", "COMPLETED") in states and ("4245", "RUNNING") in states
    done = next(r for r in recs if r["fields"]["job_state"] == "COMPLETED")
    assert done["fields"]["end_time"] == done["timestamp"]
    assert [r["timestamp"] for r in recs] == sorted(r["timestamp"] for r in recs)


# --- scenario timelines ----------------------------------------------------------------------
def test_pfc_storm_origin_is_the_only_nic_sending_pause(runs):
    out, truth = runs["pfc_storm"]
    origin = truth["faults"][0]["entity"]["id"].split(":")[0]
    groups = by_series(out / "telemetry.jsonl.gz")
    senders, receivers = set(), set()
    for key, recs in groups.items():
        if key[0] != "nic_port":
            continue
        host = dict(key[1:])["host"]
        if any(r > 1000 for _, r in rates(recs, "tx_prio3_pause")):
            senders.add(host)
        if any(r > 100 for _, r in rates(recs, "rx_prio3_pause")):
            receivers.add(host)
    assert senders == {origin}
    assert receivers and origin not in receivers
    stormed = [m for recs in groups.values() for m in recs
               if m["name"] == "switch_queue" and m["fields"]["pfcwd_status"] == "stormed"]
    assert stormed and {m["tags"]["host"] for m in stormed} == {"leaf02"}


def test_link_flap_shows_on_both_ends(runs):
    out, truth = runs["link_flap"]
    ms = metrics(out / "telemetry.jsonl.gz")
    events = [m for m in ms if m["name"] == "link_event"]
    assert {m["tags"]["source"] for m in events} == {"syslog", "kernel"}
    downs = [m for m in events if m["fields"]["new_state"] == "down"]
    assert len(downs) == 2 * len(truth["faults"][0]["detail"]["downs"])
    assert any(m["name"] == "switch_port" and m["tags"]["host"] == "leaf02"
               and m["tags"]["interface"] == "swp2" and m["fields"]["oper_status"] == "down"
               for m in ms)


def test_device_down_switch_goes_silent(runs):
    out, truth = runs["device_down"]
    f = truth["faults"][0]
    dead = f["entity"]["id"]
    ts = [seconds(m["timestamp"]) for m in metrics(out / "telemetry.jsonl.gz")
          if m["tags"]["host"] == dead]
    assert ts and not any(f["start"] + 0.1 < t < f["end"] - 0.1 for t in ts)
    assert any(t > f["end"] for t in ts)


def test_congestion_marks_only_the_victim_port(runs):
    out, truth = runs["congestion"]
    host, iface = truth["faults"][0]["entity"]["id"].split(":")
    for key, recs in by_series(out / "telemetry.jsonl.gz").items():
        if key[0] != "switch_port":
            continue
        tags = dict(key[1:])
        peak = max(r for t, r in rates(recs, "ecn_marked_packets") if during(truth, t))
        if (tags["host"], tags["interface"]) == (host, iface):
            assert peak > 40_000
        else:
            assert peak < 1_000
        assert max(r for _, r in rates(recs, "pfc_3_tx_pkts")) == 0


def test_storage_slow_raises_latency_per_op(runs):
    out, truth = runs["storage_slow"]
    recs = by_series(out / "telemetry.jsonl.gz")[
        ("storage", ("host", "stor01"), ("kind", "nvmf"), ("name", "nvme0"))]
    for a, b in zip(recs, recs[1:]):
        t = seconds(b["timestamp"])
        lat = (b["fields"]["read_time"] - a["fields"]["read_time"]) / (
            b["fields"]["reads"] - a["fields"]["reads"])
        if during(truth, t):
            assert 15 < lat < 60
        elif not truth["faults"][0]["start"] - 1 <= t <= truth["faults"][0]["end"] + 1:
            assert 0.2 < lat < 1.0


def test_larger_fabric_and_weak_intensity(tmp_path):
    truth = simulate(out=tmp_path, scenario="link_degraded", duration=20, intensity="weak",
                     fabric=FabricSpec(spines=4, leaves=6, hosts_per_leaf=6, storage_hosts=1))
    assert truth["faults"][0]["intensity"] == "weak"
    assert truth["hosts"] == 37
    _, _, links = topology(tmp_path / "topology.dot")
    assert truth["faults"][0]["entity"]["id"] in links
