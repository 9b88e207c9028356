"""link_miswired: the declared topology against the cabling LLDP reports, as incidents
(engine/cabling.py). The check is pure; the correlate stage opens, keeps and resolves
the incidents; `replay --lldp` stores them and the API serves them by cause."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import httpx
import pytest
from test_compose_root import _free_port, _run, _worker
from test_topology_sources import _write_dir, lldp_docs

from api.server import running_server
from cli.main import main
from compose import EngineSettings, build_engine, new_pipeline
from engine.cabling import CAUSE, check_cabling
from engine.events import TICK, StageEvent, encode_batch
from engine.jobs import JobBook
from engine.maintenance import StaticWindows, Window
from engine.pipeline import CorrelateStage
from engine.topology import load_topology
from engine.topology_load import TopologyError, read_spec
from engine.types import Job
from rules.loader import load_rules
from testkit.samples import samples_dir
from testkit.store import stored_incidents

DATA = Path(__file__).parent / "data"
T0 = 1_764_400_000.0


@pytest.fixture(scope="module")
def air():
    return load_topology(DATA / "air.dot")


def _survey(tmp_path, air, cables):
    return read_spec(_write_dir(tmp_path / "lldp", lldp_docs(air, cables=cables)))


def _moved(air, link: str, to: str) -> list[tuple[str, str]]:
    """Every declared cable, with the one of `link`'s host end re-plugged into switch port `to`."""
    cables = [air.link_ends(x) for x in air.links()]
    host, switch = sorted(air.link_ends(link), key=lambda e: air.is_switch(e.split(":")[0]))
    cables.remove(air.link_ends(link))
    return cables + [(host, f"{switch.split(':')[0]}:{to}")]


def _check(air, survey):
    return check_cabling(air, survey, declared_source="air.dot", observed_source="lldp")


# ------------------------------------------------------------------ the pure check


def test_a_survey_that_agrees_finds_nothing(tmp_path, air):
    check = _check(air, _survey(tmp_path, air, [air.link_ends(x) for x in air.links()]))
    assert check.miswired == () and check.warnings == ()
    assert check.summary["matching"] == check.summary["declared_links"] == 18


def test_one_cable_in_the_wrong_port_is_one_miswiring_with_both_views(tmp_path, air):
    check = _check(air, _survey(tmp_path, air, _moved(air, "gpu001:eth0--leaf01:swp1", "swp30")))
    [m] = check.miswired
    assert m.link == "gpu001:eth0--leaf01:swp1" and m.device == "leaf01"
    assert m.observed == ("gpu001:eth0--leaf01:swp30",)
    declared, seen, *ends = m.evidence
    assert declared == {"view": "declared", "link": "gpu001:eth0--leaf01:swp1", "source": "air.dot"}
    assert seen == {"view": "lldp", "links": ["gpu001:eth0--leaf01:swp30"], "source": "lldp"}
    by_end = {e["interface"]: e for e in ends}
    assert by_end["gpu001:eth0"]["declared_peer"] == "leaf01:swp1"
    assert by_end["gpu001:eth0"]["observed_peer"] == "leaf01:swp30"
    assert by_end["gpu001:eth0"]["lldp"].startswith(str(tmp_path / "lldp"))  # the lldpctl file that said so
    assert by_end["leaf01:swp1"] == {"interface": "leaf01:swp1", "declared_peer": "gpu001:eth0",
                                     "observed_peer": None, "lldp": None}
    assert check.warnings == () and check.summary["miswired"] == 1 and check.summary["extra"] == 0


def test_two_swapped_cables_are_two_miswired_links(tmp_path, air):
    cables = [air.link_ends(x) for x in air.links()]
    cables.remove(("gpu001:eth0", "leaf01:swp1"))
    cables.remove(("gpu002:eth0", "leaf01:swp2"))
    check = _check(air, _survey(tmp_path, air, cables + [("gpu001:eth0", "leaf01:swp2"), ("gpu002:eth0", "leaf01:swp1")]))
    assert [m.link for m in check.miswired] == ["gpu001:eth0--leaf01:swp1", "gpu002:eth0--leaf01:swp2"]
    assert len({m.key for m in check.miswired}) == 2


def test_missing_and_extra_links_are_warnings_not_miswirings(tmp_path, air):
    cables = [air.link_ends(x) for x in air.links()]
    cables.remove(("gpu003:eth0", "leaf02:swp1"))
    check = _check(air, _survey(tmp_path, air, cables + [("leaf02:swp40", "leaf03:swp40")]))
    assert check.miswired == ()
    assert check.summary["missing"] == 1 and check.summary["extra"] == 1
    missing, extra = check.warnings
    assert "declared links LLDP does not see" in missing and "gpu003:eth0--leaf02:swp1" in missing
    assert "cables no link of air.dot declares" in extra and "leaf02:swp40--leaf03:swp40" in extra


# ------------------------------------------------------------ incidents of the stage


