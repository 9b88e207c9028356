"""Mappings as data: each shipped mapping turns its real sample into a contract record;
the loader names what is wrong in a file; DetectStage counts what it mapped."""
from __future__ import annotations

from pathlib import Path

import pytest

from testkit.samples import samples_dir
from engine import mapping
from engine.mapping import MappingError, load_file, load_mappings, shipped_files
from engine.normalize import parse_line

SAMPLES = samples_dir()
needs_samples = pytest.mark.skipif(not SAMPLES.is_dir(), reason="no real samples on this machine")
SHIPPED = load_mappings(shipped_files())


def _records(path: Path, *, host: str | None = None, edit=lambda line: line):
    """The sample's records (Telegraf adds `host` unless told not to; the README examples
    leave it out, so a test adds it where the sample has none)."""
    out = []
    for line in path.read_text().splitlines():
        if not line.strip() or "io_await:" in line:  # (the diskio README's typo lines)
            continue
        line = edit(line)
        if host and ",host=" not in line:
            name, _, rest = line.partition(",")
            line = f"{name},host={host},{rest}"
        metrics, rejects = parse_line(line)
        assert rejects == [], rejects
        out.extend(metrics)
    return out


def _mapped(metrics):
    return [SHIPPED.map(m) for m in metrics]


@needs_samples
def test_ethtool_of_an_mlx5_nic_is_a_nic_port_and_other_drivers_stay_ignored():
    path = SAMPLES / "ethtool/telegraf_readme_example_output.lp"
    [(m, name)] = _mapped(_records(path, edit=lambda s: s.replace("driver=igb", "driver=mlx5_core")))
    assert name == "telegraf_ethtool_mlx5" and m.name == "nic_port"
    assert m.tags == {"driver": "mlx5_core", "host": "test01", "interface": "mgmt0"}
    assert m.fields["rx_bytes"] == 2480280632 and m.fields["tx_packets"] == 1257017 and m.fields["link"] == "up"
    assert m.series == "nic_port|driver=mlx5_core|host=test01|interface=mgmt0"
    assert _mapped(_records(path)) == [None]  # igb: a management port, not the fabric


@needs_samples
def test_infiniband_two_halves_are_nic_port_with_device_and_port():
    halves = _mapped(_records(SAMPLES / "infiniband/telegraf_readme_example_output.lp"))
    assert [n for _, n in halves] == ["telegraf_infiniband"] * 2
    (a, _), (b, _) = halves
    assert a.name == b.name == "nic_port" and a.series == b.series  # one series: the reorderer merges them
    assert a.tags == {"device": "mlx5_bond_0", "host": "hop-r640-12", "port": "1", "interface": "mlx5_bond_0"}
    assert a.fields["tx_bytes"] == 85378896588 * 4 and a.fields["rx_packets"] == 34914071
    assert a.fields["link_down_events_phy"] == 0 and "port_xmit_data" not in a.fields
    assert b.fields["np_cnp_sent"] == 0 and b.fields["rp_cnp_handled"] == 0 and b.fields["out_of_sequence"] == 0


def test_an_infiniband_alias_names_the_netdev(tmp_path):
    f = tmp_path / "ib.yaml"
    f.write_text("mappings:\n- name: my_ib\n  match: {measurement: infiniband}\n  to: nic_port\n"
                 "  tags:\n    host: [host]\n    interface: {from: [device], aliases: {mlx5_0: eth2}, keep: true}\n")
    mine = load_mappings([f] + shipped_files())
    [m], _ = parse_line("infiniband,device=mlx5_0,host=gpu01,port=1 np_cnp_sent=3i 1737652060000000000")
    out, name = mine.map(m)
    assert name == "my_ib" and out.tags["interface"] == "eth2" and out.tags["device"] == "mlx5_0"


@needs_samples
def test_diskio_is_storage_of_kind_disk():
    mapped = _mapped(_records(SAMPLES / "diskio/telegraf_readme_example_output.lp", host="stor01"))
    assert {n for _, n in mapped} == {"telegraf_diskio"} and len(mapped) == 3
    m = mapped[0][0]
    assert m.name == "storage" and m.tags == {"host": "stor01", "name": "sda1", "kind": "disk"}
    assert m.fields["read_bytes"] == 31350272 and m.fields["io_time"] == 1271 and m.fields["iops_in_progress"] == 0


