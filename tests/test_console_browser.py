"""The web console in a real headless Chromium (Debian's chromium + chromium-driver, via selenium).

Each page is opened from a real `fabric-rca serve` (uvicorn, another process, a free
port on 127.0.0.1) over a store filled by a real replay of the demo scenario (a pause
storm, a degraded link, a slow storage target). A screenshot of every page goes to
`$FABRIC_RCA_ARTIFACTS` (default `.cache/artifacts/`). Without chromium these tests are
skipped, and fail under CI=true.
"""
from __future__ import annotations

import gzip
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from cli.main import main
from conftest import in_ci
from engine.normalize import parse_line
from testkit import browser
from testkit.ports import free_port
from testkit.store import stored_incidents
from testkit.workers import ROOT, WorkerProcess

pytestmark = [pytest.mark.slow, pytest.mark.browser]

WAIT = 30  # s for a page to show what it must


def replay_args(folder: Path, telemetry: Path, db: Path) -> list[str]:
    return ["replay", str(telemetry), "--topology", str(folder / "topology.dot"), "--jobs", str(folder / "jobs.jsonl"),
            "--db", str(db), "--quiet"]


def cut(telemetry: Path, out: Path, *, before: float) -> Path:
    """The lines of `telemetry` whose records all happened before `before` (a fault still under way)."""
    with gzip.open(telemetry, "rt") as src, gzip.open(out, "wt") as dst:
        for line in src:
            metrics, _ = parse_line(line)
            if metrics and all(m.ts < before for m in metrics):
                dst.write(line)
    return out


@pytest.fixture(scope="module")
def demo(scenario_dir) -> tuple[Path, dict]:
    # 560 s, not the demo's 480: its slow storage ends at 400 s, the storage rise rule's
    # symptom up to a bucket and engine.baseline.SETTLE_S later, and resolve-after adds 60 s
    folder = scenario_dir("demo", duration=560.0)
    return folder, json.loads((folder / "truth.json").read_text())


@pytest.fixture(scope="module")
def chromium():
    why = browser.missing()
    if why:
        if in_ci():
            pytest.fail(f"the browser tests need a headless Chromium: {why}", pytrace=False)
        pytest.skip(why)
    with browser.headless_chromium() as driver:
        yield driver


class Console:
    """`fabric-rca serve` over `db`, and a page of it in the browser."""

    def __init__(self, db: Path, tmp: Path, *, auth: str | None = "none"):
        self.port = free_port()
        flags = ["--auth", auth] if auth else []
        self.server = WorkerProcess("serve", ["serve", "--db", str(db), "--port", str(self.port), *flags],
                                    port=self.port, log_path=tmp / f"serve-{self.port}.log")
        self.server.wait_healthy(timeout=60)
        self.base = self.server.base

    def open(self, driver, fragment: str) -> None:
        driver.get("about:blank")  # leave the last test's page (its server is gone) ...
        driver.get_log("browser")  # ... and forget what it logged
        driver.get(f"{self.base}/console/{fragment}")


def serve(request, db: Path, tmp: Path) -> Console:
    console = Console(db, tmp)
    request.addfinalizer(console.server.stop)
    return console


def shot(driver, name: str) -> Path:
    """A full-page screenshot of what the browser shows, into the artefacts folder."""
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1400, max(900, min(height + 40, 6000)))
    path = browser.artifacts_dir() / f"console-{name}.png"
    assert driver.save_screenshot(str(path)), f"no screenshot written to {path}"
    driver.set_window_size(1400, 1000)
    return path


def texts(driver, css: str) -> list[str]:
    return [e.text for e in driver.find_elements("css selector", css)]


def no_errors(driver) -> None:
    logged = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert logged == [], logged
    assert texts(driver, ".error") == []


@pytest.fixture(scope="module")
def replayed(demo, tmp_path_factory) -> Path:
    folder, _ = demo
    db = tmp_path_factory.mktemp("console-store") / "rca.db"
    assert main(replay_args(folder, folder / "telemetry.jsonl.gz", db)) == 0
    return db


