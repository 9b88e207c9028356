"""Anomaly models: training, scoring, persistence, and their symptoms in the pipeline.

Expectations come from the generator's truth (which entity got the fault, when), and the
false-alarm check uses a clean hold-out the models never saw."""
import json
import pickle
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cli.main import main
from evaluation.scenarios import replay_scenario, scenario_files
from engine.pipeline import DetectStage
from engine.replay import open_lines
from engine.topology import load_topology
from models.catalogue import CLASSES, EWM_NOISE, features_needed
from models.model import MAD_K, MEDIAN_SE, ClassModel
from models.scorer import opens_incident, rule_id
from models.store import ModelError, load, save
from models.train import TrainingError, train
from models.windows import NAN, Smoother, WindowCutter, entity_key, vector
from rules.loader import load_rules


@pytest.fixture(scope="module")
def trained(scenario_dir, tmp_path_factory):
    """Models trained on 5 minutes of a clean fabric (seed 11)."""
    folder = scenario_dir("clean", seed=11, duration=300)
    files = scenario_files(folder)
    models, training = train([files["telemetry"]], topologies=[load_topology(files["topology"])], seed=3)
    out = tmp_path_factory.mktemp("models")
    save(models, out, training=training)
    return out, models, training


def detect_symptoms(folder: Path, models) -> list:
    files = scenario_files(folder)
    topo = load_topology(files["topology"])
    stage = DetectStage(rules=load_rules(None), roles={d: topo.role(d) for d in topo.devices()}, scorer=models.scorer())
    out = []
    for line in open_lines(files["telemetry"]):
        stage.feed(line)
        out += [e.symptom for e in stage.events() if e.symptom is not None and e.symptom.end is None]
    stage.finish()
    out += [e.symptom for e in stage.events() if e.symptom is not None and e.symptom.end is None]
    return out


# --- the method ------------------------------------------------------------------------
def _fit(values, keys=None, seed=0):
    """A model of three latency-like features (floors 0.3, 0.3, 2)."""
    values = np.asarray(values, dtype=float)
    keys = keys or ["s/disk/a"] * len(values)
    return ClassModel.fit("storage", ("read_ms", "write_ms", "depth"), [0.3, 0.3, 2.0], keys, values,
                          seed=seed, z_min=6.0)


def test_a_smoothed_scale_is_never_below_what_white_noise_gives_it():
    """The smoothed column's own MAD (here 0: constant in training) is raised to k times the
    window column's spread; a larger one of its own is kept. Both carry the standard
    error of the median of the window column's 400 samples (in quadrature)."""
    rng = np.random.default_rng(3)
    x = rng.normal(1.0, 0.1, 400)
    flat = np.column_stack([x, np.full(400, 1.0), x, np.full(400, 1.0)])
    model = ClassModel.fit("storage", ("a", "a_ewm", "b", "b_ewm"), [0.01, 0.002, 0.01, 0.002], ["s"] * 400,
                           flat, seed=0, z_min=6.0, smooth=[(1, 0, 0.25)])
    spread = MAD_K * np.median(np.abs(x - np.median(x)))
    error = MEDIAN_SE * spread / 20
    assert model.scale[0, 0] == pytest.approx(np.hypot(spread, error) + 0.01)
    assert model.scale[0, 1] == pytest.approx(np.hypot(0.25 * spread, error) + 0.002)
    assert model.scale[0, 3] == pytest.approx(0.002)  # not named in `smooth`: its own MAD (0) + floor
    wide = np.column_stack([x, rng.normal(1.0, 0.2, 400), x, x])
    model = ClassModel.fit("storage", ("a", "a_ewm", "b", "b_ewm"), [0.01, 0.002, 0.01, 0.002], ["s"] * 400,
                           wide, seed=0, z_min=6.0, smooth=[(1, 0, 0.25)])
    assert model.scale[0, 1] > 0.25 * (model.scale[0, 0] - 0.01) + 0.002 + 0.1