@needs_samples
def test_gnmi_openconfig_counters_are_a_switch_port_of_the_source_device():
    [(m, name)] = _mapped(_records(SAMPLES / "gnmi/testcase_issue_14530_expected.lp"))
    assert name == "gnmi_openconfig_interfaces"
    assert m.name == "switch_port" and m.tags == {"host": "127.0.0.1", "interface": "Ethernet35"}
    assert m.fields["if_in_octets"] == 0 and m.fields["if_in_errors"] == 0 and "in_octets" not in m.fields


@needs_samples
def test_gnmi_of_older_telegraf_with_hyphens_and_a_collector_host():
    mapped = _mapped(_records(SAMPLES / "gnmi/telegraf_readme_example_output.lp"))
    (m, _), (n, _) = mapped
    assert m.tags["host"] == "10.49.234.115" and m.tags["interface"] == "MgmtEth0/RP0/CPU0/0"
    assert n.tags["interface"] == "GigabitEthernet0/0/0/0" and "if_out_octets" in m.fields


def test_gnmi_oper_status_and_carrier_transitions():
    line = ("ifcounters,host=collector,name=Ethernet1,path=/interfaces/interface/state,source=leaf01:6030 "
            'oper_status="DOWN",carrier_transitions="7",in_octets="123" 1704442117721474264')
    [m], _ = parse_line(line)
    out, _ = SHIPPED.map(m)
    assert out.tags == {"host": "leaf01", "interface": "Ethernet1"}
    assert out.fields == {"oper_status": "down", "carrier_changes": 7, "if_in_octets": 123}


@needs_samples
def test_snmp_if_mib_is_a_switch_port_of_the_agent():
    metrics = _records(SAMPLES / "snmp/telegraf_readme_example_output.lp")
    mapped = _mapped(metrics)
    assert mapped[0] is None  # measurement `snmp` (sysUpTime): not a port
    m, name = mapped[2]
    assert name == "snmp_if_mib" and m.name == "switch_port"
    assert m.tags["host"] == "127.0.0.1" and m.tags["interface"] == "eth0"
    assert m.fields["oper_status"] == "up" and m.fields["admin_status"] == "up" and m.fields["if_in_errors"] == 0
    [x], _ = parse_line("interface,agent_host=10.0.0.1:161,ifName=swp1 ifHCInOctets=5i,ifOperStatus=2i,"
                        "ifHighSpeed=100000i 1575509815000000000")
    out, _ = SHIPPED.map(x)
    assert out.tags == {"host": "10.0.0.1", "interface": "swp1"}
    assert out.fields == {"if_in_octets": 5, "oper_status": "down", "speed_mbps": 100000}


@needs_samples
def test_gnmic_event_arrays_are_mapped_like_gnmi():
    metrics, rejects = parse_line((SAMPLES / "gnmic/gnmic_event_format_processor_doc_excerpt.json").read_bytes())
    assert rejects == [] and len(metrics) == 4
    assert metrics[1].fields == {"in_octets": 35284165} and metrics[1].tags["path"] == "/interface/statistics"
    mapped = _mapped(metrics)
    assert {n for _, n in mapped} == {"gnmic_srlinux_interfaces"}
    m = mapped[1][0]
    assert m.name == "switch_port" and m.tags == {"host": "clab-traps-srl1", "interface": "mgmt0"}
    assert m.fields == {"if_in_octets": 35284165}
    assert mapped[2][0].fields == {"if_in_ucast_pkts": 338985}
    [other], _ = parse_line((SAMPLES / "gnmic/gnmic_event_format_output_intro.json").read_bytes())
    assert other.tags["host"] == "172.17.0.100" and SHIPPED.map(other) is None  # /configure/system: no port


def test_gnmic_openconfig_paths_with_keys():
    doc = ('[{"name":"oc","timestamp":1710890476202665500,"tags":{"source":"leaf01:57400","interface_name":"swp1"},'
           '"values":{"/interfaces/interface[name=swp1]/state/counters/in-octets":"42",'
           '"openconfig-interfaces:/interfaces/interface[name=swp1]/state/counters/in-errors":1}}]')
    [m], rejects = parse_line(doc)
    assert rejects == [] and m.tags["path"] == "/interfaces/interface/state/counters"
    out, name = SHIPPED.map(m)
    assert name == "gnmic_openconfig_interfaces" and out.tags == {"host": "leaf01", "interface": "swp1"}
    assert out.fields == {"if_in_octets": 42, "if_in_errors": 1}


