"""A real Telegraf, end to end, with no processors or renames in its configuration: the
binary scripts/tools builds (`go install` with custom build tags, cached outside the
clone) replays exporters' counters in their own formats (inputs.exec: an mlx5 NIC's
ethtool counters with an injected fault; inputs.file: the real infiniband and
node_exporter samples), measures this machine (inputs.net, inputs.diskio) and publishes
to a real broker with `data_format = "json"` and, in a second case, `"influx"`; a
`fabric-rca worker` consumes that topic and diagnoses the fault. A third case delivers
over SASL_SSL with SCRAM credentials to a broker of the test's own
(`scripts/kafka-dev start --sasl-ssl`). deploy/telegraf.conf.example loads and gathers as
shipped (`--test`), and its records map with nothing renamed.

Needs the binary (`scripts/tools build telegraf`; CI builds it in .ci/run): missing, the
`telegraf` fixture (conftest.py) fails the tests under CI and skips them elsewhere, saying why.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import tomllib
import uuid
from pathlib import Path

import pytest

from engine.mapping import load_mappings, shipped_files
from engine.normalize import parse_line
from streams import security
from streams.topics import ensure_topics, pipeline_topics
from testkit.samples import samples_dir
from testkit.services import KafkaDev
from testkit.workers import Fleet

pytestmark = [pytest.mark.slow, pytest.mark.kafka,
              pytest.mark.filterwarnings(r"ignore:.*is deprecated\. Use files\(\) instead:DeprecationWarning")]

REPO = Path(__file__).resolve().parents[1]
SAMPLES = samples_dir()
SHIPPED = load_mappings(shipped_files())
EXAMPLE = REPO / "deploy" / "telegraf.conf.example"


def _scenario(tmp: Path) -> Path:
    folder = tmp / "fabric"
    folder.mkdir()
    shutil.copy(REPO / "tests" / "data" / "air.dot", folder / "topology.dot")
    (folder / "jobs.jsonl").write_text("")
    return folder


def _lines_without_time(src: Path, dst: Path, **tags: str) -> Path:
    """A line-protocol sample for inputs.file: its timestamps cut (Telegraf stamps each
    read) and `host`/`device` set to this fabric's (the sample's own are another site's)."""
    out = []
    for text in src.read_text().splitlines():
        head, fields, _ts = text.rsplit(" ", 2)
        name, *pairs = head.split(",")
        kv = dict(p.split("=", 1) for p in pairs) | tags
        out.append(",".join([name] + [f"{k}={v}" for k, v in kv.items()]) + f" {fields}")
    dst.write_text("\n".join(out) + "\n")
    return dst


def telegraf_config(tmp: Path, *, bootstrap: str, topic: str, data_format: str, fault: str,
                    kafka_extra: str = "", prometheus_version: int = 2) -> Path:
    """Inputs in the exporters' own formats and on this machine, one Kafka output and one
    file output of the same serializer (what Telegraf sent, for the test to read)."""
    ib = _lines_without_time(SAMPLES / "infiniband/telegraf_readme_example_output.lp", tmp / "infiniband.lp",
                             host="gpu003", device="mlx5_0")
    exec_cmd = [sys.executable, str(REPO / "testkit" / "mlx5_ethtool.py"),
                "--names", str(SAMPLES / "ethtool/mlx5_ethtool_S_counter_names_kernel_doc.txt"),
                "--state", str(tmp / "ethtool.state"), "--host", "gpu001", "--interface", "eth0",
                "--fault", fault, "--fault-after", "25"]
    timestamps = 'json_timestamp_units = "1ms"' if data_format == "json" else ""
    conf = tmp / "telegraf.conf"
    conf.write_text(f"""
[agent]
  interval = "1s"
  flush_interval = "1s"
  hostname = "gpu002"
  omit_hostname = false

[[outputs.kafka]]
  brokers = ["{bootstrap}"]
  topic = "{topic}"
  routing_tag = "host"
  version = "3.0.0"
  required_acks = -1
  data_format = "{data_format}"
  {timestamps}
  {kafka_extra}

[[outputs.file]]
  files = ["{tmp / 'sent.out'}"]
  data_format = "{data_format}"
  {timestamps}

[[inputs.exec]]
  commands = ["{" ".join(exec_cmd)}"]  # (one command line; no blanks in these paths)
  timeout = "5s"
  data_format = "influx"

[[inputs.file]]
  files = ["{ib}"]
  data_format = "influx"

[[inputs.file]]
  files = ["{SAMPLES / 'prometheus/node_exporter_e2e_output_excerpt.prom'}"]
  data_format = "prometheus"
  prometheus_metric_version = {prometheus_version}
  [inputs.file.tags]
    host = "stor01"

[[inputs.net]]

[[inputs.diskio]]
""")
    return conf