def test_the_list_page_shows_every_incident_newest_first(chromium, replayed, demo, request, tmp_path):
    _, truth = demo
    console = serve(request, replayed, tmp_path)
    console.open(chromium, "#/")
    rows = browser.wait_until(lambda: len(texts(chromium, "#incident-rows tr[data-incident-id]")) == 3 and
                              texts(chromium, "#incident-rows td.cause"), timeout=WAIT, what="three incident rows")
    expected = [f["cause"] for f in sorted(truth["faults"], key=lambda f: -f["start"])]
    assert rows == expected  # newest first
    assert texts(chromium, "#incident-rows td.entity") == [
        f["entity"]["id"] for f in sorted(truth["faults"], key=lambda f: -f["start"])]
    stored = {i["id"] for i in stored_incidents(replayed)}
    ids = [e.get_attribute("data-incident-id") for e in chromium.find_elements("css selector", "#incident-rows tr")]
    assert set(ids) == stored
    assert "live" in chromium.find_element("id", "live").text
    no_errors(chromium)
    shot(chromium, "list")

    chromium.find_element("css selector", "select[name=cause]").send_keys("storage_slow")
    chromium.find_element("css selector", "#filters button[type=submit]").click()
    browser.wait_until(lambda: texts(chromium, "#incident-rows td.cause") == ["storage_slow"], timeout=WAIT,
                       what="the list filtered on cause=storage_slow")
    assert "cause=storage_slow" in chromium.current_url
    chromium.find_element("css selector", "#incident-rows td.title a").click()  # on to its page, no reload
    slow = next(i for i in stored_incidents(replayed) if i["root_causes"][0]["cause"] == "storage_slow")
    browser.wait_until(lambda: chromium.find_element("id", "incident-title").text == slow["title"], timeout=WAIT,
                       what="the incident page after a click")
    chromium.find_element("css selector", "[data-nav=fabric]").click()
    browser.wait_until(lambda: chromium.find_elements("css selector", "#fabric g[data-device]"), timeout=WAIT,
                       what="the fabric page after a click")
    assert chromium.find_elements("id", "incident-title") == []  # the last page is gone, not drawn beside it


def test_the_incident_page_shows_causes_evidence_timeline_jobs_and_the_topology(chromium, replayed, demo, request,
                                                                                tmp_path):
    _, truth = demo
    fault = next(f for f in truth["faults"] if f["cause"] == "pfc_storm")
    incident = next(i for i in stored_incidents(replayed) if i["root_causes"][0]["cause"] == "pfc_storm")
    console = serve(request, replayed, tmp_path)
    console.open(chromium, f"#/incident/{incident['id']}")
    browser.wait_until(lambda: chromium.find_elements("css selector", "#incident-topology svg g[data-device]"),
                       timeout=WAIT, what="the incident's topology")
    assert chromium.find_element("id", "incident-title").text == incident["title"]
    first = chromium.find_element("css selector", "#causes tr[data-rank='1']")
    assert fault["cause"] in first.text and fault["entity"]["id"] in first.text
    assert f"{incident['root_causes'][0]['score']:.2f}" in first.text
    assert len(texts(chromium, "#causes tbody tr")) == len(incident["root_causes"])
    plotted = [e.get_attribute("data-metric") for e in chromium.find_elements("css selector", "#plots svg.plot")]
    evidence = {m for ev in incident["root_causes"][0]["evidence"] for m in ev["metrics"]}
    assert plotted and set(plotted) <= evidence
    assert_plots_follow_the_samples(chromium, incident)
    bars = chromium.find_elements("css selector", "#timeline rect.tl-bar")
    assert sorted(b.get_attribute("data-symptom") for b in bars) == sorted(s["key"] for s in incident["symptoms"])
    assert texts(chromium, "#jobs tbody tr td:first-child") == fault["affected_jobs"]
    assert texts(chromium, "#tenants .tenant") == sorted({j["tenant"] for j in incident["affected_jobs"]})

    def marks(device: str) -> str:
        return chromium.find_element("css selector", f"#incident-topology g[data-device='{device}']").get_attribute(
            "class")

    cause_host = fault["entity"]["id"].split(":")[0]
    assert "m-cause" in marks(cause_host)
    for host in fault["detail"]["paused_hosts"]:  # the hosts the pause tree reached
        assert "m-affected" in marks(host), host
    pause = chromium.find_elements("css selector", "#incident-topology polyline.m-pause")
    assert len(pause) >= len(fault["detail"]["paused_hosts"])
    assert chromium.find_elements("css selector", "#incident-topology polyline.m-cause")
    no_errors(chromium)
    shot(chromium, "incident")
    chromium.get(f"{console.base}/console/#/incident/inc-nope")  # an unknown id: the API's 404, said on the page
    browser.wait_until(lambda: any("404" in t and "inc-nope" in t for t in texts(chromium, ".error")), timeout=WAIT,
                       what="the 404 shown on the page")


