"""Replay on several processes (engine/shards.py) gives what one process gives.

The parent reads every line once and hands each shard its own devices' records and the
times that reach a new tick; each shard detects; the parent correlates. The reference is
the one-process replay of the same files: the same incidents (every field, ids
included), the same counts, the same rejects file, and a broken file or a failing child
said as clearly as one process says it.
"""
from __future__ import annotations

import gzip
import math
import json
import os
from pathlib import Path

import pytest

from compose import EngineSettings, build_engine, new_correlate_stage, new_detect_stage, replay_with
from contract.measurements import JOB_MEASUREMENT
from engine.shards import Shard
from engine.replay import ReplayError
from engine.shards import merge_stats, replay_sharded
from engine.topology import load_topology
from engine.types import Metric
from evaluation.scenarios import replay_scenario
from sim.split import SplitEntry, build, entries
from testkit.mlx5_ethtool import as_ethtool


def _tune(name: str) -> SplitEntry:
    return next(e for e in entries("tune") if e.name == name)


@pytest.fixture(scope="module")
def tune_runs(tmp_path_factory):
    """Two runs of the tune split (the realism layer: jitter, late and duplicate records,
    skew, collector gaps): a dead switch (its silence is found by the shard that owns it,
    on the input's clock) and a noisy job (job records and cross-device correlation)."""
    out = {}
    for name in ("device_down-0", "noisy_neighbor-0"):
        folder = tmp_path_factory.mktemp(name)
        build(_tune(name), out=folder, split="tune")
        out[name] = folder
    return out


def _same(folder: Path, shards: int) -> None:
    truth, one, one_stats = replay_scenario(folder)
    _, many, many_stats = replay_scenario(folder, shards=shards)
    assert one, "the reference found no incident: the comparison would prove little"
    assert many == one
    assert many_stats.summary() == one_stats.summary()


@pytest.mark.parametrize("name", ["device_down-0", "noisy_neighbor-0"])
@pytest.mark.parametrize("shards", [2, 3])
def test_sharded_replay_of_a_realistic_run_is_the_one_process_replay(tune_runs, name, shards):
    _same(tune_runs[name], shards)


def test_sharded_replay_of_a_pause_storm_is_the_one_process_replay(scenario_dir):
    _same(scenario_dir("pfc_storm"), 2)


@pytest.mark.parametrize("name", ["pfc_storm-0", "noisy_neighbor-1"])
def test_sharded_replay_at_30_s_polling_is_the_one_process_replay(tmp_path, name):
    """At 30 s polling most ticks see no record of a shard's devices, and the sample
    intervals the detectors read (silences, windows) are the reading stage's estimates."""
    build(_tune(name), out=tmp_path, split="tune", intervals=(30,))
    _same(tmp_path, 2)


def _as_line_protocol(folder: Path, tmp_path: Path, *, ethtool: bool) -> Path:
    """The run's telemetry as Telegraf writes it in line protocol (its late, duplicate and
    other-half records kept), nic_port records as inputs.ethtool's when `ethtool`."""
    from engine.lineproto import dumps
    from engine.normalize import parse_line
    out = []
    for line in gzip.open(folder / "telemetry.jsonl.gz", "rb"):
        for m in parse_line(line)[0]:
            name, tags, fields = as_ethtool(m.name, m.tags, m.fields) if ethtool else (m.name, m.tags, m.fields)
            out.append(dumps(name, tags, fields, round(m.ts * 1e9)))
    path = tmp_path / ("ethtool.lp" if ethtool else "contract.lp")
    path.write_text("\n".join(out) + "\n")
    return path


