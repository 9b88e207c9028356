"""The realism layer and the tune/test split: each benign phenomenon shows in the
telemetry as contract section 8 describes it, sampling follows the drawn interval, the
shapes have the links they claim, and the splits are disjoint and deterministic.
Expectations come from the phenomena's definitions, on small fabrics and short runs."""
from __future__ import annotations

import gzip
import json
import random
import re
import subprocess
import sys
from collections import defaultdict
from dataclasses import asdict
from pathlib import Path

import pytest

from sim import FabricSpec, simulate
from sim.deliver import apply
from sim.fabric import BASE_EPOCH, Fabric
from sim.history import HISTORY_SEED_OFFSET
from sim.realism import INTERVALS, SPEEDS_GBPS, Params, Phenomenon, draw, draw_physics
from sim.shapes import SHAPES
from sim.split import (CAUSES, FABRICS, FIXED, RAILS, RAILS8, RANGES, TEST_SEED, TUNE_ANY_SEED, TUNE_RANGE_SEED,
                       TUNE_RETIRED_SEED, TUNE_SEED, TUNE_WIDE_SEED, SplitEntry, _target, build, check_intervals,
                       drawn_spec, entries)

SPEC = FabricSpec()
T0 = BASE_EPOCH


def _series(folder: Path) -> dict[tuple, list[dict]]:
    out = defaultdict(list)
    with gzip.open(folder / "telemetry.jsonl.gz", "rt") as fh:
        for line in fh:
            rec = json.loads(line)
            out[(rec["name"], rec["tags"]["host"], rec["tags"].get("interface"))].append(rec)
    return out


def _t(rec: dict) -> float:
    ts = rec["timestamp"]
    return ts / (1e9 if ts > 1e17 else 1e3 if ts > 1e11 else 1)


def _run(tmp_path: Path, phenomena: list[Phenomenon], *, interval: int = 1, jitter: float = 0,
         missed: float = 0.0, duration: float = 60.0) -> dict:
    out = tmp_path / "run"
    simulate(out=out, scenario="pfc_storm", seed=3, duration=duration, fabric=SPEC)
    params = Params({"switch": interval, "nic": interval, "storage": interval}, jitter, missed,
                    0.0, 0.0, phenomena)
    apply(out, Fabric(SPEC), params, seed=3)
    return _series(out)


def _sorted(series: list[dict]) -> list[dict]:
    return sorted(series, key=_t)


def test_a_32_bit_wrap_makes_the_counter_decrease_once(tmp_path):
    p = Phenomenon("wrap32", "switch_port", "leaf01", "swp51", T0 + 20, T0 + 20,
                   {"if_out_ucast_pkts": 32})
    s = _sorted(_run(tmp_path, [p])[("switch_port", "leaf01", "swp51")])
    values = [r["fields"]["if_out_ucast_pkts"] for r in s]
    drops = [(i, a, b) for i, (a, b) in enumerate(zip(values, values[1:])) if b < a]
    assert len(drops) == 1
    assert all(v < 2 ** 32 for v in values) and drops[0][1] > 2 ** 32 - 10 ** 8
    assert _t(s[drops[0][0] + 1]) >= T0 + 20 > _t(s[drops[0][0]])


def test_a_missed_sample_leaves_a_gap_and_10_s_series_have_jittered_10_s_spacing(tmp_path):
    series = _run(tmp_path, [], interval=10, jitter=1, missed=0.15, duration=300.0)
    gaps = []
    for key, s in series.items():
        if key[0] == "nic_port":
            ts = [_t(r) for r in _sorted(s)]
            gaps += [b - a for a, b in zip(ts, ts[1:])]
    assert gaps and min(gaps) >= 8.8  # 10 s - 1 s jitter - the base run's 50 ms
    assert any(9.5 > g or g > 10.5 for g in gaps if g < 15)  # jitter is there
    assert any(g > 17 for g in gaps)  # a missed sample: two intervals