def _job(job_id: str, hosts: tuple[str, ...]) -> Job:
    return Job(job_id, "acme", "u", "RUNNING", hosts, None, T0 - 100, None)


def _stage(air, findings, jobs=()) -> CorrelateStage:
    book = JobBook()
    for job in jobs:
        book.update(job)
    return CorrelateStage(topology=air, rules=load_rules(), jobs=book, miswired=findings)


def _tick(stage: CorrelateStage, t: float) -> list[dict]:
    stage.add(StageEvent(TICK, t, "p0"))
    stage.advance()
    return stage.changes()


def test_the_stage_opens_one_incident_per_miswiring_and_keeps_it(tmp_path, air):
    [m] = _check(air, _survey(tmp_path, air, _moved(air, "gpu001:eth0--leaf01:swp1", "swp30"))).miswired
    stage = _stage(air, (m,), jobs=[_job("7", ("gpu001", "gpu004")), _job("8", ("gpu005", "gpu006"))])
    [inc] = _tick(stage, T0)
    assert inc["status"] == "open" and inc["opened_at"] == inc["detected_at"] == "2025-11-29T07:06:40.000Z"
    [rc] = inc["root_causes"]
    assert (rc["cause"], rc["entity"], rc["score"]) == (CAUSE, {"kind": "link", "id": m.link}, 1.0)
    assert rc["evidence"] == list(m.evidence)
    assert [j["job_id"] for j in inc["affected_jobs"]] == ["7"]  # job 8's paths stay off gpu001's link
    assert inc["severity"] == "major" and "miswired" in inc["title"]
    assert _tick(stage, T0 + 1) == []  # nothing new: no update
    assert stage.correlator.opened == 1
    stage.correlator.update_job(_job("9", ("gpu001",)))
    [again] = _tick(stage, T0 + 2)
    assert again["id"] == inc["id"] and [j["job_id"] for j in again["affected_jobs"]] == ["7", "9"]


def test_a_restart_keeps_the_incident_and_one_whose_survey_is_fixed_resolves_it(tmp_path, air):
    [m] = _check(air, _survey(tmp_path, air, _moved(air, "gpu001:eth0--leaf01:swp1", "swp30"))).miswired
    stage = _stage(air, (m,))
    [inc] = _tick(stage, T0)
    data = stage.snapshot()
    same = _stage(air, (m,))
    same.restore(data)
    assert _tick(same, T0 + 5) == [] and same.correlator.opened == 1
    fixed = _stage(air, ())  # restarted with a survey that agrees (or without one)
    fixed.restore(data)
    [done] = _tick(fixed, T0 + 5)
    assert (done["id"], done["status"], done["resolved_at"]) == (inc["id"], "resolved", "2025-11-29T07:06:45.000Z")
    assert fixed.correlator.resolved == 1 and _tick(fixed, T0 + 6) == []


def test_a_maintenance_window_on_the_link_marks_it_as_on_any_incident(tmp_path, air):
    [m] = _check(air, _survey(tmp_path, air, _moved(air, "gpu001:eth0--leaf01:swp1", "swp30"))).miswired
    windows = StaticWindows((Window("w1", "leaf01", T0 - 60, T0 + 3600, "re-cabling rack 1"),))
    stage = CorrelateStage(topology=air, rules=load_rules(), maintenance=windows, miswired=(m,))
    [inc] = _tick(stage, T0)
    assert inc["maintenance"] and "w1 on leaf01" in inc["maintenance_reason"]


def test_without_a_survey_the_engine_has_no_cabling_to_report():
    parts = build_engine(EngineSettings(topology=DATA / "air.dot"))
    assert parts.cabling is None and parts.miswired == ()
    assert new_pipeline(parts).correlate.correlator.cabling.findings == {}


def test_a_survey_that_is_not_lldpctl_output_is_refused(tmp_path):
    with pytest.raises(TopologyError, match="not lldpctl JSON output"):
        build_engine(EngineSettings(topology=DATA / "air.dot", lldp=DATA / "air.dot"))


# ------------------------------------------- replay with the real lldpctl sample


def _fabric(tmp_path: Path, declared_peer: str) -> tuple[Path, Path, Path]:
    """The lldpd test's answer as ns-1's file (eth0 sees ns-2.example.com port eth1), a
    declared topology cabling ns-1:eth0 to ns-2's `declared_peer`, and 40 s of telemetry
    of both hosts with a job across them."""
    lldp = tmp_path / "lldp"
    lldp.mkdir()
    (lldp / "ns-1.json").write_text(next((samples_dir() / "lldp").glob("*.json")).read_text())
    declared = tmp_path / "declared.json"
    declared.write_text(json.dumps({"devices": [{"id": "ns-1", "role": "host"}, {"id": "ns-2", "role": "host"}],
                                    "links": [{"a": "ns-1:eth0", "b": f"ns-2:{declared_peer}"}]}))
    job = {"name": "job_placement", "tags": {"scheduler": "slurm", "cluster": "c"}, "timestamp": T0,
           "fields": {"job_id": "42", "account": "acme", "user": "u", "job_state": "RUNNING", "nodes": "ns-[1-2]",
                      "start_time": T0}}
    lines = [json.dumps(job)] + [
        json.dumps({"name": "nic_port", "tags": {"host": h, "interface": "eth0"}, "timestamp": T0 + i,
                    "fields": {"rx_bytes": 1000 * i, "tx_bytes": 1000 * i, "link": "up"}})
        for i in range(40) for h in ("ns-1", "ns-2")]
    telemetry = tmp_path / "tel.jsonl"
    telemetry.write_text("\n".join(lines) + "\n")
    return lldp, declared, telemetry


