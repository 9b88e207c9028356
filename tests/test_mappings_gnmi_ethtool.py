"""The shipped mappings of OpenConfig qos queues (Telegraf inputs.gnmi, gnmic) and of
node_exporter's ethtool collector (through Telegraf's prometheus parser, metric_version 1
and 2), each on a sample in its exporter's shape (tests/data/README.md says where each
comes from), and a fault in each diagnosed by the whole pipeline on the test fabric."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from engine.mapping import load_mappings, shipped_files
from engine.normalize import parse_line
from engine.pipeline import Pipeline
from engine.topology import load_topology
from rules.loader import load_rules

DATA = Path(__file__).parent / "data"
SHIPPED = load_mappings(shipped_files())
T0 = 1764400000 * 10**9


def _records(text: str) -> list:
    out = []
    for line in text.splitlines():
        metrics, rejects = parse_line(line)
        assert rejects == [], rejects
        out += metrics
    return out


def _incidents(lines: list[str]) -> list[dict]:
    pipeline = Pipeline(rules=load_rules(None), topology=load_topology(DATA / "air.dot"))
    for line in lines:
        pipeline.feed(line.encode())
    pipeline.finish()
    assert pipeline.stats.summary()["rejected"] == 0
    return pipeline.changes()


def _causes(incidents: list[dict]) -> set[tuple[str, str]]:
    return {(rc["cause"], rc["entity"]["id"]) for inc in incidents for rc in inc["root_causes"][:1]}


# --- node_exporter's ethtool collector --------------------------------------------------

def _telegraf_lines(version: int) -> list[str]:
    return (DATA / f"node_exporter/mlx5_ethtool_telegraf_v{version}.lp").read_text().splitlines()


@pytest.mark.parametrize("version", [1, 2])
def test_node_ethtool_through_telegraf_is_one_nic_port_with_mlx5_names(version):
    mapped = [SHIPPED.map(m) for m in _records("\n".join(_telegraf_lines(version)))]
    assert all(mapped) and {n for _, n in mapped} == {f"prometheus_v{version}_node_ethtool"}
    by_series: dict[str, dict] = {}
    for m, _ in mapped:
        assert m.name == "nic_port" and m.tags["interface"] == "eth0" and m.tags["host"] == "gpu001"
        by_series.setdefault(m.series, {}).update(m.fields)
    port = by_series.pop("nic_port|host=gpu001|interface=eth0")
    assert port["rx_prio3_pause"] == 1204 and port["tx_prio3_pause"] == 3310
    assert port["rx_prio3_pause_duration"] == 61204 and port["tx_prio3_pause_duration"] == 160331
    assert port["rx_discards_phy"] == 12 and port["rx_out_of_buffer"] == 3 and port["link_down_events_phy"] == 2
    assert port["rx_corrected_bits_phy"] == 1932 and port["rx_bits_phy"] == 5.7673086344552e13
    assert port["tx_pause_storm_warning_events"] == 0 and port["outbound_pci_stalled_wr"] == 0
    # no contract name, or netdev's to give (bytes, packets): ignored fields of their own name
    assert {"node_ethtool_received_pause_ctrl_phy", "node_ethtool_received_bytes_total",
            "node_ethtool_rx0_packets", "node_ethtool_received_prio3_bytes"} <= set(port)
    assert "rx_bytes" not in port and "node_ethtool_received_prio3_pause" not in port
    [info] = by_series.values()  # node_ethtool_info: more labels, another series, nothing the contract reads
    assert set(info) == {"node_ethtool_info"}


def _scrapes(version: int, *, n: int, every_s: int, storm_after: int) -> list[str]:
    """The real Telegraf lines as a time series of scrapes: the counters advance by the
    sample's rates, and from scrape `storm_after` the NIC sends pause on priority 3
    without pause (as a stuck receiver does; testkit/mlx5_ethtool.py's pfc_storm)."""
    rates = {"tx_prio3_pause": 20_000, "tx_prio3_pause_duration": 900_000, "tx_pause_storm_warning_events": 0.2}
    names = {f"node_ethtool_transmitted_{k[3:]}": r for k, r in rates.items()}
    out = []
    for i in range(n):
        t = max(0, i - storm_after) * every_s
        for line in _telegraf_lines(version):
            head, pair, _ = line.rsplit(" ", 2)  # (one metric a line; a tag may hold an escaped blank)
            field, value = pair.split("=")
            name = field if version == 2 else head.split(",", 1)[0]
            v = float(value) + names.get(name, 0) * t + (1000 * i * every_s if "packets" in name else 0)
            out.append(f"{head} {field}={v!r} {T0 + i * every_s * 10**9}")
    return out


@pytest.mark.parametrize("version", [1, 2])
def test_a_pfc_storm_in_node_ethtool_counters_is_diagnosed_at_the_nic(version):
    causes = _causes(_incidents(_scrapes(version, n=30, every_s=5, storm_after=8)))
    assert ("pfc_storm", "gpu001:eth0") in causes, causes


def test_healthy_node_ethtool_counters_open_nothing():
    assert _incidents(_scrapes(1, n=30, every_s=5, storm_after=10**6)) == []


# --- OpenConfig qos queues over gNMI ----------------------------------------------------

QUEUES = (DATA / "gnmi/openconfig_qos_queues.lp").read_text()


def test_openconfig_queue_counters_are_a_switch_queue_of_the_interface():
    (uc3, name), (uc0, _) = [SHIPPED.map(m) for m in _records(QUEUES)]
    assert name == "gnmi_openconfig_queues" and uc3.name == "switch_queue"
    assert uc3.tags == {"host": "leaf01", "interface": "swp1", "queue": "3"} and uc0.tags["queue"] == "0"
    assert uc3.fields["packets"] == 224188931 and uc3.fields["bytes"] == 918273645501
    assert uc3.fields["wred_ecn_marked_packets"] == 1841 and uc3.fields["curr_occupancy_bytes"] == 2048
    assert uc0.fields["dropped_packets"] == 2 and uc0.fields["dropped_bytes"] == 3014
    assert uc3.fields["max_queue_len"] == 524288 and uc3.fields["name"] == "UC3"  # (ignored: see the mapping)


def test_older_telegraf_and_gnmic_name_the_same_queue_the_same_way():
    [(new, _)] = [SHIPPED.map(m) for m in _records(QUEUES.splitlines()[0])]
    head, fields, ts = QUEUES.splitlines()[0].rsplit(" ", 2)  # older Telegraf: leaves keep their `-`
    head = head.replace("interface_id=", "interface_interface_id=").replace(",name=", ",queue_name=")
    older = f"{head} {re.sub(r'[a-z_]+(?==)', lambda m: m[0].replace('_', '-'), fields)} {ts}"
    [(old, _)] = [SHIPPED.map(m) for m in _records(older)]
    base = "/qos/interfaces/interface[interface-id=swp1]/output/queues/queue[name=UC3]/state/"
    event = {"name": "queues", "timestamp": 1704442117721474264,
             "tags": {"source": "leaf01:6030", "subscription-name": "queues", "interface_interface-id": "swp1",
                      "queue_name": "UC3"},
             "values": {base + k: v for k, v in {"transmit-pkts": "224188931", "transmit-octets": "918273645501",
                                                 "dropped-pkts": "0", "dropped-octets": "0", "avg-queue-len": "2048",
                                                 "ecn-marked-pkts": "1841"}.items()}}
    [(ev, name)] = [SHIPPED.map(m) for m in _records(json.dumps([event]))]
    contract = {k: new.fields[k] for k in ("packets", "bytes", "dropped_packets", "wred_ecn_marked_packets",
                                            "curr_occupancy_bytes")}
    assert name == "gnmi_openconfig_queues" and new.series == old.series == ev.series
    assert {k: old.fields[k] for k in contract} == {k: ev.fields[k] for k in contract} == contract


def test_a_queue_whose_name_has_no_number_is_not_a_switch_queue():
    line = QUEUES.splitlines()[0].replace("name=UC3", "name=best-effort")
    assert [SHIPPED.map(m) for m in _records(line)] == [None]


def test_a_congested_openconfig_queue_is_diagnosed_as_congestion_at_the_port():
    """leaf01's swp1 (towards gpu001) queue 3 fills to 4 MB on average and marks ECN for
    two minutes at 5 s sampling; the other queue stays idle."""
    lines = []
    for i in range(30):
        for k, line in enumerate(QUEUES.splitlines()):
            congested = k == 0 and i >= 6
            head, fields, _ = line.rsplit(" ", 2)
            if congested:
                fields = re.sub(r"avg_queue_len=\d+u", "avg_queue_len=4000000u", fields)
                fields = re.sub(r"ecn_marked_pkts=(\d+)u", lambda m: f"ecn_marked_pkts={int(m[1]) + 50_000 * (i - 6) * 5}u",
                                fields)
            lines.append(f"{head} {fields} {T0 + i * 5 * 10**9}")
    causes = _causes(_incidents(lines))
    assert any(cause == "congestion" and entity.startswith("leaf01:swp1") for cause, entity in causes), causes


@pytest.mark.slow
@pytest.mark.parametrize("version", [1, 2])
def test_the_stored_telegraf_lines_are_what_telegraf_writes_today(telegraf, tmp_path, version):
    """The real Telegraf reads node_exporter's text again: the same lines as stored (in
    its own order, with its own time)."""
    conf = tmp_path / "telegraf.conf"
    conf.write_text(f'[agent]\n  hostname = "gpu001"\n[[inputs.file]]\n  files = ["{DATA / "node_exporter/mlx5_ethtool.prom"}"]\n'
                    f'  data_format = "prometheus"\n  prometheus_metric_version = {version}\n'
                    '[[outputs.file]]\n  files = ["stdout"]\n  data_format = "influx"\n')
    out = subprocess.run([str(telegraf), "--config", str(conf), "--test"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-3000:]
    untimed = lambda lines: sorted(x.removeprefix("> ").rsplit(" ", 1)[0] for x in lines if x.strip())  # noqa: E731
    assert untimed(out.stdout.splitlines()) == untimed(_telegraf_lines(version))