def assert_plots_follow_the_samples(driver, incident: dict) -> None:
    """Each drawn line is a stored symptom's samples of that plot's metric, point for point:
    as many points, x an increasing affine map of the time, y a decreasing one of the value."""
    by_key = {s["key"]: s for s in incident["symptoms"]}
    lines = driver.find_elements("css selector", "#plots svg.plot polyline.samples")
    assert lines, "no plot draws samples"
    for line in lines:
        metric = driver.execute_script("return arguments[0].closest('svg').dataset.metric", line)
        stored = by_key[line.get_attribute("data-symptom")]["samples"][metric]
        drawn = [tuple(map(float, p.split(","))) for p in line.get_attribute("points").split()]
        assert len(drawn) == len(stored) > 1
        for axis, values, sign in ((0, [t for t, _ in stored], 1), (1, [v for _, v in stored], -1)):
            lo, hi = min(range(len(values)), key=values.__getitem__), max(range(len(values)), key=values.__getitem__)
            if values[hi] == values[lo]:
                assert len({p[axis] for p in drawn}) == 1
                continue
            scale = (drawn[hi][axis] - drawn[lo][axis]) / (values[hi] - values[lo])
            assert sign * scale > 0
            for p, v in zip(drawn, values):
                assert abs(p[axis] - (drawn[lo][axis] + scale * (v - values[lo]))) <= 0.2, (metric, axis, p, v)


def test_the_fabric_page_draws_every_device_by_layer_coloured_by_open_incidents(chromium, demo, request, tmp_path):
    folder, truth = demo
    fault = next(f for f in truth["faults"] if f["cause"] == "pfc_storm")
    db = tmp_path / "open.db"  # replayed up to the middle of the storm: its incident is still open
    telemetry = cut(folder / "telemetry.jsonl.gz", tmp_path / "cut.jsonl.gz", before=(fault["start"] + fault["end"]) / 2)
    assert main(replay_args(folder, telemetry, db)) == 0
    (open_incident,) = stored_incidents(db)
    assert open_incident["status"] == "open" and open_incident["root_causes"][0]["entity"] == fault["entity"]
    console = serve(request, db, tmp_path)
    console.open(chromium, "#/fabric")
    browser.wait_until(lambda: chromium.find_elements("css selector", "#fabric g[data-device]"), timeout=WAIT,
                       what="the fabric drawing")
    devices = {e.get_attribute("data-device") for e in chromium.find_elements("css selector", "#fabric g[data-device]")}
    dot = (folder / "topology.dot").read_text()
    assert devices == {line.split('"')[1] for line in dot.splitlines() if "[function=" in line}
    assert texts(chromium, "#fabric .layer-label") == ["SPINE", "LEAF", "HOSTS"]
    y = {d: float(chromium.find_element("css selector", f"#fabric g[data-device='{d}'] text").get_attribute("y"))
         for d in ("spine01", "leaf01", "gpu001")}
    assert y["spine01"] < y["leaf01"] < y["gpu001"]
    cause_host = fault["entity"]["id"].split(":")[0]
    cls = chromium.find_element("css selector", f"#fabric g[data-device='{cause_host}']").get_attribute("class")
    assert f"open-cause sev-{open_incident['severity']}" in cls
    symptom_devices = {s["device"] for s in open_incident["symptoms"]} - {cause_host}
    for device in symptom_devices:
        cls = chromium.find_element("css selector", f"#fabric g[data-device='{device}']").get_attribute("class")
        assert "open-symptom" in cls, device
    untouched = devices - symptom_devices - {cause_host}
    assert untouched and all("open-" not in chromium.find_element(
        "css selector", f"#fabric g[data-device='{d}']").get_attribute("class") for d in untouched)
    assert "1 open incident" in chromium.find_element("id", "fabric-summary").text
    no_errors(chromium)
    shot(chromium, "fabric")