class TelegrafProcess:
    def __init__(self, binary: Path, conf: Path, env: dict[str, str] | None = None):
        self.log_path = conf.with_suffix(".log")
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen([str(binary), "--config", str(conf)], stdout=self._log, stderr=subprocess.STDOUT,
                                     env=env, start_new_session=True)

    def log(self) -> str:
        return self.log_path.read_text()[-3000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


def _wait_incident(fleet: Fleet, telegraf: TelegrafProcess, cause: str, entity_has: str, timeout: float = 150):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert telegraf.proc.poll() is None, f"telegraf exited:\n{telegraf.log()}"
        for incident in fleet.stored():
            top = incident["root_causes"][0]
            if top["cause"] == cause and entity_has in top["entity"]["id"]:
                return incident
        time.sleep(2)
    got = [(i["id"], [(r["cause"], r["entity"]["id"]) for r in i["root_causes"]]) for i in fleet.stored()]
    raise AssertionError(f"no {cause} incident on {entity_has}; stored: {got}\n--- telegraf\n{telegraf.log()}\n"
                         f"{fleet.logs()}")


def _mapped_of_what_telegraf_sent(path: Path) -> dict[str, int]:
    """Each record Telegraf wrote (its file output: the same serializer as the Kafka one)
    through the shipped mappings: mapping name -> records; unreadable ones fail the test."""
    counts: dict[str, int] = {}
    for text in path.read_text().splitlines():
        metrics, rejects = parse_line(text)
        assert rejects == [], rejects
        for m in metrics:
            result = SHIPPED.map(m)
            name = result[1] if result else f"unmapped:{m.name}"
            counts[name] = counts.get(name, 0) + 1
    return counts


def _run_case(tmp: Path, telegraf: Path, bootstrap: str, *, data_format: str, fault: str, cause: str,
              entity_has: str, prometheus_version: int = 2, kafka_extra: str = "", worker_flags: tuple = (),
              sec=None, env: dict[str, str] | None = None):
    prefix = f"t{uuid.uuid4().hex[:8]}."
    ensure_topics(bootstrap=bootstrap, topics=pipeline_topics(prefix), security=sec)
    fleet = Fleet(tmp, _scenario(tmp), bootstrap, prefix=prefix)
    conf = telegraf_config(tmp, bootstrap=bootstrap, topic=prefix + "fabric.telemetry", data_format=data_format,
                           fault=fault, kafka_extra=kafka_extra, prometheus_version=prometheus_version)
    fleet.start("w1", *worker_flags, timeout=90)
    agent = TelegrafProcess(telegraf, conf, env=env)
    try:
        incident = _wait_incident(fleet, agent, cause, entity_has)
        metrics = fleet.workers[0].metrics()
    finally:
        agent.stop()
        fleet.stop()
    assert metrics.get("fabric_rca_records_total", 0) > 50
    assert not any(k.startswith("fabric_rca_rejects_total") and v for k, v in metrics.items()), metrics
    sent = _mapped_of_what_telegraf_sent(tmp / "sent.out")
    for name in ("telegraf_ethtool_mlx5", "telegraf_infiniband", "telegraf_net", "telegraf_diskio",
                 f"prometheus_v{prometheus_version}_node_disk", f"prometheus_v{prometheus_version}_node_network"):
        assert sent.get(name, 0) > 0, (name, sent)
    return incident, sent


def test_telegraf_json_to_kafka_a_pfc_storm_on_a_nic_is_diagnosed(telegraf, kafka_bootstrap, tmp_path):
    incident, sent = _run_case(tmp_path, telegraf, kafka_bootstrap, data_format="json", fault="pfc_storm",
                               cause="pfc_storm", entity_has="gpu001:eth0")
    assert any(s["kind"] in ("pfc_pause_tx", "pause_storm_event") for s in incident["symptoms"])
    unmapped = {k for k in sent if k.startswith("unmapped:")}
    assert unmapped <= {"unmapped:prometheus"}, unmapped  # (node_exporter's other metrics: no contract name)


def test_telegraf_influx_line_protocol_to_kafka_a_flapping_nic_link_is_diagnosed(telegraf, kafka_bootstrap, tmp_path):
    # (a link that goes down once is an operation, contract section 8: the fault is one
    # that goes down and up again and again)
    incident, _ = _run_case(tmp_path, telegraf, kafka_bootstrap, data_format="influx", fault="link_flap",
                            cause="link_flap", entity_has="gpu001:eth0", prometheus_version=1)
    assert any(s["kind"] == "link_flap" for s in incident["symptoms"])


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory):
    """A SASL_SSL broker of this module's own (free ports, its own state dir), stopped at the end."""
    broker = KafkaDev(tmp_path_factory.mktemp("kafka-sasl"))
    broker.env["FABRIC_RCA_PYTHON"] = sys.executable
    state = Path(broker.env["KAFKA_STATE_DIR"])
    try:
        bootstrap = broker.run("start", "--sasl-ssl")
        client = dict(line.split("=", 1) for line in (state / "client.env").read_text().splitlines()
                      if "=" in line and not line.startswith("#"))
        yield bootstrap, client
    finally:
        broker.stop()