def test_a_smoothed_mean_never_warm_in_training_takes_its_window_columns_level():
    """A history shorter than the smoothed mean's warm-up (12 samples: 12 minutes at 60 s
    polling) leaves its column NaN. Its level is then the window column's, not zero (a
    10-minute history at 60 s put every NIC's smoothed PCIe stall at 0, and at minute 12
    every NIC was 8-17 z over it), and a reading at that level is no anomaly. A column
    the entity never reported at all stays 0."""
    rng = np.random.default_rng(5)
    x = rng.normal(1.5, 0.2, 10)
    cold = np.column_stack([x, np.full(10, np.nan), np.full(10, np.nan), np.full(10, np.nan)])
    model = ClassModel.fit("nic", ("stall", "stall_ewm", "other", "other_ewm"), [0.01, 0.002, 0.01, 0.002],
                           ["n"] * 10, cold, seed=0, z_min=6.0, smooth=[(1, 0, 0.25), (3, 2, 0.25)])
    assert model.med[0, 1] == pytest.approx(np.median(x)) and model.ceiling[0, 1] == pytest.approx(x.max())
    assert model.med[0, 3] == 0.0  # (neither column ever reported)
    z, verdicts = model.score(["n"], np.array([[1.5, 1.55, np.nan, np.nan]]))
    assert z[0, 1] < 1 and not verdicts


def test_a_short_history_does_not_make_an_entitys_ordinary_noise_news():
    """Ten minutes polled every 30 s are 20 windows: the median of those is off the
    entity's true level by about 0.28 sigma, more than the smoothed horizon's own noise
    (0.21 sigma). Over 300 NICs trained so and then watched for 30 more windows of the
    same noise, the smoothed horizon (as models.windows.Smoother feeds it) reaches z_min
    on none; without the median's error in the scale it did on 7 (and on clean-7 of
    tune-wide at 30 s: three false `nic_degraded`)."""
    rng = np.random.default_rng(11)
    keys, rows, later, later_keys = [], [], [], []
    for e in range(300):
        smoother, key = Smoother(), f"gpu{e}:eth0"
        stall = rng.gamma(2.0, 0.6, 50)  # a clean NIC's PCIe stall share: skewed, a long right tail
        for k, v in enumerate(stall):
            row = smoother.row(key, [float(v)])
            (rows if k < 20 else later).append(row)
            (keys if k < 20 else later_keys).append(key)
    values = np.asarray(rows, dtype=float)
    model = ClassModel.fit("nic", ("pci_stall", "pci_stall_ewm"), [0.1, 0.1 * EWM_NOISE], keys, values,
                           seed=0, z_min=6.0, smooth=[(1, 0, EWM_NOISE)], rel=[0.05, 0.05 * EWM_NOISE])
    watched = np.asarray(later, dtype=float)
    at = [model.keys[k] for k in later_keys]
    z = model._z(watched, model.med[at], model.scale[at])
    assert (z[:, 1] >= 6.0).sum() == 0
    assert z[:, 1].max() > 1.0  # (the horizon is scored: its noise shows)


def test_a_rise_far_above_an_entitys_normal_is_anomalous_and_a_fall_is_not():
    rng = np.random.default_rng(1)
    normal = np.column_stack([rng.normal(1.0, 0.05, 400), rng.normal(1.2, 0.05, 400), rng.normal(4, 0.5, 400)])
    model = _fit(normal)
    keys = ["s/disk/a"] * 3
    _, verdicts = model.score(keys, np.array([[1.0, 1.2, 4.0], [0.0, 0.0, 0.0], [9.0, 1.2, 4.0]]))
    assert [v.key for v in verdicts] == ["s/disk/a"]
    assert verdicts[0].z[0] > 6 and verdicts[0].z[1] == 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(min_value=0, max_value=1.0), min_size=3, max_size=3))
def test_scores_are_one_sided(fraction):
    """Lowering any feature below its median never makes a window anomalous."""
    rng = np.random.default_rng(2)
    normal = np.abs(np.column_stack([rng.normal(5, 1, 300), rng.normal(5, 1, 300), rng.normal(8, 1, 300)]))
    model = _fit(normal)
    med, _ = model.baseline("s/disk/a")
    z, verdicts = model.score(["s/disk/a"], (med * np.asarray(fraction))[None, :])
    assert verdicts == [] and float(z.max()) == 0.0


def test_unseen_entities_use_the_pooled_baseline():
    rng = np.random.default_rng(3)
    vals = np.vstack([rng.normal(1, 0.05, (200, 3)), rng.normal(3, 0.05, (200, 3))])
    model = _fit(vals, keys=["a"] * 200 + ["b"] * 200)
    m, s = model.baseline("never-seen")
    assert np.allclose(m, model.pooled_med) and np.allclose(s, model.pooled_scale)
    assert 1.0 < m[0] < 3.0


