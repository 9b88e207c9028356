"""Command-line errors a user can fix are one line on stderr and exit code 2."""
from cli.main import main


def test_worker_refuses_a_models_folder_it_cannot_load(capsys, tmp_path):
    assert main(["worker", "--bootstrap", "127.0.0.1:1", "--topology", "t.dot", "--models", str(tmp_path / "m")]) == 2
    assert "no such models folder" in capsys.readouterr().err


def test_worker_needs_a_bootstrap_and_a_topology(capsys, monkeypatch):
    monkeypatch.delenv("FABRIC_RCA_BOOTSTRAP", raising=False)
    monkeypatch.delenv("FABRIC_RCA_TOPOLOGY", raising=False)
    assert main(["worker"]) == 2
    assert "--bootstrap" in capsys.readouterr().err


def test_simulate_names_the_scenarios_when_none_is_given(tmp_path, capsys):
    assert main(["simulate", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "pfc_storm" in err and "clean" in err


def _worker(argv, monkeypatch, **env):
    from cli.main import parser, worker_settings

    for k in ("FABRIC_RCA_BOOTSTRAP", "FABRIC_RCA_TOPOLOGY", "FABRIC_RCA_TELEMETRY_TOPICS"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return worker_settings(parser().parse_args(["worker", "--bootstrap", "127.0.0.1:9092", "--topology", "t.dot", *argv]))


def test_worker_reads_the_telemetry_topics_it_is_given(monkeypatch):
    assert _worker([], monkeypatch).telemetry_topics == ("fabric.telemetry",)
    got = _worker(["--telemetry-topic", "spectrum", "--telemetry-topic", "storage"], monkeypatch)
    assert got.telemetry_topics == ("spectrum", "storage")
    got = _worker(["--topic-prefix", "lab."], monkeypatch, FABRIC_RCA_TELEMETRY_TOPICS="spectrum, storage")
    assert got.telemetry_topics == ("lab.spectrum", "lab.storage")
    assert got.symptoms_topic == "lab.fabric.symptoms"
    assert got.topics()["lab.storage"] == got.partitions  # created when missing, like the default one


def test_worker_idle_partition_limit(monkeypatch, capsys):
    import pytest

    assert _worker([], monkeypatch).idle_partition_s == 30.0
    assert _worker(["--idle-partition-s", "5"], monkeypatch).idle_partition_s == 5.0
    with pytest.raises(SystemExit):
        _worker(["--idle-partition-s", "0"], monkeypatch)
    assert "must be greater than 0" in capsys.readouterr().err


def test_every_command_runs_with_the_engines_gc_thresholds(capsys):
    import gc

    from cli.runtime import GC_THRESHOLDS

    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        main(["rules", "check"])
        assert gc.get_threshold() == GC_THRESHOLDS
    finally:
        gc.set_threshold(*before)
