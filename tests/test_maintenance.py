"""Maintenance windows: which root causes a window or an admin-down port covers (pure,
property-tested), incidents marked in a replay and not notified, and the windows'
API and CLI on every backend, restored on restart."""
from __future__ import annotations

import dataclasses
import gzip
import json

import httpx
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from compose import EngineSettings, build_engine, new_pipeline
from engine.maintenance import StaticWindows, Window, admin_down_reason, scope, window_reason
from engine.replay import replay
from engine.types import Entity

T0 = 1_764_400_000.0
LINK = Entity("link", "gpu006:eth0--leaf02:swp2")


def test_a_window_on_a_device_covers_its_ports_and_links_and_nothing_else():
    assert scope(LINK) == {LINK.id, "gpu006:eth0", "leaf02:swp2", "gpu006", "leaf02"}
    assert scope(Entity("interface", "leaf02:swp2"), peer={"leaf02:swp2": "gpu006:eth0"}.get) == \
        {"leaf02:swp2", "gpu006:eth0", "leaf02", "gpu006"}
    assert scope(Entity("switch", "leaf02")) == {"leaf02"}
    assert scope(Entity("job", "4242")) == {"4242"}


def test_a_window_counts_only_for_incidents_opening_inside_it():
    w = Window(id="3", entity="leaf02", start=T0, end=T0 + 600, note="optics swap")
    assert window_reason(LINK, T0 + 10, [w]) == \
        "maintenance window 3 on leaf02 until 2025-11-29T07:16:40.000Z: optics swap"
    assert window_reason(LINK, T0 - 1, [w]) is None and window_reason(LINK, T0 + 601, [w]) is None
    assert window_reason(Entity("switch", "leaf03"), T0 + 10, [w]) is None


def test_an_admin_down_port_covers_its_link_and_its_peer():
    assert admin_down_reason(LINK, {"leaf02:swp2"}) == "leaf02:swp2 admin-down"
    assert admin_down_reason(Entity("interface", "gpu006:eth0"), {"leaf02:swp2"},
                             peer={"gpu006:eth0": "leaf02:swp2"}.get) == "leaf02:swp2 admin-down"
    assert admin_down_reason(Entity("switch", "leaf02"), {"leaf02:swp2"}) is None


_names = st.sampled_from(["leaf01", "leaf02", "spine01", "gpu001", "gpu002"])
_ports = st.sampled_from(["swp1", "swp2", "eth0"])


@given(_names, _ports, _names, _ports, _names)
def test_a_device_window_covers_a_link_exactly_when_one_end_is_on_that_device(d1, p1, d2, p2, device):
    link = Entity("link", "--".join(sorted((f"{d1}:{p1}", f"{d2}:{p2}"))))
    w = Window(id="1", entity=device, start=0, end=10)
    assert (window_reason(link, 5, [w]) is not None) == (device in (d1, d2))


def _replay(folder, *, telemetry=None, windows=()):
    parts = build_engine(EngineSettings(topology=folder / "topology.dot", jobs_file=folder / "jobs.jsonl"))
    pipeline = new_pipeline(dataclasses.replace(parts, maintenance=StaticWindows(tuple(windows))))
    latest: dict[str, dict] = {}
    replay(pipeline, [telemetry or folder / "telemetry.jsonl.gz"], sink=lambda ch: latest.update({i["id"]: i for i in ch}))
    return list(latest.values())


@pytest.mark.slow
def test_a_fault_inside_a_window_is_kept_and_marked(scenario_dir):
    folder = scenario_dir("link_flap")
    plain = _replay(folder)
    assert [i["maintenance"] for i in plain] == [False] and plain[0]["maintenance_reason"] is None
    marked = _replay(folder, windows=[Window(id="9", entity="leaf02", start=T0 + 100, end=T0 + 200)])
    assert [i["root_causes"][0]["entity"]["id"] for i in marked] == [LINK.id]  # the same incident, kept
    assert marked[0]["id"] == plain[0]["id"] and marked[0]["maintenance"] is True
    assert marked[0]["maintenance_reason"].startswith("maintenance window 9 on leaf02")
    elsewhere = _replay(folder, windows=[Window(id="9", entity="leaf03", start=T0, end=T0 + 300)])
    assert [i["maintenance"] for i in elsewhere] == [False]


@pytest.mark.slow
def test_a_port_reporting_admin_down_puts_its_link_in_maintenance_without_a_window(scenario_dir, tmp_path):
    """The operator bounces leaf02:swp2 (admin down during the flaps): no window, still marked."""
    folder = scenario_dir("link_flap")
    bounced = tmp_path / "telemetry.jsonl.gz"
    with gzip.open(folder / "telemetry.jsonl.gz", "rb") as src, gzip.open(bounced, "wb") as out:
        for line in src:
            rec = orjson.loads(line)
            if rec["name"] == "switch_port" and rec["tags"] == {"host": "leaf02", "interface": "swp2"} \
                    and T0 + 115 <= rec["timestamp"] / 1000 <= T0 + 170:
                rec["fields"]["admin_status"] = "down"
            out.write(orjson.dumps(rec) + b"\n")
    incidents = _replay(folder, telemetry=bounced)
    assert [(i["root_causes"][0]["entity"]["id"], i["maintenance"], i["maintenance_reason"]) for i in incidents] == \
        [(LINK.id, True, "leaf02:swp2 admin-down")]