def test_bad_gnmic_events_are_rejected_each():
    metrics, rejects = parse_line('[{"name":"s","values":{}},{"name":"s","timestamp":1,"tags":{"source":"a"},'
                                  '"values":{"/a/b":1}}, 3]')
    assert metrics == [] and [r.reason for r in rejects] == ["bad_gnmic_event", "bad_timestamp", "bad_gnmic_event"]


def test_shipped_files_check_clean():
    assert len(SHIPPED) >= 7 and all(m.to in ("switch_port", "switch_queue", "nic_port", "storage") for m in SHIPPED.mappings)


@pytest.mark.parametrize("text, message", [
    ("mappings: 3", "top-level 'mappings:' list"),
    ("mappings: [{name: x, match: {measurement: m}, to: nic_prot, tags: {host: [h], interface: [i]}}]",
     "did you mean 'nic_port'"),
    ("mappings: [{name: x, match: {measurement: m}, to: nic_port, tags: {host: [h]}}]", "needs tag(s) interface"),
    ("mappings: [{name: x, match: {measurement: m}, to: storage, tags: {host: [h]}, fields: {a: red_bytes}}]",
     "'red_bytes' is not a field of storage (did you mean 'read_bytes'?)"),
    ("mappings: [{name: x, match: {measurement: m}, to: storage, tags: {host: [h]}, fields: {a: {to: read_time, convert: x}}}]",
     "fields.a.convert: one of seconds_to_ms"),
    ("mappings: [{name: x, match: {measurement: m, tags: {a: '('}}, to: storage, tags: {host: [h]}}]",
     "match.tags.a: not a regular expression"),
    ("mappings: [{name: x, match: {measurement: m}, to: storage, tags: {host: [h]}, colour: red}]", "colour: unknown key"),
    ("mappings: [{name: X, to: storage}]", "name: required"),
    ("mappings: [{name: x, to: storage, tags: {host: [h]}}]", "match: required"),
    ("mappings: [{", "not valid YAML"),
    ("mappings: [{name: x, match: {measurement: m, fields: '('}, to: storage, tags: {host: [h]}}]",
     "match.fields: not a regular expression"),
    ("mappings: [{name: x, match: {measurement: m}, value_fields: counter, to: storage, tags: {host: [h]}}]",
     "value_fields: a list of field names"),
    ("mappings: [{name: x, match: {measurement: m, field: a}, to: storage, tags: {host: [h]}}]",
     "match: unknown key 'field'"),
])
def test_the_loader_names_what_is_wrong(tmp_path, text, message):
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(MappingError) as err:
        load_file(f)
    assert message in str(err.value) and str(f) in str(err.value)


def test_duplicate_names_across_files_are_refused(tmp_path):
    with pytest.raises(MappingError, match="duplicate mapping name"):
        load_mappings(shipped_files() + shipped_files())


def test_env_folders_come_first(tmp_path, monkeypatch):
    (tmp_path / "disk.yaml").write_text("mappings:\n- name: my_disk\n  match: {measurement: diskio}\n  to: storage\n"
                                        "  tags: {host: [host], name: [name]}\n  set_tags: {kind: nvmf}\n"
                                        "  fields: {rtime: {to: read_time, convert: seconds_to_ms}}\n")
    monkeypatch.setenv(mapping.ENV, str(tmp_path))
    [m], _ = parse_line("diskio,host=s1,name=nvme0 rtime=1.5 1578326400000000000")
    out, name = mapping.default_mappings().map(m)
    assert name == "my_disk" and out.tags["kind"] == "nvmf" and out.fields == {"read_time": 1500.0}


def test_detect_stage_counts_mapped_records_and_leaves_contract_ones_alone():
    from engine.pipeline import DetectStage
    from rules.loader import load_rules
    stage = DetectStage(rules=load_rules(None), roles={})
    base = 1764400000
    for i in range(12):
        ts = (base + i) * 10**9
        stage.feed(f"ifcounters,host=c,name=swp1,path=/interfaces/interface/state/counters,source=leaf01 "
                   f"in_octets={i * 1000}u {ts}".encode())
        stage.feed(f"bogus,host=h v=1i {ts}".encode())
        stage.feed(('{"name":"switch_port","tags":{"host":"leaf02","interface":"swp1"},"fields":{"if_in_octets":%d},'
                    '"timestamp":%d}' % (i, base + i)).encode())
    stage.finish()
    summary = stage.stats.summary()
    assert summary["mapped"] == {"gnmi_openconfig_interfaces": 12}
    assert summary["ignored_measurements"] == {"bogus": 12} and summary["rejected"] == 0
    assert any(s.startswith("switch_port|host=leaf01|interface=swp1") for s in stage.detector.extractor.series)