@pytest.mark.parametrize("ethtool", [False, True])
def test_sharded_replay_of_line_protocol_is_the_one_process_replay(tune_runs, tmp_path, ethtool):
    """Line protocol as Telegraf writes it (nic_port as inputs.ethtool's, mapped by the
    reading stage when `ethtool`): the same incidents, counts and rejects file."""
    folder = tune_runs["noisy_neighbor-0"]
    path = _as_line_protocol(folder, tmp_path, ethtool=ethtool)
    parts = _parts(folder)
    one, one_stats = _run(parts, [path], 1, tmp_path / "one.jsonl")
    assert one
    summary = one_stats.summary()
    assert summary["duplicates"] + summary["merged_halves"] + summary["late_records"] > 0, summary
    for shards in (2, 3):
        many, many_stats = _run(parts, [path], shards, tmp_path / f"many{shards}.jsonl")
        assert many == one
        assert many_stats.summary() == summary
        assert (tmp_path / f"many{shards}.jsonl").read_text() == (tmp_path / "one.jsonl").read_text()


def test_each_shard_is_handed_its_own_records_and_the_times_that_reach_a_new_tick(tune_runs):
    """What the reading stage releases, through `Router`: every record to the shard of its
    device alone (a job's placement to none: the reading stage applies it), and to every
    other shard its time when it reaches a new tick (a whole second after the last that
    did); each series' name and tags once per shard; the sample intervals the order
    estimated anew, ahead of the records that follow."""
    import msgspec
    from engine.shard_streams import Router

    folder = tune_runs["noisy_neighbor-0"]
    parts = _parts(folder)
    sent: list[list] = [[], []]

    class Kids:
        count = 2

        def send(self, k, data):
            sent[k].extend(msgspec.msgpack.decode(data)[0])

    reader = new_detect_stage(parts, "shard0")
    assigned = Shard.balance(parts.roles, 2)
    router = Router(reader, Kids(), assigned)
    released: list = []

    def release(records, reach):
        released.extend(zip(records, reach))
        router.release(records, reach)
    reader.release_to(release)
    for line in gzip.open(folder / "telemetry.jsonl.gz", "rb"):
        reader.feed(line)
    reader.finish()
    router.send(end=True)
    assert len(released) > 1000
    owners = [Shard(k, 2, assigned).owner() for k in (0, 1)]
    for k in (0, 1):
        records = [it for it in sent[k] if it.__class__ is list]
        times = [it for it in sent[k] if it.__class__ is float]
        mine = [m for m, _ in released if m.__class__ is not float and owners[k](m)]
        assert [(r[0], r[1], r[2]) for r in records] == [(m.series, m.ts, m.fields) for m in mine]
        first = {}
        for r in records:
            first.setdefault(r[0], len(r))
        assert set(first.values()) == {5} and sum(len(r) == 5 for r in records) == len(first)
        others = [m.ts for m, new in released if new and (m.__class__ is float or not owners[k](m))]
        assert times == others and len(times) < len(released) / 10
        assert any(it.__class__ is dict for it in sent[k])
    ticks = [m if m.__class__ is float else m.ts for m, new in released if new]
    assert all(b > a for a, b in zip(ticks, ticks[1:]))
    assert all(math.ceil(b) > math.ceil(a) for a, b in zip(ticks, ticks[1:]))


