"""A real headless Chromium for the console's tests (Debian's chromium + chromium-driver).

`headless_chromium` starts one with a fresh profile and the flags that work on a machine
without a display, a GPU or the internet; `artifacts_dir` is where screenshots go
(`$FABRIC_RCA_ARTIFACTS`, default `.cache/artifacts/` in the repository).
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS_ENV = "FABRIC_RCA_ARTIFACTS"
CHROMIUM_ENV = "FABRIC_RCA_CHROMIUM"  # a chromium binary other than the one on PATH
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--window-size=1400,1000",
)  # fmt: skip


def missing() -> str | None:
    """Why no headless browser can run here, or None."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "the selenium package is not installed (pip install fabric-rca[test])"
    if not _chromium():
        return "no chromium binary (apt-get install chromium chromium-driver, or set FABRIC_RCA_CHROMIUM)"
    if not shutil.which("chromedriver"):
        return "no chromedriver on PATH (apt-get install chromium-driver)"
    return None


def _chromium() -> str | None:
    return os.environ.get(CHROMIUM_ENV) or shutil.which("chromium") or shutil.which("chromium-browser")


@contextmanager
def headless_chromium() -> Iterator[Any]:
    """A selenium driver of a fresh headless Chromium; quits it (and its profile) on exit."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    with tempfile.TemporaryDirectory(prefix="fabric-rca-chromium-") as profile:
        options = webdriver.ChromeOptions()
        options.binary_location = _chromium() or "chromium"
        for flag in (*FLAGS, f"--user-data-dir={profile}"):
            options.add_argument(flag)
        service = Service(executable_path=shutil.which("chromedriver") or "chromedriver")
        driver = webdriver.Chrome(options=options, service=service)
        try:
            yield driver
        finally:
            driver.quit()


def artifacts_dir() -> Path:
    folder = Path(os.environ.get(ARTIFACTS_ENV) or ROOT / ".cache" / "artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def wait_until(check: Callable[[], Any], *, timeout: float, what: str, poll: float = 0.1) -> Any:
    """`check()`'s first truthy answer; AssertionError naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except Exception as exc:  # noqa: BLE001  (a page still loading: stale or missing elements)
            last = exc
        else:
            if last:
                return last
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {last!r})")