def test_training_and_scoring_are_deterministic_under_a_seed(scenario_dir):
    files = scenario_files(scenario_dir("clean", seed=11, duration=300))
    a, _ = train([files["telemetry"]], seed=5)
    b, _ = train([files["telemetry"]], seed=5)
    for name in a.classes:
        x, y = a.classes[name], b.classes[name]
        assert x.threshold == y.threshold and np.array_equal(x.med, y.med) and np.array_equal(x.scale, y.scale)
        probe = np.tile(x.pooled_med + 8 * x.pooled_scale, (4, 1))
        assert np.array_equal(x.forest.score_samples(probe), y.forest.score_samples(probe))


def test_online_learning_follows_a_lasting_change_in_bounded_memory():
    rng = np.random.default_rng(4)
    model = _fit(np.column_stack([rng.normal(1, 0.05, 300), rng.normal(1, 0.05, 300), rng.normal(4, 0.2, 300)]))
    online: dict = {}
    before = model.baseline("s/disk/a")[0][0]
    for _ in range(400):  # the normal moved up a little and stays there
        model.learn("s/disk/a", np.array([1.3, 1.0, 4.0]), 0.02, online)
    after = model.baseline("s/disk/a", online)[0][0]
    assert before < 1.05 and after == pytest.approx(1.3, abs=0.05)
    assert len(online) == 1  # one (median, scale) pair per entity, whatever the history length


# --- windows ---------------------------------------------------------------------------
def test_windows_average_each_feature_per_entity_and_close_on_time():
    cut = WindowCutter(5.0)
    tags = {"host": "stor01", "kind": "disk", "name": "nvme0"}
    for t, lat in ((100.0, 1.0), (101.0, 3.0), (104.0, 2.0)):
        cut.observe("storage", "s1", tags, t, vector("storage", {"read_latency_ms": lat}))
    assert not cut.due(104.9) and cut.due(105.0)
    start, rows = cut.close(105.0)
    (slot,), means = rows["storage"]
    assert start == 100.0 and slot.key == "stor01/disk/nvme0" and means[0, 0] == 2.0
    assert np.isnan(means[0, 1])  # no write latency seen: missing, not zero
    assert cut.close(110.0)[1] == {}  # nothing reported in the next window: no row


_cell = st.one_of(st.just(NAN), st.floats(-1e6, 1e6, allow_nan=False))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.tuples(st.sampled_from("abcd"), st.lists(_cell, min_size=3, max_size=3)),
                         max_size=5, unique_by=lambda kv: kv[0]), min_size=1, max_size=8),
       st.lists(st.tuples(st.sampled_from("ab"), st.lists(_cell, min_size=3, max_size=3)), min_size=2, max_size=3))
def test_a_window_of_entities_smoothed_at_once_equals_one_by_one(windows, repeated):
    """`rows` (the batch used at run time and in training) is `row` to the bit, over any
    sequence of windows with entities coming and going, NaNs and the warm-up; a batch
    naming an entity twice falls back to `row`."""
    batch, single = Smoother(alpha=0.3, warmup=3), Smoother(alpha=0.3, warmup=3)
    for window in windows + [repeated]:
        if not window:
            continue
        keys = [k for k, _ in window]
        got = batch.rows(keys, np.array([v for _, v in window], dtype=float))
        want = np.array([single.row(k, list(v)) for k, v in window], dtype=float)
        assert np.array_equal(got, want, equal_nan=True)
        assert batch.state.keys() == single.state.keys()
        assert all(np.array_equal(batch.state[k], single.state[k], equal_nan=True) for k in single.state)
        assert batch.seen == single.seen


def test_the_long_horizon_follows_a_drift_and_ignores_missing_windows():
    sm = Smoother(alpha=0.5, warmup=2)
    first = sm.row("k", [1.0, NAN])
    assert first[:1] == [1.0] and all(x != x for x in first[1:])  # warming up: not scored yet
    assert sm.row("k", [3.0, 2.0]) == [3.0, 2.0, 2.0, 2.0]
    assert sm.row("k", [NAN, 4.0])[2:] == [2.0, 3.0]


def test_entity_keys_keep_queues_and_disks_apart():
    assert entity_key(CLASSES["queue"], {"host": "leaf01", "interface": "swp1", "queue": "3",
                                         "queue_type": "UC"}) == "leaf01:swp1/3/UC"
    assert entity_key(CLASSES["nic"], {"host": "gpu001"}) is None
    assert features_needed("nic_port") >= {"pci_stall", "oob_rate"} and features_needed("wjh_drop") == frozenset()