@pytest.mark.slow
def test_replay_reads_the_stored_windows_and_notifies_nothing_in_them(scenario_dir, tmp_path, capsys):
    """`fabric-rca replay` with a window stored in its --db: the incident is stored marked,
    and neither the webhook nor Alertmanager's address hears of it."""
    from cli.main import main
    from testkit.alertmanager import Receiver

    folder, db = scenario_dir("link_flap"), f"sqlite:///{tmp_path / 'rca.db'}"
    assert main(["maintenance", "add", "--entity", "gpu006", "--from", str(T0), "--until", str(T0 + 3600),
                 "--db", db]) == 0
    receiver = Receiver()
    try:
        (tmp_path / "secret").write_text("k")
        assert main(["replay", str(folder / "telemetry.jsonl.gz"), "--topology", str(folder / "topology.dot"),
                     "--jobs", str(folder / "jobs.jsonl"), "--db", db, "--quiet", "--rejects", str(tmp_path / "r"),
                     "--webhook", receiver.url + "/hook", "--webhook-secret-file", str(tmp_path / "secret"),
                     "--alertmanager", receiver.url + "/am"]) == 0
        assert receiver.requests == []
    finally:
        receiver.close()
    capsys.readouterr()
    assert main(["incidents", "--db", db, "--format", "json"]) == 0
    stored = json.loads(capsys.readouterr().out)
    assert [(i["maintenance"], i["maintenance_reason"].split(" until ")[0]) for i in stored] == \
        [(True, "maintenance window 1 on gpu006")]


# ------------------------------------------------------------------ API and CLI


def test_windows_through_the_api_with_clear_errors_and_restored_on_restart(db_url):
    from api.server import running_server

    with running_server(db_url=db_url, auth="none") as url:
        made = httpx.post(f"{url}/maintenance", json={"entity": "leaf03", "from": "2025-11-29T07:00:00Z",
                                                      "until": "2025-11-29T09:00:00+01:00", "note": "reboot"})
        assert made.status_code == 201, made.text
        window = made.json()
        assert window | {"created_at": "-"} == {"id": window["id"], "entity": "leaf03",
                                                "from": "2025-11-29T07:00:00.000Z", "until": "2025-11-29T08:00:00.000Z",
                                                "note": "reboot", "created_at": "-"}
        bad = {"entity": "leaf03", "from": "2025-11-29T07:00:00Z", "until": "2025-11-29T06:00:00Z"}
        for body, field, words in [
            (bad, "until", "must be after from"),
            (bad | {"from": "yesterday"}, "from", "RFC 3339"),
            ({k: v for k, v in bad.items() if k != "entity"}, "entity", "Field required"),
            (bad | {"entity": "leaf\x0003"}, "entity", "control characters"),
        ]:
            r = httpx.post(f"{url}/maintenance", json=body)
            assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", field], r.text
            assert words in r.json()["detail"][0]["msg"]
        assert httpx.delete(f"{url}/maintenance/999").json() == {"detail": "no maintenance window with id 999"}
        assert httpx.delete(f"{url}/maintenance/x").status_code == 422
    with running_server(db_url=db_url, auth="none") as url:  # a new server on the same store
        assert [w["id"] for w in httpx.get(f"{url}/maintenance").json()] == [window["id"]]
        assert httpx.delete(f"{url}/maintenance/{window['id']}").status_code == 204
        assert httpx.get(f"{url}/maintenance").json() == []


def test_windows_through_the_cli(db_url, capsys):
    from cli.main import main

    assert main(["maintenance", "add", "--entity", "leaf03", "--from", "1764400000", "--until",
                 "2025-11-29T08:00:00Z", "--note", "optics", "--db", db_url, "--format", "json"]) == 0
    window = json.loads(capsys.readouterr().out)
    assert window["from"] == "2025-11-29T07:06:40.000Z" and window["note"] == "optics"
    assert main(["maintenance", "list", "--db", db_url]) == 0
    assert "leaf03" in capsys.readouterr().out
    assert main(["maintenance", "add", "--entity", "leaf03", "--from", "soon", "--until", "1", "--db", db_url]) == 2
    assert "--from: from must be an RFC 3339 time" in capsys.readouterr().err
    assert main(["maintenance", "delete", "77", "--db", db_url]) == 2
    assert "no maintenance window with id 77" in capsys.readouterr().err
    assert main(["maintenance", "delete", str(window["id"]), "--db", db_url]) == 0
    assert main(["maintenance", "list", "--db", db_url]) == 0
    assert "no maintenance windows" in capsys.readouterr().out


def test_admin_down_ports_survive_a_checkpoint_and_join_no_incident():
    import msgspec

    from engine.correlate import Correlator, CorrelatorState
    from engine.jobs import JobBook
    from engine.topology import Topology
    from engine.types import Symptom

    topo = Topology.from_links(roles={"leaf02": "leaf", "gpu006": "host"}, links=[("gpu006:eth0", "leaf02:swp2")])
    down = Symptom(key="port_admin_down@leaf02:swp2@1", kind="admin_down", family="maintenance",
                   entity=Entity("interface", "leaf02:swp2"), device="leaf02", start=T0, last=T0, rule="port_admin_down")

    def correlator() -> Correlator:
        return Correlator(topology=topo, jobs=JobBook(), opens_incident=lambda rule: rule != "port_admin_down")

    c = correlator()
    c.add(down)
    c.advance(T0 + 5)
    assert c.open == {} and c.home == {} and list(c.admin_down) == ["leaf02:swp2"]
    wire = msgspec.msgpack.encode(c.snapshot())  # the checkpoint's layout, through its codec's format
    restored = correlator()
    restored.restore(msgspec.msgpack.decode(wire, type=CorrelatorState))
    assert restored.admin_down == c.admin_down
    restored.add(dataclasses.replace(down, end=T0 + 9, last=T0 + 9))  # the port is back up
    assert restored.admin_down == {}
