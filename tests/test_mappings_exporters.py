"""The shipped mappings of Telegraf's net and prometheus (node_exporter) inputs and of
SONiC's queue and PFC watchdog counters, each on its real sample; one metric per record
(Prometheus) merges on the contract's series instead of being dropped as a duplicate."""
from __future__ import annotations

import json
import re

import pytest

from engine.mapping import load_mappings, shipped_files
from engine.normalize import parse_line
from engine.pipeline import DetectStage
from rules.loader import load_rules
from testkit.samples import samples_dir

SAMPLES = samples_dir()
SHIPPED = load_mappings(shipped_files())
TS = 1764400000 * 10**9
_PROM = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"')


def _line(text: str) -> object:
    [m], rejects = parse_line(text)
    assert rejects == []
    return m


def prometheus_as_telegraf(text: str, version: int, *, host: str = "node01", ts: int = TS) -> list[str]:
    """node_exporter's exposition text as Telegraf's inputs.prometheus writes it in line
    protocol (plugins/parsers/prometheus metric_v1.go / metric_v2.go; the README's sample
    outputs show both shapes): v1 one measurement per metric with its value in
    `counter`/`gauge`/`value` by its TYPE, v2 measurement `prometheus` with the metric as
    the field. Tags: the labels, `url`, `host`. (The slow tier checks this against a real
    Telegraf: tests/test_telegraf_e2e.py.)"""
    types, out = {}, []
    for raw in text.splitlines():
        if raw.startswith("# TYPE "):
            _, _, name, kind = raw.split()
            types[name] = kind
            continue
        found = _PROM.match(raw)
        if raw.startswith("#") or not found:
            continue
        name, labels, value = found.groups()
        tags = dict(_LABEL.findall(labels or "")) | {"host": host, "url": "http://127.0.0.1:9100/metrics"}
        tagtext = ",".join(f"{k}={v}" for k, v in sorted(tags.items()))  # (no blanks in these labels)
        field = {"counter": "counter", "gauge": "gauge"}.get(types.get(name), "value") if version == 1 else name
        out.append(f"{name if version == 1 else 'prometheus'},{tagtext} {field}={float(value)!r} {ts}")
    return out


def test_telegraf_net_is_a_nic_port_of_the_interface():
    text = (SAMPLES / "net/telegraf_readme_example_output.lp").read_text().replace("host=HOST", "host=gpu001")
    out, name = SHIPPED.map(_line(text.strip()))
    assert name == "telegraf_net" and out.name == "nic_port"
    assert out.tags == {"host": "gpu001", "interface": "eth0"}
    assert out.fields["rx_bytes"] == 3284081640 and out.fields["tx_bytes"] == 451838509
    assert out.fields["rx_packets"] == 3585442 and out.fields["tx_packets"] == 2663590
    assert out.fields["drop_in"] == 4  # no nic_port counterpart: passes, counted as an ignored field
    assert SHIPPED.map(_line(f"net,host=gpu001,interface=all icmp_inerrors=1i {TS}")) is None


@pytest.mark.parametrize("version", [1, 2])
def test_node_exporter_through_telegraf_prometheus_maps_disk_network_and_infiniband(version):
    lines = prometheus_as_telegraf((SAMPLES / "prometheus/node_exporter_e2e_output_excerpt.prom").read_text(), version)
    mapped = [SHIPPED.map(_line(x)) for x in lines]
    assert all(mapped), [x for x, m in zip(lines, mapped) if m is None]
    by_series: dict[str, dict] = {}
    for m, _ in mapped:
        by_series.setdefault(m.series, {}).update(m.fields)
    assert {n for _, n in mapped} == {f"prometheus_v{version}_node_{k}" for k in ("disk", "infiniband", "network")}
    disk = by_series["storage|host=node01|kind=disk|name=nvme0n1"]
    assert disk["reads"] == 47114 and disk["writes"] == 1.07832e6 and disk["write_bytes"] == 2.0199236096e10
    assert disk["read_time"] == pytest.approx(21650) and disk["io_time"] == pytest.approx(222766)
    assert disk["iops_in_progress"] == 0
    ib = by_series["nic_port|device=mlx4_0|host=node01|interface=mlx4_0|port=1"]
    assert ib["rx_bytes"] == 1.8527668e7 and ib["tx_discards_phy"] == 5 and ib["link"] == "up"
    assert "node_infiniband_port_transmit_wait_total" in ib  # no contract name: an ignored field
    net = by_series["nic_port|host=node01|interface=eth0"]
    assert net["link"] == "up" and net["speed"] == pytest.approx(1000)  # 1.25e8 bytes/s: 1000 Mb/s
    assert all("url" not in m.tags for m, _ in mapped)


@pytest.mark.parametrize("sample", ["telegraf_readme_output_metric_version_1.lp",
                                    "telegraf_readme_output_metric_version_2.lp"])
def test_prometheus_metrics_of_no_device_stay_ignored(sample):
    lines = (SAMPLES / "prometheus" / sample).read_text().splitlines()
    assert [SHIPPED.map(_line(x.replace(",url=", ",host=h,url="))) for x in lines if x] == [None] * len(lines)