def test_a_host_link_bounce_restarts_the_nic_counters_from_zero(tmp_path):
    p = Phenomenon("host_link_bounce", "nic_port", "gpu005", "eth0", T0 + 20, T0 + 25)
    series = _run(tmp_path, [p])
    nic = _sorted(series[("nic_port", "gpu005", "eth0")])
    before = [r for r in nic if _t(r) < T0 + 20][-1]["fields"]["rx_bytes"]
    after = [r for r in nic if _t(r) > T0 + 26][0]["fields"]["rx_bytes"]
    assert after < before and after < 10 * SPEC.line_bytes
    assert {r["fields"]["link"] for r in nic if T0 + 21 <= _t(r) <= T0 + 24} == {"down"}
    assert [r for r in nic if _t(r) > T0 + 26][0]["fields"]["link_down_events_phy"] == 1
    events = [r for r in series[("link_event", "gpu005", "eth0")]]
    assert [e["fields"]["new_state"] for e in events] == ["down", "up"]


def test_two_counter_resets_of_a_port_each_restart_its_counters_whatever_their_order(tmp_path):
    # Listed latest first, as the realism layer may draw them: each reset must still
    # restart the counters from zero, and they must go on counting after the second.
    ps = [Phenomenon("counter_reset", "switch_port", "leaf02", "swp3", T0 + 40.5, T0 + 40.5),
          Phenomenon("counter_reset", "switch_port", "leaf02", "swp3", T0 + 20.5, T0 + 20.5)]
    port = _sorted(_run(tmp_path, ps)[("switch_port", "leaf02", "swp3")])
    octets = [(_t(r), r["fields"]["if_in_octets"]) for r in port]
    drops = [t for (_, a), (t, b) in zip(octets, octets[1:]) if b < a]
    assert drops == pytest.approx([T0 + 21, T0 + 41], abs=1)
    late = [v for t, v in octets if t > T0 + 42]
    assert late and late[0] > 0 and late == sorted(late) and late[-1] > late[0]


def _octets(values) -> list[dict]:
    """A 1 s switch_port series whose if_in_octets are `values`, for `_rebase` alone."""
    return [{"name": "switch_port", "tags": {}, "timestamp": int((T0 + i + 0.03) * 1000),
             "fields": {"if_in_octets": v}} for i, v in enumerate(values)]


def test_a_reset_rebases_a_counter_only_up_to_its_own_next_restart():
    # The base run restarts the counter itself at 300 s (the clean scenario's own reset
    # of a leaf port); a realism reset at 226 s must not subtract its base from the
    # counter that restarted: that left every counter of a history's port at 0.
    from sim.deliver import _rebase
    series = _octets(10 ** 12 + 1000 * i if i <= 300 else 1000 * (i - 300) for i in range(600))
    _rebase(series, T0 + 226.3, T0 + 226.3, restart=True)
    value = {i: r["fields"]["if_in_octets"] for i, r in enumerate(series)}
    assert value[225] == 10 ** 12 + 225_000 and value[227] == 1000 and value[300] == 74_000
    assert value[301] == 1000 and value[400] == 100_000


def test_a_port_back_from_maintenance_counts_on_from_where_it_froze():
    # restart=False (admin down, the switch side of a bounce): frozen while down, then on
    # from the frozen value, not from where the counter would have been.
    from sim.deliver import _rebase
    series = _octets(1000 * i for i in range(100))
    _rebase(series, T0 + 20.5, T0 + 40.5, restart=False)
    value = [r["fields"]["if_in_octets"] for r in series]
    assert value[20] == value[30] == value[40] == 20_000
    assert value[41] == 21_000 and value[99] == 79_000


