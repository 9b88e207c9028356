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