def test_only_sustained_model_symptoms_open_incidents_and_then_as_their_rule_twins_do():
    assert opens_incident(rule_id("nic", "nic_pcie_stall", sustained=True))
    assert not opens_incident(rule_id("nic", "nic_retransmit", sustained=True))
    assert not opens_incident(rule_id("nic", "nic_pcie_stall"))  # evidence: joins and ranks, never opens


# --- against the generator's truth -------------------------------------------------------
def test_models_trained_on_clean_data_stay_quiet_on_a_clean_hold_out(trained, scenario_dir):
    _, models, _ = trained
    hold_out = scenario_dir("clean", seed=12, duration=300)
    assert [s for s in detect_symptoms(hold_out, models) if s.rule.startswith("model:")] == []


@pytest.mark.parametrize("scenario,family", [("storage_slow", "storage"), ("link_degraded", "errors")])
def test_models_flag_an_injected_fault_on_its_entity(trained, scenario_dir, scenario, family):
    _, models, _ = trained
    folder = scenario_dir(scenario, seed=12, duration=300, intensity="weak")
    truth = json.loads((folder / "truth.json").read_text())
    fault = truth["faults"][0]
    entity = fault["entity"]["id"]
    ends = set(entity.split("--"))
    got = [s for s in detect_symptoms(folder, models) if s.rule.startswith("model:")]
    mine = [s for s in got if s.entity.id in ends or s.entity.id == entity]
    assert mine, f"no model symptom on {entity}; got {[(s.rule, s.entity.id) for s in got]}"
    assert all(s.family == family for s in mine)
    assert all(fault["start"] - 5 <= s.start <= fault["end"] for s in mine)
    assert all(s.metrics["anomaly_z"] >= 3 and any(k.endswith("_z") and k != "anomaly_z" for k in s.metrics)
               for s in mine)


def test_replay_with_models_finds_the_fault_and_nothing_else(trained, scenario_dir):
    folder_models, _, _ = trained
    folder = scenario_dir("storage_slow", seed=12, duration=300, intensity="weak")
    truth, incidents, _ = replay_scenario(folder, models_dir=folder_models)
    assert len(incidents) == 1
    top = incidents[0]["root_causes"][0]
    assert (top["cause"], top["entity"]["id"]) == (truth["faults"][0]["cause"], truth["faults"][0]["entity"]["id"])


def test_replay_with_models_on_two_processes_is_the_one_process_replay(trained, scenario_dir):
    # Each shard scores its own devices with a scorer of its own (engine/shards.py): the
    # scorer's state is per entity, so the shards' symptoms are the one scorer's.
    folder_models, _, _ = trained
    folder = scenario_dir("storage_slow", seed=12, duration=300, intensity="weak")
    _, one, one_stats = replay_scenario(folder, models_dir=folder_models)
    _, two, two_stats = replay_scenario(folder, models_dir=folder_models, shards=2)
    assert one and two == one
    assert two_stats.summary() == one_stats.summary()


