"""scripts/tools' cache logic, without Go: where the binary goes (outside the clone), the
override, `check`, and that `build` reuses a binary that runs and is the pinned build.
(Building for real is .ci/run's and tests/test_telegraf_e2e.py's.)"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

TOOLS = Path(__file__).resolve().parent.parent / "scripts" / "tools"


def _tools(*args: str, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("FABRIC_RCA_TELEGRAF", "FABRIC_RCA_TOOLS")}
    return subprocess.run([str(TOOLS), *args], env=base | env, capture_output=True, text=True, timeout=30)


def _fake(path: Path, version: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho 'Telegraf {version} (git: HEAD@0)'\n")
    path.chmod(0o755)
    return path


def test_the_path_is_in_the_tool_cache_per_version(tmp_path):
    out = _tools("path", "telegraf", FABRIC_RCA_TOOLS=str(tmp_path), TELEGRAF_VERSION="v1.36.4")
    assert out.returncode == 0 and out.stdout.strip() == f"{tmp_path}/telegraf-v1.36.4/telegraf"
    home = _tools("path", "telegraf", HOME=str(tmp_path / "home"), FABRIC_RCA_CACHE="", XDG_CACHE_HOME="")
    assert home.stdout.strip().startswith(f"{tmp_path}/home/.cache/fabric-rca/tools/telegraf-v")
    given = _tools("path", "telegraf", FABRIC_RCA_TELEGRAF="/opt/telegraf/bin/telegraf")
    assert given.stdout.strip() == "/opt/telegraf/bin/telegraf"


def test_check_and_build_reuse_only_the_pinned_build(tmp_path):
    env = {"FABRIC_RCA_TOOLS": str(tmp_path), "TELEGRAF_VERSION": "v1.37.2"}
    binary = tmp_path / "telegraf-v1.37.2" / "telegraf"
    assert _tools("check", "telegraf", **env).returncode == 3  # nothing there
    _fake(binary, "1.37.2")
    assert _tools("check", "telegraf", **env).returncode == 3  # no stamp of its build tags: rebuilt
    tags = _tools("build", "telegraf", **env, GO="/nonexistent/go", TELEGRAF_TAGS="custom,inputs.net")
    assert tags.returncode != 0  # (it tried to build: no go there)
    (binary.parent / "telegraf.tags").write_text("custom,inputs.net\n")
    reused = _tools("build", "telegraf", **env, GO="/nonexistent/go", TELEGRAF_TAGS="custom,inputs.net")
    assert reused.returncode == 0, reused.stderr
    assert reused.stdout.strip().splitlines()[-1] == str(binary) and "cached" in reused.stderr
    older = _tools("check", "telegraf", FABRIC_RCA_TOOLS=str(tmp_path), TELEGRAF_VERSION="v1.37.2",
                   TELEGRAF_TAGS="custom,inputs.net,inputs.file")
    assert older.returncode == 3  # other tags: not this build


def test_an_override_must_run(tmp_path):
    good = _fake(tmp_path / "mine", "1.30.0")  # any version: the user's choice
    assert _tools("check", "telegraf", FABRIC_RCA_TELEGRAF=str(good)).returncode == 0
    out = _tools("build", "telegraf", FABRIC_RCA_TELEGRAF=str(tmp_path / "missing"))
    assert out.returncode == 1 and "does not run --version" in out.stderr
    assert _tools("frobnicate", "telegraf").returncode == 1 and "usage" in _tools("path").stderr