def test_telegraf_with_scram_credentials_delivers_over_sasl_ssl(telegraf, sasl_broker, tmp_path):
    bootstrap, client = sasl_broker
    password = Path(client["FABRIC_RCA_KAFKA_PASSWORD_FILE"]).read_text().splitlines()[0]
    sasl = f"""enable_tls = true
  tls_ca = "{client['FABRIC_RCA_KAFKA_CA_FILE']}"
  sasl_mechanism = "{client['FABRIC_RCA_KAFKA_SASL_MECHANISM']}"
  sasl_username = "{client['FABRIC_RCA_KAFKA_USERNAME']}"
  sasl_password = "${{KAFKA_PASSWORD}}\""""
    flags = ("--kafka-security-protocol", "SASL_SSL", "--kafka-sasl-mechanism", client["FABRIC_RCA_KAFKA_SASL_MECHANISM"],
             "--kafka-username", client["FABRIC_RCA_KAFKA_USERNAME"],
             "--kafka-password-file", client["FABRIC_RCA_KAFKA_PASSWORD_FILE"],
             "--kafka-ca-file", client["FABRIC_RCA_KAFKA_CA_FILE"])
    _run_case(tmp_path, telegraf, bootstrap, data_format="json", fault="pfc_storm", cause="pfc_storm",
              entity_has="gpu001:eth0", kafka_extra=sasl, worker_flags=flags,
              sec=security.from_sources(env=client), env=os.environ | {"KAFKA_PASSWORD": password})
    assert password not in (tmp_path / "telegraf.conf").read_text()  # (Telegraf read it from its environment)


def test_the_example_config_gathers_as_shipped_and_maps_without_renames(telegraf, tmp_path):
    out = subprocess.run([str(telegraf), "--config", str(EXAMPLE), "--test"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr[-3000:]
    records = [m for text in out.stdout.splitlines() if text.strip()
               for m in parse_line(text.lstrip("> "))[0]]
    mapped = {SHIPPED.map(m)[1] for m in records if SHIPPED.map(m)}
    assert {"telegraf_net", "telegraf_diskio"} <= mapped, (mapped, out.stdout[:2000])
    conf = tomllib.loads(EXAMPLE.read_text())
    assert "processors" not in conf and not any("name_override" in plugin for plugins in conf["inputs"].values()
                                                for plugin in plugins)
