"""The deployment files, read as data (no Docker): docker-compose.yml's services, health
checks, dependencies and published ports; the variables it uses are documented; the
image installs every package it copies. scripts/check-compose validates the file
against compose itself."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "docker-compose.yml"
DOCS = ROOT / "docs" / "deploy.md"
CONDITIONS = {"service_started", "service_healthy", "service_completed_successfully"}
# ${NAME}, ${NAME:-default}, ${NAME-default}, ${NAME:?err}; "$$" is a literal dollar.
INTERPOLATION = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)")


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def services(compose: dict) -> dict[str, dict]:
    return compose["services"]


def is_one_shot(service: dict) -> bool:
    return service.get("restart") == "no"


def published_ports(service: dict) -> list:
    return service.get("ports", [])


def command_flag(service: dict, flag: str) -> str | None:
    cmd = service.get("command", [])
    return cmd[cmd.index(flag) + 1] if isinstance(cmd, list) and flag in cmd else None


def test_no_obsolete_version_key(compose: dict) -> None:
    assert "version" not in compose


def test_expected_services(services: dict) -> None:
    assert {"kafka", "postgres", "topics", "worker", "api", "replay"} <= set(services)
    assert services["replay"].get("profiles") == ["demo"]


def test_long_running_services_have_a_healthcheck(services: dict) -> None:
    for name, svc in services.items():
        if is_one_shot(svc):
            continue
        check = svc.get("healthcheck")
        assert check and check.get("test") and not check.get("disable"), f"{name}: no healthcheck"
        assert svc.get("restart") in {"unless-stopped", "always", "on-failure"}, f"{name}: restart policy"


def test_one_shots_are_topics_and_replay(services: dict) -> None:
    assert {n for n, s in services.items() if is_one_shot(s)} == {"topics", "replay"}


def test_dependencies_name_existing_services_with_valid_conditions(services: dict) -> None:
    for name, svc in services.items():
        deps = svc.get("depends_on", {})
        assert isinstance(deps, dict), f"{name}: depends_on must carry conditions"
        for dep, spec in deps.items():
            assert dep in services, f"{name} depends on unknown service {dep!r}"
            condition = spec["condition"]
            assert condition in CONDITIONS, f"{name} -> {dep}: {condition!r}"
            if condition == "service_healthy":
                assert "healthcheck" in services[dep], f"{name} waits for {dep}'s health, it has none"
            if condition == "service_completed_successfully":
                assert is_one_shot(services[dep]), f"{name} waits for {dep} to exit, it restarts"
            assert not services[dep].get("profiles") or svc.get("profiles"), \
                f"{name} (always on) depends on {dep}, which only runs in a profile"


def test_startup_order(services: dict) -> None:
    def cond(svc: str, dep: str) -> str:
        return services[svc]["depends_on"][dep]["condition"]

    assert cond("topics", "kafka") == "service_healthy"
    assert cond("worker", "kafka") == cond("worker", "postgres") == "service_healthy"
    assert cond("worker", "topics") == "service_completed_successfully"
    assert cond("api", "postgres") == "service_healthy"
    assert cond("replay", "topics") == "service_completed_successfully"
    assert cond("replay", "worker") == "service_healthy"


def test_kafka_is_apache_kafka_4(services: dict) -> None:
    image = services["kafka"]["image"]
    repo, _, tag = image.partition(":")
    assert repo == "apache/kafka"
    assert re.fullmatch(r"4\.\d+\.\d+", tag), f"pin a 4.x release tag, not {tag!r}"
    env = services["kafka"]["environment"]
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert "PLAINTEXT://kafka:9092" in env["KAFKA_ADVERTISED_LISTENERS"].split(",")
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == "1@kafka:9093"


def test_only_the_api_and_kafka_publish_ports(services: dict) -> None:
    publishing = {name for name, svc in services.items() if published_ports(svc)}
    assert "api" in publishing
    assert publishing <= {"api", "kafka"}, f"unexpected published ports: {sorted(publishing - {'api', 'kafka'})}"
    assert published_ports(services["api"]) == ["${FABRIC_RCA_API_PORT:-8000}:8000"]


def test_fabric_rca_services_share_one_image(services: dict) -> None:
    ours = {n: s for n, s in services.items() if s.get("build")}
    assert set(ours) == {"topics", "worker", "api", "replay"}
    assert {s["image"] for s in ours.values()} == {"fabric-rca:${FABRIC_RCA_VERSION:-0.1.0}"}
    assert {s["build"] for s in ours.values()} == {"."}


def test_healthchecks_probe_the_ports_the_commands_open(services: dict) -> None:
    for name, flag in (("worker", "--metrics-port"), ("api", "--port")):
        port = command_flag(services[name], flag)
        assert port, f"{name}: command sets no {flag}"
        probe = " ".join(services[name]["healthcheck"]["test"])
        assert f"127.0.0.1:{port}/healthz" in probe, f"{name}: healthcheck misses :{port}/healthz"


def test_worker_reads_the_mounted_topology(services: dict) -> None:
    worker = services["worker"]
    mounts = [v.rsplit(":", 2) for v in worker["volumes"]]  # the source holds ":-"
    (source, target, mode), = [m for m in mounts if m[1] == "/etc/fabric-rca"]
    assert mode == "ro"
    assert source == "${FABRIC_RCA_TOPOLOGY_DIR:-./deploy/topology}"
    default = INTERPOLATION.sub("", worker["environment"]["FABRIC_RCA_TOPOLOGY"])
    assert default == ":-/etc/fabric-rca/topology.dot}"
    assert (ROOT / "deploy" / "topology" / "topology.dot").is_file()


def test_variables_used_are_documented(services: dict) -> None:
    text = COMPOSE.read_text().replace("$$", "")
    used = set(INTERPOLATION.findall(text))
    for svc in services.values():
        if svc.get("build"):  # fabric-rca's own settings inside the containers
            used |= {k for k in svc.get("environment", {}) if k.startswith("FABRIC_RCA_")}
    assert used, "no variables found: the parser is wrong"
    docs = DOCS.read_text()
    missing = sorted(v for v in used if f"`{v}`" not in docs)
    assert not missing, f"not documented in docs/deploy.md: {missing}"


def test_telegraf_example_writes_the_pipeline_topics() -> None:
    conf = tomllib.loads((ROOT / "deploy" / "telegraf.conf.example").read_text())
    outputs = {o["topic"]: o for o in conf["outputs"]["kafka"]}
    assert set(outputs) == {"fabric.telemetry", "fabric.jobs"}
    for out in outputs.values():
        assert out["routing_tag"] == "host"
        assert out["data_format"] == "json"
        assert out["json_timestamp_units"] == "1ms"
    assert outputs["fabric.jobs"]["namepass"] == ["job_placement"]
    assert outputs["fabric.telemetry"]["namedrop"] == ["job_placement"]


def test_image_installs_every_package_it_copies() -> None:
    """A package copied into the image but missing from pyproject's package list is not
    installed by `pip install .`: the CLI would fail to import it in the container."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    copied = set(re.findall(r"^COPY\s+(\w+)\s+\./\1\s*$", dockerfile, flags=re.M))
    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    installed = {pattern.rstrip("*") for pattern in include}
    assert installed <= copied, f"pyproject installs packages the image does not copy: {sorted(installed - copied)}"
    assert copied <= installed, f"copied but not installed (add to pyproject's include): {sorted(copied - installed)}"
    for package in copied:
        assert (ROOT / package / "__init__.py").is_file(), f"{package}/ is not a package"