@pytest.mark.parametrize("version", [1, 2])
def test_one_metric_per_record_merges_into_one_sample_per_scrape(version):
    text = (SAMPLES / "prometheus/node_exporter_e2e_output_excerpt.prom").read_text()
    stage = DetectStage(rules=load_rules(None), roles={})
    scrapes, per_scrape = 12, len(prometheus_as_telegraf(text, version))
    for i in range(scrapes):
        for line in prometheus_as_telegraf(text, version, ts=TS + i * 10**10):
            stage.feed(line.encode())
    stage.finish()
    s = stage.stats
    series = 3  # nvme0n1, mlx4_0 port 1, eth0
    assert sum(s.mapped.values()) == scrapes * per_scrape and s.duplicates == 0
    assert s.merged == scrapes * (per_scrape - series) and s.summary()["rejected"] == 0
    assert {k for k in stage.detector.extractor.series if k.startswith(("storage", "nic_port"))} == {
        "storage|host=node01|kind=disk|name=nvme0n1", "nic_port|host=node01|interface=eth0",
        "nic_port|device=mlx4_0|host=node01|interface=mlx4_0|port=1"}


def _sonic_queue_events(db: dict, *, port: str = "Ethernet0", source: str = "leaf01:8080") -> list[dict]:
    """COUNTERS/<port>/Queues and COUNTERS/<port>/Pfcwd as sonic-gnmi answers them (one JSON
    value keyed `Ethernet0:3` per queue) through gnmic's event format: each leaf's path is
    the subscription path, the queue's key and the counter."""
    events = []
    for sub, prefix in (("Queues", "SAI_QUEUE_STAT_"), ("Pfcwd", "PFC_WD_")):
        values = {}
        for key, oid in db["COUNTERS_QUEUE_NAME_MAP"].items():
            for k, v in db.get("COUNTERS:" + oid, {}).items():
                if key.startswith(port + ":") and k.startswith(prefix):
                    values[f"/COUNTERS/{port}/{sub}/{key}/{k}"] = v
        events.append({"name": "sonic", "timestamp": 1516668828794942666, "tags": {"source": source},
                       "values": values})
    return events


def test_sonic_queue_and_pfc_watchdog_counters_are_one_switch_queue():
    db = json.loads((SAMPLES / "sonic/counters_db_excerpt.json").read_text())
    metrics, rejects = parse_line(json.dumps(_sonic_queue_events(db)))
    assert rejects == [] and [m.tags["path"] for m in metrics] == ["/COUNTERS/Ethernet0/Queues/Ethernet0:3",
                                                                   "/COUNTERS/Ethernet0/Pfcwd/Ethernet0:3"]
    (q, qname), (wd, wdname) = [SHIPPED.map(m) for m in metrics]
    assert qname == wdname == "sonic_counters_db_queues" and q.series == wd.series  # halves: they merge
    assert q.name == "switch_queue" and q.tags == {"host": "leaf01", "interface": "Ethernet0", "queue": "3"}
    assert q.fields["packets"] == 52 and q.fields["dropped_packets"] == 19 and q.fields["wred_ecn_marked_packets"] == 19
    assert q.fields["shared_watermark_bytes"] == 60
    assert wd.fields["pfcwd_status"] == "stormed" and wd.fields["pfcwd_deadlock_detected"] == 1
    assert wd.fields["PFC_WD_ACTION"] == "drop"  # (no contract name: an ignored field)


def test_a_wildcard_sonic_answer_is_one_record_per_port_and_queue():
    event = {"name": "q", "timestamp": 1516668828794942666, "tags": {"source": "leaf01"}, "values": {
        "/COUNTERS/Ethernet*/Queues/Ethernet0:3/SAI_QUEUE_STAT_PACKETS": "5",
        "/COUNTERS/Ethernet*/Queues/Ethernet4:3/SAI_QUEUE_STAT_PACKETS": "7",
        "/COUNTERS/Ethernet*/Ethernet8/SAI_PORT_STAT_IF_IN_OCTETS": "9"}}
    metrics, rejects = parse_line(json.dumps([event]))
    out = [SHIPPED.map(m)[0] for m in metrics]
    assert rejects == [] and [(o.name, o.tags["interface"], o.tags.get("queue"), o.fields) for o in out] == [
        ("switch_queue", "Ethernet0", "3", {"packets": 5}), ("switch_queue", "Ethernet4", "3", {"packets": 7}),
        ("switch_port", "Ethernet8", None, {"if_in_octets": 9})]


def test_a_stormed_sonic_queue_is_diagnosed_as_a_pfc_watchdog_storm():
    db = json.loads((SAMPLES / "sonic/counters_db_excerpt.json").read_text())
    stage = DetectStage(rules=load_rules(None), roles={"leaf01": "leaf"})
    for i in range(30):
        for event in _sonic_queue_events(db):
            event["timestamp"] = TS + i * 10**9
            if i < 10:  # operational first, then the real sample's stormed queue
                event["values"] = {k: ("operational" if k.endswith("PFC_WD_STATUS") else v)
                                   for k, v in event["values"].items()}
            stage.feed(json.dumps([event]).encode())
    stage.finish()
    kinds = {e.symptom.kind for e in stage.events() if e.symptom is not None}
    assert "pfcwd_storm" in kinds and stage.stats.merged == 30