def test_admin_down_and_collector_gap_and_clock_skew(tmp_path):
    ps = [Phenomenon("admin_down", "switch_port", "leaf02", "swp3", T0 + 10, T0 + 30),
          Phenomenon("collector_gap", "*", "spine01", None, T0 + 20, T0 + 40),
          Phenomenon("clock_skew", "*", "leaf03", None, T0, T0 + 60, {"skew_s": 4.0})]
    series = _run(tmp_path, ps)
    port = [r for r in series[("switch_port", "leaf02", "swp3")] if T0 + 11 < _t(r) < T0 + 29]
    assert port and {r["fields"]["admin_status"] for r in port} == {"down"}
    spine = [_t(r) for k, s in series.items() if k[1] == "spine01" for r in s]
    assert spine and not [t for t in spine if T0 + 20.5 < t < T0 + 39.5]
    peer = [r for r in series[("switch_port", "leaf01", "swp51")] if T0 + 21 < _t(r) < T0 + 39]
    assert peer and {r["fields"]["oper_status"] for r in peer} == {"up"}
    skewed = _sorted(series[("switch_port", "leaf03", "swp1")])
    plain = _sorted(series[("switch_port", "leaf04", "swp1")])
    assert _t(skewed[0]) - _t(plain[0]) == pytest.approx(4.0, abs=0.1)


def test_blips_add_their_amount_once_and_fec_floors_are_flat(tmp_path):
    ps = [Phenomenon("blip_crc", "nic_port", "gpu003", "eth0", T0 + 15.5, T0 + 16.5,
                     {"rx_crc_errors_phy": 4}),
          Phenomenon("blip_pcie_stall", "nic_port", "gpu004", "eth0", T0 + 15.5, T0 + 17.5,
                     {"outbound_pci_stalled_rd": 3.0}),
          Phenomenon("fec_floor", "switch_port", "leaf01", "swp52", T0, T0 + 60,
                     {"if_in_fec_correctable_frames": 1e5})]
    series = _run(tmp_path, ps)
    crc = [r["fields"]["rx_crc_errors_phy"] for r in _sorted(series[("nic_port", "gpu003", "eth0")])]
    assert crc[-1] - crc[0] == 4
    stall = [r["fields"]["outbound_pci_stalled_rd"] for r in _sorted(series[("nic_port", "gpu004", "eth0")])]
    assert 1 <= sum(1 for v in stall if v == 3.0) <= 4
    fec = [r["fields"]["if_in_fec_correctable_frames"]
           for r in _sorted(series[("switch_port", "leaf01", "swp52")])]
    rates = [b - a for a, b in zip(fec[5:], fec[6:])]
    assert min(rates) > 0.8e5 and max(rates) < 1.2e5
    unc = [r["fields"]["if_in_fec_not_correctable_frames"]
           for r in series[("switch_port", "leaf01", "swp52")]]
    assert len(set(unc)) == 1


def _short(split: str, scenario: str, seed: int) -> SplitEntry:
    return SplitEntry(f"{scenario}-x", scenario, seed, 60.0)


def test_splits_have_disjoint_fixed_seeds_and_clean_runs():
    tune, test = entries("tune"), entries("test")
    assert not {e.seed for e in tune} & {e.seed for e in test}
    assert min(e.seed for e in tune) == TUNE_SEED and min(e.seed for e in test) == TEST_SEED
    assert [e.seed for e in entries("test")] == [e.seed for e in test]
    for split in (tune, test):
        assert any(e.scenario == "clean" for e in split)
    clean_s = sum(e.duration for e in test if e.scenario == "clean")
    assert clean_s >= 3600 and len(entries("test", clean_hours=5)) > len(test)


def test_tune_wide_has_its_own_seeds_tunes_placements_and_tests_ranges():
    """tune-wide: seeds no other split draws (nor their histories), tune's even placements
    and fabrics, the test split's ranges (30 s polling, weak faults, 100/800 Gb/s)."""
    wide = entries("tune-wide", repeats=4, clean_hours=3)
    others = {e.seed for s in ("tune", "test") for e in entries(s, repeats=4, clean_hours=5)}
    assert min(e.seed for e in wide) == TUNE_WIDE_SEED and not {e.seed for e in wide} & others
    assert not {e.seed + HISTORY_SEED_OFFSET for e in wide} & (others | {e.seed for e in wide})
    rng = random.Random(1)
    fab = Fabric(FabricSpec())
    assert {_target(rng, "tune-wide", "link_flap", fab) for _ in range(200)} <= {e.name for e in fab.hosts[::2]}
    seen = {draw(random.Random(k), split="tune-wide", fabric=fab, start=0, duration=600).intervals["switch"]
            for k in range(200)}
    assert seen == set(INTERVALS["test"])
    speeds = {draw_physics(random.Random(k), "tune-wide")[0] for k in range(200)}
    assert speeds == set(SPEEDS_GBPS["test"]) and speeds > set(SPEEDS_GBPS["tune"])
    with pytest.raises(ValueError, match="unknown split"):
        draw_physics(random.Random(1), "tune-narrow")