def test_a_restored_stage_with_models_continues_exactly(trained, scenario_dir):
    _, models, _ = trained
    files = scenario_files(scenario_dir("storage_slow", seed=12, duration=300, intensity="weak"))
    topo = load_topology(files["topology"])
    roles = {d: topo.role(d) for d in topo.devices()}
    lines = list(open_lines(files["telemetry"]))

    def run(cut: int | None) -> list[bytes]:
        stage = DetectStage(rules=load_rules(None), roles=roles, scorer=models.scorer())
        out = []
        for n, line in enumerate(lines):
            if n == cut:
                snap = stage.snapshot()
                stage = DetectStage(rules=load_rules(None), roles=roles, scorer=models.scorer())
                stage.restore(snap)
            stage.feed(line)
            out += [e.to_bytes() for e in stage.events()]
        stage.finish()
        return out + [e.to_bytes() for e in stage.events()]

    whole = run(None)
    assert any(b"model:storage" in e for e in whole)
    assert run(len(lines) // 2) == whole


# --- persistence -----------------------------------------------------------------------
def test_saved_models_load_back_with_their_metadata(trained):
    folder, models, training = trained
    back = load(folder)
    meta = json.loads((folder / "metadata.json").read_text())
    assert meta["versions"]["scikit-learn"] and meta["training"]["records"] == training["records"]
    assert meta["classes"]["nic"]["features"] == list(CLASSES["nic"].model_features)
    assert "pci_stall_ewm" in meta["classes"]["nic"]["features"]
    assert meta["training"]["from"] < meta["training"]["to"] and meta["window_s"] == 5.0
    for name, m in models.classes.items():
        probe = np.tile(m.pooled_med + 10 * m.pooled_scale, (2, 1))
        keys = ["x", "y"]
        assert [(v.z_max, v.forest) for v in back.classes[name].score(keys, probe)[1]] == \
            [(v.z_max, v.forest) for v in m.score(keys, probe)[1]]
        assert np.array_equal(back.classes[name].forest.score_samples(probe), m.forest.score_samples(probe))
        assert back.classes[name].threshold == m.threshold


def _copy(src: Path, dst: Path) -> Path:
    dst.mkdir()
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
    return dst


def test_bad_model_folders_are_clear_errors(trained, tmp_path):
    folder, _, _ = trained
    with pytest.raises(ModelError, match="no such models folder"):
        load(tmp_path / "nope")
    half = _copy(folder, tmp_path / "half")
    (half / "models.joblib").unlink()
    with pytest.raises(ModelError, match="models.joblib: missing"):
        load(half)
    corrupt = _copy(folder, tmp_path / "corrupt")
    data = (corrupt / "models.joblib").read_bytes()
    (corrupt / "models.joblib").write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelError, match="checksum"):
        load(corrupt)
    old = _copy(folder, tmp_path / "old")
    meta = json.loads((old / "metadata.json").read_text())
    meta["versions"]["scikit-learn"] = "0.24.2"
    (old / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(ModelError, match="trained with scikit-learn 0.24.2"):
        load(old)
    meta["versions"]["scikit-learn"] = json.loads((folder / "metadata.json").read_text())["versions"]["scikit-learn"]
    meta["classes"]["nic"]["features"] = ["oob_rate"]
    (old / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(ModelError, match="retrain"):
        load(old)
    (old / "metadata.json").write_text("{not json")
    with pytest.raises(ModelError, match="unreadable metadata"):
        load(old)
    forged = _copy(folder, tmp_path / "forged")
    (forged / "models.joblib").write_bytes(pickle.dumps({"format": 99}))
    meta = json.loads((forged / "metadata.json").read_text())
    import hashlib
    meta["sha256"] = hashlib.sha256((forged / "models.joblib").read_bytes()).hexdigest()
    (forged / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(ModelError, match="not a fabric-rca model file"):
        load(forged)


def test_training_on_nothing_usable_is_an_error(tmp_path):
    empty = tmp_path / "t.jsonl"
    empty.write_text('{"name":"cpu","tags":{"host":"a"},"fields":{"x":1},"timestamp":1764400000}\n')
    with pytest.raises(TrainingError, match="no usable telemetry"):
        train([empty])


# --- CLI -------------------------------------------------------------------------------
def test_train_then_replay_with_models_on_the_command_line(scenario_dir, tmp_path, capsys):
    clean = scenario_files(scenario_dir("clean", seed=11, duration=300))
    out = tmp_path / "m"
    assert main(["train", "--from", str(clean["telemetry"]), "--topology", str(clean["topology"]),
                 "--out", str(out), "--quiet"]) == 0
    assert "trained on" in capsys.readouterr().out and (out / "metadata.json").is_file()
    faulty = scenario_files(scenario_dir("storage_slow", seed=12, duration=300, intensity="weak"))
    db = tmp_path / "x.db"
    assert main(["replay", str(faulty["telemetry"]), "--topology", str(faulty["topology"]), "--jobs",
                 str(faulty["jobs"]), "--db", str(db), "--models", str(out), "--quiet", "--json",
                 "--rejects", str(tmp_path / "r.jsonl")]) == 0
    assert json.loads(capsys.readouterr().out)["incidents_opened"] == 1


def test_replay_and_worker_refuse_a_broken_models_folder(scenario_dir, tmp_path, capsys):
    f = scenario_files(scenario_dir("clean", seed=11, duration=300))
    assert main(["replay", str(f["telemetry"]), "--topology", str(f["topology"]), "--db", str(tmp_path / "x.db"),
                 "--models", str(tmp_path / "missing"), "--quiet"]) == 2
    assert "no such models folder" in capsys.readouterr().err
    assert main(["worker", "--bootstrap", "127.0.0.1:1", "--topology", str(f["topology"]),
                 "--models", str(tmp_path / "missing")]) == 2
    assert "no such models folder" in capsys.readouterr().err
