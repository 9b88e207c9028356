"""The evaluation wing on result objects: a suite run is a `SuiteRun` of
`ScenarioResult`s, judged against the generator's truth, not a printed table."""
import pytest

from evaluation.report import SuiteRun, choose_methods, run_suite


def test_methods_are_checked_and_ordered():
    assert choose_methods(None, models=False) == ["rules", "baro", "nsigma"]
    assert choose_methods("nsigma,rules", models=False) == ["rules", "nsigma"]
    with pytest.raises(ValueError, match="unknown method"):
        choose_methods("rules,oracle", models=False)
    with pytest.raises(ValueError, match="needs --models"):
        choose_methods("models", models=False)
    with pytest.raises(ValueError, match="not in --methods"):
        choose_methods("rules", models=True)


@pytest.mark.slow
def test_a_suite_run_holds_one_result_per_scenario_and_method(scenario_dir):
    folders = [scenario_dir("pfc_storm"), scenario_dir("clean")]
    heard: list[str] = []
    run = run_suite(folders, methods=["rules", "baro"], on_scenario=heard.append)
    assert isinstance(run, SuiteRun) and run.baselines == ["baro"]
    assert [len(run.results[m]) for m in run.methods] == [2, 2]
    storm, clean = run.results["rules"]
    assert storm.faults[0].cause == "pfc_storm" and storm.faults[0].detected and storm.faults[0].rank == 1
    assert clean.clean and clean.faults == [] and clean.false_incidents == 0
    assert len(heard) == 2 and all(s >= 0 for s in run.seconds.values())