def test_tune_any_places_anywhere_on_odd_spine_counts_from_seeds_of_its_own():
    """tune-any: seeds no other split draws (nor their histories), placements on odd
    hosts and leaves too, 3- and 5-spine fabrics of sizes the test split lacks, the test
    split's ranges."""
    any_ = entries("tune-any", repeats=4, clean_hours=3)
    others = {e.seed for s in ("tune", "tune-wide", "test") for e in entries(s, repeats=4, clean_hours=5)}
    assert min(e.seed for e in any_) == TUNE_ANY_SEED and not {e.seed for e in any_} & others
    assert not {e.seed + HISTORY_SEED_OFFSET for e in any_} & (others | {e.seed for e in any_})
    rng = random.Random(1)
    fab = Fabric(FabricSpec())
    assert {_target(rng, "tune-any", "link_flap", fab) for _ in range(300)} == {e.name for e in fab.hosts}
    assert {s.spines for s in FABRICS["tune-any"]} >= {3, 5}
    assert not set(FABRICS["tune-any"]) & set(FABRICS["test"]) - {FabricSpec()}
    seen = {draw(random.Random(k), split="tune-any", fabric=fab, start=0, duration=600).intervals["switch"]
            for k in range(200)}
    assert seen == set(INTERVALS["test"])


def test_tune_range_draws_its_fabric_sizes_per_run_never_a_fixed_one(tmp_path):
    """tune-range: seeds no other split draws (nor their histories), tune-any's
    placements and ranges, and each run's fabric drawn from ranges: the sizes vary from
    run to run, stay in their ranges, are never a fixed spec of any split, and the same
    seed draws the same fabric."""
    ours = entries("tune-range", repeats=4, clean_hours=3)
    others = {e.seed for s in ("tune", "tune-wide", "tune-any", "test") for e in entries(s, repeats=4, clean_hours=5)}
    assert min(e.seed for e in ours) == TUNE_RANGE_SEED and not {e.seed for e in ours} & others
    assert not {e.seed + HISTORY_SEED_OFFSET for e in ours} & (others | {e.seed for e in ours})
    rng, fab = random.Random(1), Fabric(FabricSpec())
    assert {_target(rng, "tune-range", "link_flap", fab) for _ in range(300)} == {e.name for e in fab.hosts}
    for shape in ("two_tier", "rails"):
        specs = [drawn_spec(e.seed, shape) for e in ours]
        assert not set(specs) & FIXED and specs == [drawn_spec(e.seed, shape) for e in ours]
        for field, (lo, hi) in zip(("spines", "leaves", "hosts_per_leaf", "storage_hosts"), RANGES[shape]):
            values = {getattr(s, field) for s in specs}
            assert min(values) >= lo and max(values) <= hi and len(values) >= 3, (shape, field, values)
    assert FabricSpec() in FIXED and all(s in FIXED for s in FABRICS["test"])
    truth = build(_short("tune-range", "clean", TUNE_RANGE_SEED + 3), out=tmp_path / "r", split="tune-range")
    spec = FabricSpec(**(truth["realism"]["fabric_spec"] | {"speed_gbps": 400}))
    assert truth["split"] == "tune-range" and spec not in FIXED


