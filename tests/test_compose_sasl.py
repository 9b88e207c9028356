"""deploy/docker-compose.sasl.yml, read as data (no Docker): the SASL_SSL broker override.
Its broker runs the scripts of deploy/kafka-sasl with the base file's Kafka image, every
fabric-rca client that talks to Kafka gets SASL_SSL with a password file from the
clients' secrets volume, and no password is written in the file. scripts/check-compose
validates it on top of the base file with compose itself."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from test_compose import DOCS, INTERPOLATION

ROOT = Path(__file__).resolve().parent.parent
BASE = ROOT / "docker-compose.yml"
SASL = ROOT / "deploy" / "docker-compose.sasl.yml"
SCRIPTS = ROOT / "deploy" / "kafka-sasl"
CLIENTS = ("topics", "worker", "replay")  # the fabric-rca services of the base file that use Kafka


@pytest.fixture(scope="module")
def base() -> dict:
    return yaml.safe_load(BASE.read_text())["services"]


@pytest.fixture(scope="module")
def sasl() -> dict:
    return yaml.safe_load(SASL.read_text())


def test_the_override_names_the_base_files_services_and_its_own_one_shots(base, sasl):
    services = sasl["services"]
    assert set(services) - set(base) == {"kafka-secrets", "kafka-acls"}
    for name in ("kafka-secrets", "kafka-acls"):
        assert services[name]["image"] == base["kafka"]["image"]  # (keytool, kafka-acls.sh: the broker's image)
        assert services[name]["restart"] == "no"
    assert set(sasl["volumes"]) == {"kafka-broker-secrets", "kafka-client-secrets"}


def test_the_scripts_it_runs_exist_and_are_mounted_from_the_project(sasl):
    services = sasl["services"]
    for name, script in (("kafka-secrets", "secrets.sh"), ("kafka", "broker.sh"), ("kafka-acls", "acls.sh")):
        assert services[name]["entrypoint"] == ["/bin/bash", f"/opt/fabric-rca-sasl/{script}"]
        assert (SCRIPTS / script).is_file()
        assert "./deploy/kafka-sasl:/opt/fabric-rca-sasl:ro" in services[name]["volumes"]


def test_startup_order_secrets_broker_acls_topics(sasl):
    s = sasl["services"]
    assert s["kafka"]["depends_on"] == {"kafka-secrets": {"condition": "service_completed_successfully"}}
    assert s["kafka-acls"]["depends_on"] == {"kafka": {"condition": "service_healthy"}}
    assert s["topics"]["depends_on"] == {"kafka-acls": {"condition": "service_completed_successfully"}}
    assert "admin.properties" in " ".join(s["kafka"]["healthcheck"]["test"])  # it probes as a SCRAM user


def test_every_kafka_client_uses_sasl_ssl_with_a_password_file(sasl):
    for name in CLIENTS:
        svc = sasl["services"][name]
        env = svc["environment"]
        assert env["FABRIC_RCA_KAFKA_SECURITY_PROTOCOL"] == "SASL_SSL"
        assert env["FABRIC_RCA_KAFKA_SASL_MECHANISM"].startswith("SCRAM-")
        assert env["FABRIC_RCA_KAFKA_PASSWORD_FILE"].startswith("/run/secrets/kafka/")
        assert env["FABRIC_RCA_KAFKA_CA_FILE"].startswith("/run/secrets/kafka/")
        assert "FABRIC_RCA_KAFKA_PASSWORD" not in env
        assert svc["volumes"] == ["kafka-client-secrets:/run/secrets/kafka:ro"]  # not the broker's secrets


def test_no_password_is_written_in_the_file(sasl):
    def walk(node, path=""):
        if isinstance(node, dict):
            for k, v in node.items():
                yield from walk(v, f"{path}.{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                yield from walk(v, f"{path}[{i}]")
        else:
            yield path, str(node)

    for path, value in walk(sasl):
        if re.search(r"passw", path, re.I):
            assert path.endswith("_FILE") and value.startswith("/"), (path, value)
        assert not re.search(r"password\s*=", value, re.I), (path, value)


def test_variables_it_uses_are_documented():
    used = set(INTERPOLATION.findall(SASL.read_text()))
    assert used
    docs = DOCS.read_text()
    assert not sorted(v for v in used if f"`{v}`" not in docs)
    assert "deploy/docker-compose.sasl.yml" in docs
