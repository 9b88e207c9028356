"""The console ships in the package: every static file is package data, nothing comes from elsewhere."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

import httpx

from api.console import STATIC
from api.server import running_server

ROOT = Path(__file__).resolve().parents[1]


def static_files() -> set[Path]:
    return {p for p in STATIC.rglob("*") if p.is_file()}


def test_every_console_file_is_package_data():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["api"]
    package = ROOT / "api"
    covered = {p for pattern in patterns for p in package.glob(pattern) if p.is_file()}
    assert static_files() and static_files() <= covered, sorted(map(str, static_files() - covered))


def test_the_pages_load_nothing_from_another_host():
    for path in static_files():
        text = path.read_text()
        assert not re.search(r"(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}", text.replace("http://www.w3.org/2000/svg", "")), path


def test_every_module_and_asset_the_pages_name_is_shipped():
    names = set()
    for path in static_files():
        text = path.read_text()
        names |= set(re.findall(r"""from\s+["']\./([\w.-]+)["']""", text))
        names |= set(re.findall(r"""(?:src|href)=["']([\w.-]+\.(?:js|css))["']""", text))
    assert names and names <= {p.name for p in static_files()}, names - {p.name for p in static_files()}


def test_the_server_serves_the_console_with_the_right_types(tmp_path):
    with running_server(db_url=f"sqlite:///{tmp_path / 'rca.db'}", auth="none") as base:
        home = httpx.get(f"{base}/")
        assert home.status_code == 307 and home.headers["location"] == "/console/"
        page = httpx.get(f"{base}/console/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert '<script type="module" src="app.js">' in page.text
        for path in static_files():
            res = httpx.get(f"{base}/console/{path.relative_to(STATIC).as_posix()}")
            assert res.status_code == 200 and res.content == path.read_bytes(), path
            if path.suffix == ".js":  # a browser runs a module only when it is served as JavaScript
                assert res.headers["content-type"].split(";")[0] in ("text/javascript", "application/javascript")
        assert httpx.get(f"{base}/console/nope.js").status_code == 404