def test_a_probe_draws_its_intervals_from_those_given_and_says_so(tmp_path):
    """`simulate --split tune-range --intervals 2,15`: polling no split has (2 s, 15 s), on a
    tune split's seeds; the truth keeps the choices, the test split is never probed, and an
    interval outside contract section 1's 1-60 s is refused."""
    seen = set()
    for k in range(4):
        entry = _short("tune-range", "clean", TUNE_RANGE_SEED + k)
        truth = build(entry, out=tmp_path / str(k), split="tune-range", intervals=(2, 15))
        assert truth["probe_intervals"] == [2, 15] and truth["split"] == "tune-range"
        assert set(truth["realism"]["intervals"].values()) <= {2, 15}
        seen.add(truth["realism"]["interval_s"])
    assert seen == {2, 15}
    plain = build(_short("tune-range", "clean", TUNE_RANGE_SEED), out=tmp_path / "plain", split="tune-range")
    assert "probe_intervals" not in plain
    with pytest.raises(ValueError, match="test split"):
        check_intervals("test", (2,))
    with pytest.raises(ValueError, match="1-60 s"):
        check_intervals("tune", (5, 61))


def test_same_entry_same_bytes_and_truth_records_realism(tmp_path):
    entry = _short("test", "pfc_storm", TEST_SEED + 5)
    a, b = build(entry, out=tmp_path / "a", split="test"), build(entry, out=tmp_path / "b", split="test")
    for name in ("telemetry.jsonl.gz", "topology.dot", "jobs.jsonl", "truth.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    r = a["realism"]
    assert r["interval_s"] in (1, 5, 10, 30) and r["shape"] in ("two_tier", "rails", "three_tier")
    assert r["benign_kinds"] and a["split"] == "test"
    assert r["physics"]["buffer_bytes"] >= 16 * 2 ** 20 and r["fabric_spec"]["speed_gbps"] in (100, 200, 400, 800)
    written = json.loads((tmp_path / "a" / "truth.json").read_text())
    assert written["physics"] == written["realism"]["physics"]  # the run was simulated with them


def _shape_run(tmp_path: Path, shape: str, monkeypatch) -> Path:
    import sim.split as split
    monkeypatch.setitem(split.SHAPES, "test", (shape,))
    out = tmp_path / shape
    build(_short("test", "clean", TEST_SEED + 7), out=out, split="test")
    return out


def test_rail_hosts_have_8_nics_on_8_different_leaves(tmp_path, monkeypatch):
    out = _shape_run(tmp_path, "rails", monkeypatch)
    edges = re.findall(r'"(leaf\d+)":"swp\d+" -- "gpu001":"(eth\d)"', (out / "topology.dot").read_text())
    assert len(edges) == 8 and len({leaf for leaf, _ in edges}) == 8
    assert len({nic for _, nic in edges}) == 8
    nics = {k[2] for k in _series(out) if k[0] == "nic_port" and k[1] == "gpu001"}
    assert nics == {f"eth{k}" for k in range(8)}


def test_three_tier_dot_has_superspines_linked_to_every_spine(tmp_path, monkeypatch):
    out = _shape_run(tmp_path, "three_tier", monkeypatch)
    dot = (out / "topology.dot").read_text()
    supers = re.findall(r'"(superspine\d+)" \[function="superspine"\]', dot)
    assert len(supers) == 2
    spines = set(re.findall(r'"(spine\d+)" \[function="spine"\]', dot))
    for s in supers:
        assert set(re.findall(rf'"(spine\d+)":"swp\d+" -- "{s}"', dot)) == spines
    assert any(k[1].startswith("superspine") for k in _series(out))


def test_the_realism_layer_never_imports_the_engine():
    code = ("import sys, sim.split, sim.realism, sim.deliver, sim.shapes; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('engine','rules','models')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.stdout.strip() == "[]"


def test_a_runs_history_is_clean_on_its_fabric_delivered_as_the_run_is(tmp_path):
    """sim.history: the run's fabric, shape, sample intervals and persistent phenomena
    (flat FEC floors, clock skew) and physics constants, no fault, another seed than the run's."""
    from sim.history import HISTORY_SEED_OFFSET, PERSISTENT, build_history

    build(_short("tune", "fec_creep", TUNE_SEED + 9), out=tmp_path / "run", split="tune")
    run = json.loads((tmp_path / "run" / "truth.json").read_text())
    hist = build_history(tmp_path / "run", tmp_path / "hist", duration=60)
    assert hist["faults"] == [] and hist["clean"] and hist["history_of"] == run["scenario"]
    assert hist["seed"] == run["seed"] + HISTORY_SEED_OFFSET
    for k in ("intervals", "jitter_s", "missed", "shape", "fabric_spec", "physics"):
        assert hist["realism"][k] == run["realism"][k]
    assert hist["physics"] == run["realism"]["physics"]  # what the simulator ran with (its FEC noise, ...)
    keep = sorted((p["kind"], p["host"], p["interface"], p["fields"]["skew_s"] if "skew_s" in p["fields"] else 0)
                  for p in run["realism"]["phenomena"] if p["kind"] in PERSISTENT)
    got = sorted((p["kind"], p["host"], p["interface"], p["fields"]["skew_s"] if "skew_s" in p["fields"] else 0)
                 for p in hist["realism"]["phenomena"] if p["kind"] in PERSISTENT)
    assert keep and got == keep  # this seed has some (a clock skew or a floor)
    assert (tmp_path / "hist" / "topology.dot").read_text() == (tmp_path / "run" / "topology.dot").read_text()


def test_the_retired_test_split_is_the_first_test_split_and_the_test_split_is_new(tmp_path):
    """tune-retired keeps the first test split's seeds (900000 + k), sizes and rails
    fabric, so its runs are the ones docs/accuracy.md reported before it was retired; the
    test split has seeds and fabric sizes (its rails fabric too) no tuning split has."""
    retired, test = entries("tune-retired", repeats=4, clean_hours=5), entries("test", repeats=4, clean_hours=5)
    assert min(e.seed for e in retired) == TUNE_RETIRED_SEED == 900_000
    tuning = {e.seed for s in ("tune", "tune-wide", "tune-any", "tune-range", "tune-retired")
              for e in entries(s, repeats=4, clean_hours=5)}
    assert min(e.seed for e in test) == TEST_SEED and not {e.seed for e in test} & tuning
    assert not {e.seed + HISTORY_SEED_OFFSET for e in test} & (tuning | {e.seed for e in test})
    others = {s for split, specs in FABRICS.items() if split != "test" for s in specs} | {RAILS8}
    assert not (set(FABRICS["test"]) | {RAILS["test"]}) & others - {FabricSpec()}
    assert FABRICS["tune-retired"][1:] == (FabricSpec(spines=4, leaves=6, hosts_per_leaf=4),
                                           FabricSpec(spines=3, leaves=8, hosts_per_leaf=4, storage_hosts=3))
    assert RAILS["test"] in FIXED
    # its random streams are the first test split's (seeded "test"), so its runs are that split's
    one = build(_short("tune-retired", "clean", TUNE_RETIRED_SEED + 3), out=tmp_path / "retired", split="tune-retired")
    speed, physics = draw_physics(random.Random(f"{TUNE_RETIRED_SEED + 3}:test:physics"), "test")
    assert one["realism"]["physics"] == asdict(physics) and one["realism"]["fabric_spec"]["speed_gbps"] == speed
    rng, fab = random.Random(1), Fabric(FabricSpec())
    assert {_target(rng, "tune-retired", "link_flap", fab) for _ in range(300)} == {e.name for e in fab.hosts}
    seed = next(e.seed for e in test if e.scenario == "pfc_storm")
    while random.Random(f"{seed}:test:realism").choice(SHAPES["test"]) != "rails":
        seed += len(CAUSES)  # the same cause further down the table, until one is a rails run
    truth = build(_short("test", "pfc_storm", seed), out=tmp_path / "rails", split="test")
    assert truth["realism"]["shape"] == "rails"
    assert FabricSpec(**(truth["realism"]["fabric_spec"] | {"speed_gbps": 400})) == RAILS["test"]