def _with_halves_and_resends(folder: Path, tmp_path: Path) -> Path:
    """The run in line protocol (nic_port as inputs.ethtool's) where, once a minute per
    series, a sample comes as two halves, or as two copies that differ in one counter, or
    is sent again once it is too late (3 of its intervals and 2 s after), with a counter
    changed (a `too_late` reject) and as it was (a duplicate)."""
    import statistics

    from engine.lineproto import dumps
    from engine.normalize import parse_line
    records = [m for line in gzip.open(folder / "telemetry.jsonl.gz", "rb") for m in parse_line(line)[0]]
    times: dict[str, list[float]] = {}
    for m in records:
        times.setdefault(m.series, []).append(m.ts)
    interval = {k: statistics.median(b - a for a, b in zip(sorted(v), sorted(v)[1:])) if len(v) > 2 else 1.0
                for k, v in times.items()}
    slots: list[list[str]] = [[] for _ in records]
    resend: list[tuple[float, list[str]]] = []
    start, done = records[0].ts, set()
    for i, m in enumerate(records):
        name, tags, fields = as_ethtool(m.name, m.tags, dict(m.fields))
        ns = round(m.ts * 1e9)
        numbers = [k for k, v in fields.items() if v.__class__ is int]
        minute = (m.series, int(m.ts - start) // 60)
        kind = len(done) % 3 if minute not in done and m.ts - start > 30 and len(numbers) >= 2 else None
        if kind is not None:
            done.add(minute)
        if kind == 0:  # two halves
            keys = list(fields)
            slots[i] += [dumps(name, tags, {k: fields[k] for k in keys[: len(keys) // 2]}, ns),
                         dumps(name, tags, {k: fields[k] for k in keys[len(keys) // 2:]}, ns)]
            continue
        slots[i].append(dumps(name, tags, fields, ns))
        if kind == 1:  # a conflicting copy right behind it
            slots[i].append(dumps(name, tags, {**fields, numbers[0]: fields[numbers[0]] + 1}, ns))
        elif kind == 2:  # sent again too late: changed, then as it was
            resend.append((m.ts + 3 * interval[m.series] + 2, [
                dumps(name, tags, {**fields, numbers[1]: fields[numbers[1]] + 1}, ns), dumps(name, tags, fields, ns)]))
    resend.sort(key=lambda r: r[0])
    k = 0
    for i, m in enumerate(records):  # (each after the first record of the input's time it waits for)
        while k < len(resend) and m.ts >= resend[k][0]:
            slots[i] += resend[k][1]
            k += 1
    path = tmp_path / "halves.lp"
    path.write_text("\n".join(line for slot in slots for line in slot) + "\n")
    return path


def test_halves_conflicts_and_late_resends_of_every_device_count_as_in_one_process(tune_runs, tmp_path):
    """The reading stage merges halves, counts copies and refuses resends too late before
    it hands anything over: every device has each kind, and the counts and the rejects
    file are one process's."""
    folder = tune_runs["noisy_neighbor-0"]
    path = _with_halves_and_resends(folder, tmp_path)
    parts = _parts(folder)
    one, one_stats = _run(parts, [path], 1, tmp_path / "one.jsonl")
    summary = one_stats.summary()
    assert summary["merged_halves"] > 20 and summary["duplicates"] > 20, summary
    assert summary["rejects"].get("too_late", 0) > 20 and summary["mapped"], summary
    for shards in (2, 3):
        many, many_stats = _run(parts, [path], shards, tmp_path / f"many{shards}.jsonl")
        assert many == one
        assert many_stats.summary() == summary
        assert (tmp_path / f"many{shards}.jsonl").read_text() == (tmp_path / "one.jsonl").read_text()


def _parts(folder: Path):
    return build_engine(EngineSettings(jobs_file=folder / "jobs.jsonl"), topology=load_topology(folder / "topology.dot"))


def _with_bad_lines(folder: Path, tmp_path: Path) -> Path:
    """The run's telemetry with a broken line, a record of an unknown measurement, a
    duplicate and a record far behind its series, spread through the file."""
    lines = gzip.open(folder / "telemetry.jsonl.gz", "rb").read().splitlines()
    mid = len(lines) // 2
    first = json.loads(lines[mid - 100])
    ts = first["timestamp"]
    unit = next(u for bound, u in ((1e17, 1e9), (1e14, 1e6), (1e11, 1e3), (0, 1)) if ts > bound)  # (ns ... s)
    old = dict(first, timestamp=ts - 600 * unit)
    odd = dict(first, name="thermal", fields={"celsius": 40})
    out = lines[:mid] + [b"{not json", json.dumps(odd).encode(), lines[mid - 50], json.dumps(old).encode()] + lines[mid:]
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"\n".join(out) + b"\n")
    return path


def _run(parts, files, shards, rejects):
    latest: dict[str, dict] = {}
    stats = replay_with(parts, files, shards=shards, rejects_path=rejects,
                        sink=lambda ch: latest.update((i["id"], i) for i in ch))
    return sorted(latest.values(), key=lambda i: i["id"]), stats


def test_rejects_and_counts_are_those_of_one_process(scenario_dir, tmp_path):
    folder = scenario_dir("pfc_storm")
    path = _with_bad_lines(folder, tmp_path)
    parts = _parts(folder)
    one, one_stats = _run(parts, [path], 1, tmp_path / "one.jsonl")
    many, many_stats = _run(parts, [path], 2, tmp_path / "many.jsonl")
    assert many == one
    summary = one_stats.summary()
    assert summary["rejected"] >= 2 and summary["duplicates"] >= 1 and summary["ignored_measurements"] == {"thermal": 1}
    assert many_stats.summary() == summary
    assert (tmp_path / "many.jsonl").read_text() == (tmp_path / "one.jsonl").read_text()


def test_a_broken_file_is_reported_once_and_its_good_lines_used(scenario_dir, tmp_path):
    folder = scenario_dir("pfc_storm")
    whole = (folder / "telemetry.jsonl.gz").read_bytes()
    broken = tmp_path / "cut.jsonl.gz"
    broken.write_bytes(whole[: len(whole) // 2])
    parts = _parts(folder)
    told: list = []
    latest: dict = {}
    stats = replay_with(parts, [broken, folder / "telemetry.jsonl.gz"], shards=2, on_file_error=told.append,
                        sink=lambda ch: latest.update((i["id"], i) for i in ch))
    assert [f.path for f in told] == [broken]
    assert stats.records > 0 and latest
    with pytest.raises(ReplayError, match="1 of 2 file"):
        replay_with(parts, [broken, folder / "telemetry.jsonl.gz"], shards=2, sink=lambda ch: None)


def _parts_and_stage(folder):
    parts = _parts(folder)
    return parts, new_correlate_stage(parts, ["shard0", "shard1"])


def test_a_failing_shard_ends_the_replay_with_its_traceback(scenario_dir):
    folder = scenario_dir("pfc_storm")
    parts, correlate = _parts_and_stage(folder)

    def make(source):
        if source == "shard1":
            raise RuntimeError("no stage for you")
        return new_detect_stage(parts, source)

    with pytest.raises(ReplayError, match="(?s)replay shard 1 of 2 failed.*RuntimeError: no stage for you"):
        replay_sharded(make, correlate, [folder / "telemetry.jsonl.gz"], shards=2, sink=lambda ch: None)


def test_a_shard_that_dies_ends_the_replay_with_its_exit_code(scenario_dir):
    folder = scenario_dir("pfc_storm")
    parts, correlate = _parts_and_stage(folder)

    def make(source):
        if source == "shard1" and os.getpid() != parent:
            os._exit(9)
        return new_detect_stage(parts, source)

    parent = os.getpid()
    with pytest.raises(ReplayError, match="replay shard 1 of 2 ended without finishing \\(exit code 9\\)"):
        replay_sharded(make, correlate, [folder / "telemetry.jsonl.gz"], shards=2, sink=lambda ch: None)


def test_the_correlate_stage_must_wait_for_every_shard(scenario_dir):
    folder = scenario_dir("pfc_storm")
    parts = _parts(folder)
    with pytest.raises(ValueError, match="must wait for"):
        replay_sharded(lambda s: new_detect_stage(parts, s), new_correlate_stage(parts, ["shard0"]),
                       [folder / "telemetry.jsonl.gz"], shards=2, sink=lambda ch: None)


def _m(host: str | None, name: str = "nic_port") -> Metric:
    return Metric(name, {"host": host} if host is not None else {}, {}, 0.0)


def test_every_device_is_in_exactly_one_shard_and_the_rest_in_shard_0():
    roles = {f"gpu{i:03d}": "host" for i in range(10)} | {"leaf01": "leaf", "leaf02": "leaf", "spine01": "spine"}
    assigned = Shard.balance(roles, 3)
    owners = [Shard(k, 3, assigned).owner() for k in range(3)]
    for device in [*roles, "not-in-topology", "x"]:
        assert sum(own(_m(device)) for own in owners) == 1
    assert [own(_m(None)) for own in owners] == [True, False, False]
    assert [own(_m("gpu001", JOB_MEASUREMENT)) for own in owners] == [True, False, False]
    per_shard = [sum(1 for d in roles if assigned[d] == k) for k in range(3)]
    assert max(per_shard) - min(per_shard) <= 1
    hosts = [sum(1 for d, r in roles.items() if r == "host" and assigned[d] == k) for k in range(3)]
    assert max(hosts) - min(hosts) <= 1
    with pytest.raises(ValueError, match="shard 3 of 3"):
        Shard(3, 3)


def test_merged_counts_take_what_was_read_once_and_sum_what_was_detected():
    from engine.pipeline import Stats

    class _C:
        class correlator:
            opened, resolved, reopened = 4, 3, 1
    read = Stats(records=100, lines=90, duplicates=3)
    read.rejects["bad_json"] = 1
    a = Stats(symptoms=2, ignored_fields=1, watermark=50.0)
    a.ignored_measurements["x"] = 1
    b = Stats(symptoms=5, ignored_fields=2, watermark=50.0)
    b.ignored_measurements["y"] = 2
    out = merge_stats(read, [a, b], _C())
    assert (out.records, out.lines, out.duplicates, out.rejects) == (100, 90, 3, {"bad_json": 1})
    assert (out.symptoms, out.ignored_fields, out.watermark) == (7, 3, 50.0)
    assert out.ignored_measurements == {"x": 1, "y": 2}
    assert (out.incidents_opened, out.incidents_resolved, out.incidents_reopened) == (4, 3, 1)


def test_the_default_is_one_shard_per_usable_core_at_most_4_and_1_without_fork(monkeypatch):
    import engine.shards as shards

    monkeypatch.setattr(shards, "usable_cores", lambda: 16)
    assert shards.default_shards() == 4
    monkeypatch.setattr(shards, "usable_cores", lambda: 2)
    assert shards.default_shards() == 2
    monkeypatch.setattr(shards.multiprocessing, "get_all_start_methods", lambda: ["spawn"])
    assert shards.default_shards() == 1


def test_the_replay_command_on_two_shards_stores_what_one_process_stores(scenario_dir, tmp_path, capsys):
    from cli.main import main
    from testkit.store import stored_incidents

    folder = scenario_dir("pfc_storm")
    runs = {}
    for n in ("1", "2"):
        db = f"sqlite:///{tmp_path / f'r{n}.db'}"
        code = main(["replay", str(folder / "telemetry.jsonl.gz"), "--topology", str(folder / "topology.dot"),
                     "--jobs", str(folder / "jobs.jsonl"), "--db", db, "--rejects", str(tmp_path / f"rej{n}.jsonl"),
                     "--shards", n, "--json", "--quiet"])
        assert code == 0
        summary = json.loads(capsys.readouterr().out)
        assert summary["shards"] == int(n)
        runs[n] = (stored_incidents(db), {k: v for k, v in summary.items() if k not in ("shards", "db", "rejects_file")})
    assert runs["1"][0] and runs["2"] == runs["1"]


@pytest.mark.parametrize("bad", ["0", "-1", "two", "65"])
def test_a_bad_shard_count_is_refused_by_name(tmp_path, capsys, bad):
    from cli.main import main

    with pytest.raises(SystemExit):
        main(["replay", "x.jsonl", "--topology", "t.dot", "--shards", bad])
    assert "--shards: must be a whole number from 1 to 64" in capsys.readouterr().err
