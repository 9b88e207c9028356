"""Topologies as operators have them: real Air and containerlab files (shared/real-samples),
lldpctl JSON neighbours, and the cross-check of a declared topology against them.

Expected figures are read off the sample files by hand (see each test)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from cli.main import main
from engine.topology import Topology, TopologyError, load_topology
from engine.topology_check import cross_check
from engine.topology_load import read_spec
from testkit.samples import samples_dir

SAMPLES = samples_dir()
TOPO = SAMPLES / "topology"
DATA = Path(__file__).parent / "data"


def _counts(topo: Topology) -> dict[str, int]:
    return {r: n for r in ("superspine", "spine", "leaf", "host", "storage") if (n := len(topo.devices(r)))}


# ---------------------------------------------------------------------- Air DOT


def test_air_internet_and_oob_are_left_out_with_a_warning():
    # cldemo-vagrant: 4 leaves + 2 exits (leaf), 2 spines, server01-04 + edge01, and
    # internet / oob-mgmt-switch / oob-mgmt-server with 2 + 16 links (one of them shared).
    topo = load_topology(TOPO / "air_cldemo-vagrant_topology.dot")
    assert _counts(topo) == {"spine": 2, "leaf": 6, "host": 5}
    assert topo.excluded == {"internet": 'function="internet"', "oob-mgmt-switch": 'function="oob-switch"',
                             "oob-mgmt-server": 'function="oob-server"'}
    assert not set(topo.excluded) & set(topo.graph)
    assert not topo.has_interface("exit01:swp44") and not topo.has_interface("server01:eth0")
    assert len(topo.links()) == 42
    [warning] = topo.warnings
    assert "left out of the data fabric with their 17 link(s)" in warning
    assert all(name in warning for name in ("internet", "oob-mgmt-switch", "oob-mgmt-server"))
    # server01 (leaf01/02) to server03 (leaf03/04): through the spines, never the internet device.
    assert topo.distance("server01", "server03") == 4
    assert {link.split("--")[0].split(":")[0] for link in topo.ecmp_links("server01", "server03")} <= {
        "leaf01", "leaf02", "leaf03", "leaf04", "server01", "server03"}


def test_air_fake_placeholder_is_not_a_host():
    # na-son: "air-internal" [function="fake"] holds 106 uncabled spine/leaf ports.
    topo = load_topology(TOPO / "air_na-son_nvidia-air_topology.dot")
    assert topo.excluded == {"air-internal": 'function="fake"'}
    assert _counts(topo) == {"spine": 2, "leaf": 6, "host": 8}
    assert not topo.has_interface("spine-a:swp7")
    assert "with their 106 link(s)" in topo.warnings[0]
    assert "role guessed from the name: nix (host), compute-0-0 (host)" in topo.warnings[1]


def test_air_samples_without_guesses_load_quietly():
    topo = load_topology(TOPO / "air_tomerlior_academy_topology.dot")
    assert _counts(topo) == {"spine": 2, "leaf": 2, "host": 4} and topo.warnings == () and topo.excluded == {}


def test_air_unknown_function_is_still_refused_and_says_what_is_accepted(tmp_path):
    path = tmp_path / "r.dot"
    path.write_text('graph g {\n "r1" [function="router"]\n}\n')
    with pytest.raises(TopologyError, match=r"r.dot, line 2: device r1: unknown function 'router' .*internet"):
        load_topology(path)


# ---------------------------------------------------------------- containerlab

CLAB = [
    ("clab_clos01_clos01.clab.yml", {"spine": 1, "leaf": 2, "host": 2}, []),
    ("clab_clos02_clos02.clab.yml", {"superspine": 2, "spine": 4, "leaf": 4, "host": 4}, []),
    ("clab_cvx02_topo.clab.yml", {"leaf": 1, "host": 1}, ["sw1 (cumulus_cvx)"]),
    ("clab_cvx03_topo.clab.yml", {"spine": 2, "leaf": 4, "host": 1}, []),  # border-N: leaf by name
    ("clab_sonic01_sonic01.clab.yml", {"leaf": 2}, ["srl (nokia_srlinux)", "sonic (sonic-vs)"]),
    ("clab_srl-telemetry-lab_st.clab.yml", {"spine": 2, "leaf": 3, "host": 8}, []),  # kind from defaults
    ("clab_srlceos01_srlceos01.clab.yml", {"leaf": 2}, ["srl (nokia_srlinux)", "ceos (arista_ceos)"]),
]


@pytest.mark.parametrize(("name", "counts", "guessed"), CLAB, ids=[c[0] for c in CLAB])
def test_containerlab_kinds_give_roles(name, counts, guessed):
    topo = load_topology(TOPO / name)
    assert _counts(topo) == counts
    text = "\n".join(topo.warnings)
    assert all(g in text for g in guessed)
    assert bool(topo.warnings) == bool(guessed)
    if guessed:
        assert "tier guessed as leaf" in text


def _lab(tmp_path, nodes: dict, links: list, **topology) -> Topology:
    path = tmp_path / "lab.clab.yml"
    path.write_text(yaml.safe_dump({"name": "t", "topology": {"nodes": nodes, "links": links, **topology}}))
    return load_topology(path)


def test_containerlab_labels_and_groups_win_over_kinds(tmp_path):
    topo = _lab(tmp_path, {
        "frr1": {"kind": "linux", "labels": {"role": "spine"}},
        "sw9": {"kind": "ceos", "group": "spine"},
        "n1": {"labels": {"role": "host"}},  # kind from defaults: srl, but the label wins
        "br1": {"kind": "bridge", "labels": {"role": "leaf"}},
    }, [], defaults={"kind": "srl"})
    assert {d: topo.role(d) for d in topo.devices()} == {"frr1": "spine", "sw9": "spine", "n1": "host", "br1": "leaf"}
    assert topo.warnings == ()


def test_containerlab_guesses_are_warnings_and_bridges_are_left_out(tmp_path):
    topo = _lab(tmp_path, {
        "spine1": {"kind": "linux"}, "r1": {"kind": "vr-sros"}, "x1": {"kind": "keysight_ixia-c-one"},
        "leaf1": {"kind": "nokia_srlinux"}, "br": {"kind": "bridge"},
    }, [{"endpoints": ["leaf1:e1-1", "br:eth1"]}, {"endpoints": ["leaf1:e1-2", "r1:eth1"]}])
    assert {d: topo.role(d) for d in topo.devices()} == {"spine1": "spine", "r1": "leaf", "x1": "host", "leaf1": "leaf"}
    assert topo.excluded == {"br": "kind=bridge"} and topo.links() == ["leaf1:e1-2--r1:eth1"]
    text = "\n".join(topo.warnings)
    assert "br (kind=bridge)" in text and "r1 (vr-sros)" in text and "spine1 (spine)" in text
    assert "x1 (unknown kind 'keysight_ixia-c-one': host)" in text


# ----------------------------------------------------------------------- lldpctl


def test_lldpctl_sample_is_a_topology(tmp_path):
    # The lldpd test's answer: local eth0 sees chassis ns-2.example.com, port MAC with descr eth1.
    sample = next((SAMPLES / "lldp").glob("*.json"))
    (tmp_path / "ns-1.json").write_text(sample.read_text())
    topo = load_topology(tmp_path)
    assert topo.links() == ["ns-1:eth0--ns-2.example.com:eth1"]
    assert _counts(topo) == {"host": 2}  # ns-2 announces Station only
    assert topo.role("ns-2.example.com") == "host"
    as_file = read_spec(sample)
    assert as_file.links == [(f"{sample.stem}:eth0", "ns-2.example.com:eth1")]


def _entry(peer_dev: str, peer_if: str, *, switch: bool, json0: bool) -> dict:
    caps = [{"type": "Bridge", "enabled": switch}, {"type": "Router", "enabled": False},
            {"type": "Station", "enabled": not switch}]
    if json0:
        return {"chassis": [{"id": [{"type": "mac", "value": "00:00:00:00:00:01"}], "name": [{"value": peer_dev}],
                             "capability": caps}],
                "port": [{"id": [{"type": "ifname", "value": peer_if}], "descr": [{"value": peer_if}]}]}
    return {"via": "LLDP", "rid": "1", "age": "0 day, 00:01:00",
            "chassis": {peer_dev: {"id": {"type": "mac", "value": "00:00:00:00:00:01"}, "capability": caps}},
            "port": {"id": {"type": "ifname", "value": peer_if}, "descr": peer_if, "ttl": "120"}}


def lldp_docs(topo: Topology, *, json0: bool = False, cables: list[tuple[str, str]] | None = None,
              domain: str = "") -> dict[str, dict]:
    """What `lldpctl -f json` (or json0) prints on every device of `topo` (or of `cables`)."""
    pairs = cables if cables is not None else [topo.link_ends(link) for link in topo.links()]
    seen: dict[str, list[tuple[str, str]]] = {d: [] for d in topo.devices()}
    for a, b in pairs:
        for me, peer in ((a, b), (b, a)):
            seen.setdefault(me.split(":")[0], []).append((me.split(":")[1], peer))
    out = {}
    for dev, ports in seen.items():
        entries = []
        for ifname, peer in sorted(ports):
            pdev, pif = peer.split(":", 1)
            body = _entry(pdev + domain, pif, switch=topo.is_switch(pdev), json0=json0)
            entries.append({"name": ifname, **body} if json0 else {ifname: body})
        if json0:
            out[dev] = {"lldp": [{"interface": entries}]}
        else:
            out[dev] = {"lldp": {"interface": entries[0] if len(entries) == 1 else entries}} if entries else {"lldp": {}}
    return out


def _write_dir(folder: Path, docs: dict[str, dict]) -> Path:
    folder.mkdir(exist_ok=True)
    for dev, doc in docs.items():
        (folder / f"{dev}.json").write_text(json.dumps(doc, indent=2))
    return folder


@pytest.fixture(scope="module")
def air() -> Topology:
    return load_topology(DATA / "air.dot")


@pytest.mark.parametrize("json0", [False, True], ids=["json", "json0"])
def test_lldp_of_every_device_gives_back_the_fabric(tmp_path, air, json0):
    topo = load_topology(_write_dir(tmp_path / "lldp", lldp_docs(air, json0=json0, domain=".example.com")))
    assert topo.links() == air.links()  # FQDN chassis names land on the devices that reported
    assert {d: topo.role(d) for d in topo.devices()} == {d: air.role(d) for d in air.devices()}


def test_lldp_concatenated_needs_each_device_named(tmp_path, air):
    docs = lldp_docs(air)
    chassis = lambda dev: {"local-chassis": {"chassis": {dev: {"id": {"type": "mac", "value": "0"}}}}}  # noqa: E731
    text = "".join(json.dumps(chassis(d)) + "\n" + json.dumps(doc, indent=1) + "\n" for d, doc in docs.items())
    path = tmp_path / "all.json"
    path.write_text(text)
    assert load_topology(path).links() == air.links()
    path.write_text("\n".join(json.dumps(doc) for doc in docs.values()))
    with pytest.raises(TopologyError, match=r"all.json, line 1: which device are these neighbours of\?"):
        load_topology(path)
    path.write_text(json.dumps(chassis("a")) + "\n{\"lldp\": {\n")
    with pytest.raises(TopologyError, match=r"all.json, line 3: bad JSON"):
        load_topology(path)


def test_lldp_guesses_roles_and_drops_what_is_not_a_cable(tmp_path):
    cables = [("sw1:swp1", "h1:eth1"), ("sw1:swp2", "sw2:swp2"), ("sw1:eth0", "oob-sw:swp3"), ("sw2:eth0", "sw3:swp9")]
    topo0 = Topology.from_links(roles={"sw1": "leaf", "sw2": "spine", "sw3": "spine", "oob-sw": "leaf"}, links=cables)
    docs = lldp_docs(topo0, cables=cables)
    docs["h1"]["lldp"]["interface"]["eth1"]["port"]["descr"] = "swp1"
    # h1's eth9 hangs on a hub: two neighbours on one port
    docs["h1"]["lldp"]["interface"] = [docs["h1"]["lldp"]["interface"],
                                       {"eth9": _entry("x1", "p1", switch=False, json0=False)},
                                       {"eth9": _entry("x2", "p1", switch=False, json0=False)}]
    topo = load_topology(_write_dir(tmp_path / "l", {d: docs[d] for d in ("sw1", "sw2", "h1")}))
    assert topo.links() == ["h1:eth1--sw1:swp1", "sw1:swp2--sw2:swp2"]
    assert {d: topo.role(d) for d in topo.devices()} == {"h1": "host", "sw1": "leaf", "sw2": "spine"}
    assert topo.excluded == {"oob-sw": "named like the management network"}
    text = "\n".join(topo.warnings)
    assert "sw1 (leaf), sw2 (spine)" in text and "h1:eth9" in text and "sw2:eth0--sw3:swp9" in text


def test_lldp_ends_that_disagree_are_left_out(tmp_path):
    docs = {"leaf1": {"lldp": {"interface": {"swp1": _entry("spine1", "swp1", switch=True, json0=False)}}},
            "spine1": {"lldp": {"interface": {"swp1": _entry("leaf2", "swp1", switch=True, json0=False)}}}}
    topo = load_topology(_write_dir(tmp_path / "d", docs))
    assert topo.links() == []
    assert "leaf1:swp1 sees spine1:swp1, spine1:swp1 sees leaf2:swp1" in "\n".join(topo.warnings)


def test_lldp_refusals_are_specific(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(TopologyError, match="no lldpctl JSON files"):
        load_topology(tmp_path / "empty")
    d = tmp_path / "bad"
    d.mkdir()
    (d / "leaf1.json").write_text('{"devices": []}')
    with pytest.raises(TopologyError, match=r"leaf1.json: not lldpctl JSON"):
        load_topology(d)
    (d / "leaf1.json").write_text('{"lldp": {"interface": [3]}}')
    with pytest.raises(TopologyError, match=r"leaf1.json, line 1: an 'interface' entry is not an object"):
        load_topology(d)
    two = tmp_path / "two.json"
    two.write_text('{"devices": []}\n{"devices": []}\n')
    with pytest.raises(TopologyError, match="2 JSON documents; only lldpctl output"):
        load_topology(two)


# ------------------------------------------------------------------- cross-check


def test_cross_check_finds_missing_extra_and_miswired(tmp_path, air):
    cables = [air.link_ends(link) for link in air.links()]
    cables.remove(("gpu003:eth0", "leaf02:swp1"))  # missing: leaf02 reports, sees nothing on swp1
    cables.remove(("gpu001:eth0", "leaf01:swp1"))  # gpu001 and gpu002 swapped on leaf01
    cables.remove(("gpu002:eth0", "leaf01:swp2"))
    cables += [("gpu001:eth0", "leaf01:swp2"), ("gpu002:eth0", "leaf01:swp1"), ("leaf02:swp40", "leaf03:swp40")]
    docs = lldp_docs(air, cables=cables)
    del docs["gpu006"], docs["leaf03"]  # gpu006:eth0--leaf03:swp2: nobody to see it
    report = cross_check(air, read_spec(_write_dir(tmp_path / "l", docs)))
    assert not report["consistent"]
    assert [m["link"] for m in report["miswired"]] == ["gpu001:eth0--leaf01:swp1", "gpu002:eth0--leaf01:swp2"]
    assert report["miswired"][0]["observed"] == ["gpu001:eth0--leaf01:swp2", "gpu002:eth0--leaf01:swp1"]
    assert report["missing"] == [{"link": "gpu003:eth0--leaf02:swp1", "not_seen_by": ["gpu003", "leaf02"]}]
    assert [e["link"] for e in report["extra"]] == ["leaf02:swp40--leaf03:swp40"]
    assert report["unverified"] == ["gpu006:eth0--leaf03:swp2"]
    s = report["summary"]
    assert s["matching"] + s["miswired"] + s["missing"] + s["unverified"] == s["declared_links"] == 18


def test_cross_check_cli_json_and_exit_codes(tmp_path, air, capsys):
    good = _write_dir(tmp_path / "good", lldp_docs(air))
    assert main(["topology", "check", "--declared", str(DATA / "air.dot"), "--lldp", str(good), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["consistent"] and report["summary"]["matching"] == 18
    cables = [air.link_ends(link) for link in air.links()][1:]
    bad = _write_dir(tmp_path / "bad", lldp_docs(air, cables=cables))
    assert main(["topology", "check", "--declared", str(DATA / "air.dot"), "--lldp", str(bad)]) == 1
    out = capsys.readouterr().out
    assert "1 missing" in out and "missing  gpu001:eth0--leaf01:swp1" in out
    assert main(["topology", "check", "--declared", str(DATA / "air.dot"), "--lldp", str(DATA / "air.dot")]) == 2
    assert "not lldpctl JSON output" in capsys.readouterr().err


def test_cross_check_matches_srlinux_long_names_and_leaves_out_non_fabric(tmp_path):
    declared = load_topology(TOPO / "clab_clos01_clos01.clab.yml")
    cables = [tuple(e.replace("e1-", "ethernet-1/") for e in declared.link_ends(link)) for link in declared.links()]
    report = cross_check(declared, read_spec(_write_dir(tmp_path / "l", lldp_docs(declared, cables=cables))))
    assert report["consistent"] and report["summary"]["matching"] == 4
    cldemo = load_topology(TOPO / "air_cldemo-vagrant_topology.dot")
    cables = [cldemo.link_ends(link) for link in cldemo.links()] + [("exit01:swp44", "internet:swp1")]
    report = cross_check(cldemo, read_spec(_write_dir(tmp_path / "c", lldp_docs(cldemo, cables=cables))))
    assert report["consistent"] and report["non_fabric"][0]["devices"] == ["internet"]


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_cross_check_accounts_for_every_declared_link(tmp_path_factory, air, data):
    cables = [air.link_ends(link) for link in air.links()]
    dropped = data.draw(st.sets(st.integers(0, len(cables) - 1), max_size=5))
    silent = data.draw(st.sets(st.sampled_from(air.devices()), max_size=4))
    kept = [c for i, c in enumerate(cables) if i not in dropped]
    docs = {d: doc for d, doc in lldp_docs(air, cables=kept).items() if d not in silent}
    if not docs:
        return
    report = cross_check(air, read_spec(_write_dir(tmp_path_factory.mktemp("l"), docs)))
    s = report["summary"]
    assert s["matching"] + s["miswired"] + s["missing"] + s["unverified"] == len(cables)
    assert s["miswired"] == s["extra"] == 0
    for i in dropped:
        link = "--".join(cables[i])
        assert link in [m["link"] for m in report["missing"]] + report["unverified"]
    assert report["consistent"] == (s["missing"] == 0)