def _replay(tmp_path: Path, telemetry: Path, declared: Path, *more: str) -> tuple[list[dict], dict]:
    db = tmp_path / "rca.db"
    assert main(["replay", str(telemetry), "--topology", str(declared), *more, "--db", f"sqlite:///{db}",
                 "--rejects", str(tmp_path / "rejects.jsonl"), "--quiet", "--json"]) == 0
    return stored_incidents(db), db


def test_replay_with_the_lldpctl_sample_opens_one_link_miswired_incident(tmp_path, capsys):
    lldp, declared, telemetry = _fabric(tmp_path, declared_peer="eth0")  # LLDP says eth1: miswired
    [inc], db = _replay(tmp_path, telemetry, declared, "--lldp", str(lldp))
    summary = json.loads(capsys.readouterr().out)
    assert summary["incidents_opened"] == 1 and summary["cabling"]["miswired"] == 1
    [rc] = inc["root_causes"]
    assert (rc["cause"], rc["entity"]) == ("link_miswired", {"kind": "link", "id": "ns-1:eth0--ns-2:eth0"})
    by_end = {e["interface"]: e for e in rc["evidence"] if "interface" in e}
    assert by_end["ns-1:eth0"]["declared_peer"] == "ns-2:eth0"
    assert by_end["ns-1:eth0"]["observed_peer"] == "ns-2:eth1"  # the sample's ns-2.example.com, port descr eth1
    assert by_end["ns-1:eth0"]["lldp"] == f"{lldp / 'ns-1.json'}, line 1"
    assert {e["view"]: e["source"] for e in rc["evidence"] if "view" in e} == {"declared": str(declared),
                                                                               "lldp": str(lldp)}
    assert [j["job_id"] for j in inc["affected_jobs"]] == ["42"]
    assert inc["opened_at"] == inc["detected_at"] and inc["opened_at"] < "2025-11-29T07:06:45"  # the first tick
    _replay(tmp_path, telemetry, declared, "--lldp", str(lldp))  # replayed again: the same incident
    assert [i["id"] for i in stored_incidents(db)] == [inc["id"]]
    with running_server(db_url=f"sqlite:///{db}", auth="none") as base:
        got = httpx.get(f"{base}/incidents", params={"cause": "link_miswired"})
        assert got.status_code == 200 and [i["id"] for i in got.json()] == [inc["id"]]
        spec = httpx.get(f"{base}/openapi.json").json()
        [cause] = [p for p in spec["paths"]["/incidents"]["get"]["parameters"] if p["name"] == "cause"]
        assert "link_miswired" in json.dumps(cause["schema"]) and "extension" in cause["description"]


def test_replay_opens_nothing_when_lldp_agrees_or_is_not_given(tmp_path):
    for run in ("agrees", "not_given"):
        (tmp_path / run).mkdir()
    lldp, declared, telemetry = _fabric(tmp_path / "agrees", declared_peer="eth1")
    assert _replay(tmp_path / "agrees", telemetry, declared, "--lldp", str(lldp))[0] == []
    _, declared, telemetry = _fabric(tmp_path / "not_given", declared_peer="eth0")
    assert _replay(tmp_path / "not_given", telemetry, declared)[0] == []  # miswired, but no survey given


def test_a_worker_started_with_lldp_opens_the_incident_at_its_first_tick(tmp_path, air):
    lldp = _write_dir(tmp_path / "lldp", lldp_docs(air, cables=_moved(air, "gpu001:eth0--leaf01:swp1", "swp30")))
    settings = dataclasses.replace(_worker(["--lldp", str(lldp)]), db_url=f"sqlite:///{tmp_path}/w.db",
                                   web_port=_free_port(), data_dir=tmp_path)
    stage = _run(settings, "correlate", encode_batch([StageEvent(TICK, T0, "fabric.telemetry:0")]),
                 f"correlate:{settings.symptoms_topic}")
    [inc] = stage.correlator.cabling.open.values()
    assert inc.root_causes[0].entity.id == "gpu001:eth0--leaf01:swp1" and inc.detected_at == T0
    assert stage.correlator.opened == 1