def test_replay_of_line_protocol_with_a_mappings_folder(tmp_path, capsys, monkeypatch):
    import json

    from cli.main import main
    monkeypatch.setenv(mapping.ENV, "")  # (restored after: main sets it for its process)
    (tmp_path / "maps").mkdir()
    (tmp_path / "maps" / "ib.yaml").write_text(
        "mappings:\n- name: site_ib\n  match: {measurement: infiniband}\n  to: nic_port\n"
        "  tags:\n    host: [host]\n    interface: {from: [device], aliases: {mlx5_0: eth0}, keep: true}\n")
    base = 1764400000
    lines = []
    for i in range(20):
        ts = (base + i) * 10**9
        lines.append(f"infiniband,device=mlx5_0,host=gpu001,port=1 np_cnp_sent={i}i {ts}")
        lines.append(f"ethtool,driver=mlx5_core,host=gpu001,interface=eth1 rx_bytes={i * 10}i,link=1i {ts}")
        lines.append(f"ethtool,driver=igb,host=gpu001,interface=mgmt0 rx_bytes={i}i {ts}")
    tel = tmp_path / "t.lp"
    tel.write_text("\n".join(lines) + "\n")
    code = main(["replay", str(tel), "--topology", str(Path(__file__).parent / "data" / "air.dot"),
                 "--db", str(tmp_path / "x.db"), "--rejects", str(tmp_path / "r.jsonl"), "--json", "--quiet",
                 "--mappings", str(tmp_path / "maps")])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["rejected"] == 0
    assert summary["mapped"] == {"site_ib": 20, "telegraf_ethtool_mlx5": 20}
    assert summary["ignored_measurements"] == {"ethtool": 20}


def test_mappings_check_command(tmp_path, capsys):
    from cli.main import main
    assert main(["mappings", "check"]) == 0 and "ok: " in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    bad.write_text("mappings: [{name: x, match: {measurement: m}, to: storage, tags: {host: [h]}, fields: {a: b}}]")
    assert main(["mappings", "check", str(bad)]) == 2
    assert "'b' is not a field of storage" in capsys.readouterr().err


@needs_samples
def test_sonic_counters_db_ports_through_gnmic():
    import json
    db = json.loads((SAMPLES / "sonic/counters_db_excerpt.json").read_text())
    counters = db["COUNTERS:" + db["COUNTERS_PORT_NAME_MAP"]["Ethernet0"]]  # the real hash of Ethernet0
    event = {"name": "sonic", "timestamp": 1516668828794942666, "tags": {"source": "leaf01:8080"},
             "values": {f"/COUNTERS/Ethernet0/{k}": v for k, v in counters.items()}}
    [m], rejects = parse_line(json.dumps([event]))
    assert rejects == [] and m.tags["path"] == "/COUNTERS/Ethernet0"
    out, name = SHIPPED.map(m)
    assert name == "sonic_counters_db_ports" and out.tags == {"host": "leaf01", "interface": "Ethernet0"}
    assert out.fields["if_in_octets"] == 800 and out.fields["if_in_errors"] == 10
    assert out.fields["pfc_0_rx_pkts"] == 1200 and isinstance(out.fields["if_out_octets"], int)


def test_a_tag_pattern_without_a_group_is_refused(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("mappings:\n- name: p\n  match: {measurement: m}\n  to: switch_port\n"
                 "  tags: {host: [h], interface: {from: [path], pattern: 'x'}}\n")
    with pytest.raises(MappingError, match="interface.pattern: needs a group"):
        load_file(f)


def test_two_tables_of_one_interface_merge_as_halves_after_mapping():
    from engine.pipeline import DetectStage
    from rules.loader import load_rules
    stage = DetectStage(rules=load_rules(None), roles={})
    base = 1764400000
    for i in range(10):
        ts = (base + i) * 10**9
        stage.feed(f"interface,agent_host=10.0.0.1,ifIndex=3,ifName=swp1 ifInErrors={i}i,ifOperStatus=1i {ts}".encode())
        stage.feed(f"ifXTable,agent_host=10.0.0.1,ifName=swp1 ifHCInOctets={i * 100}i {ts}".encode())
    stage.finish()
    assert stage.stats.mapped == {"snmp_if_mib": 20} and stage.stats.merged == 10
    assert [s for s in stage.detector.extractor.series if s.startswith("switch_port")] == \
        ["switch_port|host=10.0.0.1|interface=swp1"]
