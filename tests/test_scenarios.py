"""Scenario tests: the expected root cause and affected jobs come from the generator's
truth.json (what it injected), never from the engine's own output."""
import pytest

import sim
from evaluation.scenarios import replay_scenario
from evaluation.score import score_scenario

FAULT_SCENARIOS = [s for s in sim.SCENARIOS if s not in ("clean", "demo")]

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("name", FAULT_SCENARIOS)
def test_fault_is_found_and_ranked_first(scenario_dir, name):
    truth, incidents, _ = replay_scenario(scenario_dir(name))
    (fault,) = truth["faults"]
    result = score_scenario(truth, incidents)
    (f,) = result.faults
    assert f.detected, f"no incident for {fault['cause']} at {fault['entity']['id']}"
    top = [i for i in incidents if any(rc["entity"]["id"] == fault["entity"]["id"] for rc in i["root_causes"])]
    assert f.rank == 1, f"top-1 was {f.top_cause} {f.top_entity}; truth {fault['cause']} {fault['entity']['id']}"
    assert result.false_incidents == 0, [i["title"] for i in incidents]
    primary = next(i for i in top if i["root_causes"][0]["entity"]["id"] == fault["entity"]["id"])
    assert {j["job_id"] for j in primary["affected_jobs"]} == set(fault["affected_jobs"])
    assert primary["root_causes"][0]["entity"]["kind"] == fault["entity"]["kind"]
    assert 0.0 <= primary["root_causes"][0]["score"] <= 1.0


def test_clean_fabric_raises_no_incident(scenario_dir):
    truth, incidents, stats = replay_scenario(scenario_dir("clean"))
    assert truth["faults"] == []
    assert incidents == [], [i["title"] for i in incidents]
    assert stats.duplicates > 0  # the clean scenario carries duplicate records
    assert stats.counter_resets > 0  # ... and a counter reset, which must not alarm


def test_replay_is_deterministic(scenario_dir):
    folder = scenario_dir("pfc_storm")
    _, first, _ = replay_scenario(folder)
    _, second, _ = replay_scenario(folder)
    assert first == second