def test_a_new_incident_written_by_another_process_appears_without_a_reload(chromium, demo, request, tmp_path):
    folder, truth = demo
    fault = next(f for f in truth["faults"] if f["cause"] == "pfc_storm")
    db = tmp_path / "live.db"
    telemetry = cut(folder / "telemetry.jsonl.gz", tmp_path / "cut.jsonl.gz", before=(fault["start"] + fault["end"]) / 2)
    assert main(replay_args(folder, telemetry, db)) == 0
    console = serve(request, db, tmp_path)
    console.open(chromium, "#/")
    browser.wait_until(lambda: texts(chromium, "#incident-rows td.cause") == ["pfc_storm"], timeout=WAIT,
                       what="the one open incident")
    browser.wait_until(lambda: "live" in chromium.find_element("id", "live").text, timeout=WAIT, what="the stream")
    chromium.execute_script("window.__notReloaded = true")
    writer = subprocess.run([sys.executable, "-m", "cli.main", *replay_args(folder, folder / "telemetry.jsonl.gz", db)],
                            cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert writer.returncode == 0, writer.stderr
    newest_first = [f["cause"] for f in sorted(truth["faults"], key=lambda f: -f["start"])]
    browser.wait_until(lambda: texts(chromium, "#incident-rows td.cause") == newest_first, timeout=WAIT,
                       what="the incidents the other process wrote")
    assert chromium.execute_script("return window.__notReloaded === true"), "the page was reloaded"
    statuses = texts(chromium, "#incident-rows td:nth-child(2)")
    browser.wait_until(lambda: texts(chromium, "#incident-rows td:nth-child(2)") == ["resolved"] * 3, timeout=WAIT,
                       what=f"the storm's incident shown resolved (statuses {statuses})")
    streamed = chromium.find_elements("css selector", "#incident-rows tr[data-streamed]")
    assert len(streamed) == 3  # the two new ones, and the storm's, now resolved
    no_errors(chromium)
    shot(chromium, "list-live")


# ----------------------------------------------------------- tokens, maintenance, precision

ACME_MARKS = ["acme", "4242", "alice", *(f"gpu00{i}" for i in range(1, 9))]  # acme's tenant, job, user, hosts


def token_of(db: Path, role: str, tenant: str | None = None) -> str:
    from sqlmodel import Session

    from api.auth import add_token
    from api.store.db import create_schema, make_engine

    engine = make_engine(f"sqlite:///{db}")
    create_schema(engine)
    with Session(engine) as session:
        _, token = add_token(session, role=role, tenant=tenant)
    engine.dispose()
    return token


def sign_in(driver, token: str) -> None:
    field = browser.wait_until(lambda: driver.find_element("id", "token"), timeout=WAIT, what="the sign-in form")
    field.clear()
    field.send_keys(token)
    driver.find_element("css selector", "#sign-in button[type=submit]").click()


def signed_in(driver, what: str) -> None:
    """Signed in: the 401 the page met before (its first `GET /whoami`) is forgotten."""
    browser.wait_until(lambda: driver.find_elements("id", "sign-out"), timeout=WAIT, what=what)
    driver.get_log("browser")


def test_the_console_asks_for_a_token_and_a_tenant_sees_only_its_own(chromium, replayed, request, tmp_path):
    db = tmp_path / "tokens.db"
    with sqlite3.connect(replayed) as src, sqlite3.connect(db) as dst:  # a copy with what the WAL holds too
        src.backup(dst)
    globex, admin = token_of(db, "tenant", "globex"), token_of(db, "admin")
    console = Console(db, tmp_path, auth=None)  # `fabric-rca serve` as it comes: tokens asked
    request.addfinalizer(console.server.stop)
    console.open(chromium, "#/")
    sign_in(chromium, "frca_00000000_" + "x" * 43)
    browser.wait_until(lambda: "refused" in chromium.find_element("id", "sign-in-error").text, timeout=WAIT,
                       what="a bad token refused on the page")
    sign_in(chromium, globex)
    signed_in(chromium, "signed in with globex's token")
    browser.wait_until(lambda: texts(chromium, "#incident-rows td.cause") == ["storage_slow"], timeout=WAIT,
                       what="globex's one incident")
    browser.wait_until(lambda: "live" in chromium.find_element("id", "live").text, timeout=WAIT,
                       what="the stream, with the token in its header")
    assert chromium.find_element("id", "who").text.startswith("tenant globex")
    assert not chromium.find_element("css selector", "[data-nav=fabric]").is_displayed()
    assert texts(chromium, "#incident-rows td:nth-child(7)") == ["1"]  # its job only
    page = chromium.page_source
    assert [m for m in ACME_MARKS if m in page] == []
    chromium.find_element("css selector", "#incident-rows td.title a").click()
    browser.wait_until(lambda: texts(chromium, "#jobs tbody tr td:first-child") == ["4243"], timeout=WAIT,
                       what="the incident page with globex's job only")
    browser.wait_until(lambda: chromium.find_elements("css selector", "#incident-topology svg g[data-device]"),
                       timeout=WAIT, what="the incident's topology")
    assert [m for m in ACME_MARKS if m in chromium.page_source] == []
    assert "null" not in chromium.find_element("id", "view").text.split()
    assert chromium.execute_script("return sessionStorage.getItem('fabric-rca-token')") == globex
    no_errors(chromium)
    shot(chromium, "tenant-incident")
    chromium.find_element("id", "sign-out").click()
    sign_in(chromium, admin)
    browser.wait_until(lambda: len(texts(chromium, "#incident-rows tr[data-incident-id]")) == 3, timeout=WAIT,
                       what="every incident for an admin")
    assert chromium.find_element("css selector", "[data-nav=fabric]").is_displayed()


def test_maintenance_marks_and_windows_and_field_precision_are_shown(chromium, demo, request, tmp_path):
    folder, truth = demo
    slow = next(f for f in truth["faults"] if f["cause"] == "storage_slow")
    db = tmp_path / "ops.db"
    assert main(["maintenance", "add", "--entity", "stor01", "--from", str(slow["start"] - 60), "--until",
                 str(slow["end"] + 60), "--note", "firmware", "--db", str(db)]) == 0
    assert main(replay_args(folder, folder / "telemetry.jsonl.gz", db)) == 0
    incidents = {i["root_causes"][0]["cause"]: i for i in stored_incidents(db)}
    assert incidents["storage_slow"]["maintenance"] and not incidents["pfc_storm"]["maintenance"]
    for cause, verdict in (("pfc_storm", "confirmed"), ("link_degraded", "false_alarm"), ("storage_slow", "confirmed")):
        assert main(["feedback", "add", incidents[cause]["id"], "--verdict", verdict, "--db", str(db)]) == 0
    operator = token_of(db, "operator")
    console = Console(db, tmp_path, auth=None)
    request.addfinalizer(console.server.stop)
    console.open(chromium, "#/")
    sign_in(chromium, operator)
    signed_in(chromium, "signed in with an operator token")
    browser.wait_until(lambda: len(texts(chromium, "#incident-rows tr[data-incident-id]")) == 3, timeout=WAIT,
                       what="the three incidents")
    marked = chromium.find_elements("css selector", "#incident-rows .badge.maint")
    assert len(marked) == 1
    row = chromium.find_element("css selector", f"tr[data-incident-id='{incidents['storage_slow']['id']}']")
    assert "maintenance" in row.text
    chromium.find_element("css selector", "[data-nav=maintenance]").click()
    browser.wait_until(lambda: chromium.find_elements("css selector", "#windows tr[data-window]"), timeout=WAIT,
                       what="the maintenance windows")
    assert "stor01" in texts(chromium, "#windows td.entity") and "firmware" in chromium.find_element("id", "windows").text
    assert texts(chromium, "#in-maintenance td.reason") == [incidents["storage_slow"]["maintenance_reason"]]
    no_errors(chromium)
    shot(chromium, "maintenance")
    for name, value in (("entity", "leaf01"), ("from", "2025-11-30T00:00:00Z"), ("until", "2025-11-30T01:00:00Z"),
                        ("note", "optics")):
        chromium.find_element("css selector", f"#add-window input[name={name}]").send_keys(value)
    chromium.find_element("css selector", "#add-window button[type=submit]").click()  # POST /maintenance
    browser.wait_until(lambda: texts(chromium, "#windows td.entity") == ["stor01", "leaf01"], timeout=WAIT,
                       what="the window added from the page")
    chromium.find_element("css selector", "[data-nav=precision]").click()
    browser.wait_until(lambda: chromium.find_elements("css selector", "#precision-table tr[data-cause]"), timeout=WAIT,
                       what="the precision table")
    shown = {e.get_attribute("data-cause"): e.find_element("css selector", "td.precision").text
             for e in chromium.find_elements("css selector", "#precision-table tr[data-cause]")}
    assert shown == {"pfc_storm": "100%", "link_degraded": "0%", "storage_slow": "100%"}
    plotted = {e.get_attribute("data-cause") for e in chromium.find_elements("css selector", "#precision-plots svg")}
    assert plotted == set(shown)
    points = chromium.find_elements("css selector", "svg[data-cause='link_degraded'] circle.precision-point")
    assert [p.get_attribute("data-precision") for p in points] == ["0"]
    no_errors(chromium)
    shot(chromium, "precision")
    chromium.get(f"{console.base}/console/#/incident/{incidents['storage_slow']['id']}")
    browser.wait_until(lambda: "firmware" in chromium.find_element("id", "maintenance").text, timeout=WAIT,
                       what="the maintenance mark on the incident page")
    assert "null" not in chromium.find_element("id", "view").text.split()
