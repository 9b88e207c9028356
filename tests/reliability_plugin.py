"""A pytest plugin measuring the fault tests for docs/reliability.md (scripts/reliability).

    pytest -p reliability_plugin ...   (with FABRIC_RCA_FIGURES=<figures.jsonl>)

It changes no test: it watches what the tests already do and records figures of its own
(reliability_figures.record):
- every test's outcome and duration (section "test");
- every worker fleet (tests/test_kafka_workers.Fleet), as the test stops it: the records
  published, the records each live worker counted, its dead-letter counters, the messages
  the dead-letter topic holds (read back here), the stored incidents, duplicate ids among
  them, and whether they are the replay's of the fleet's files (replayed here, in memory)
  (section "fleet");
- every schemathesis request: its status, so the 5xx are counted (section "fuzz", one
  line per test).
"""
from __future__ import annotations

import functools
import time
from collections import Counter

import pytest

from reliability_figures import record

_replays: dict[str, list[dict]] = {}
_fuzz: dict[str, Counter] = {}


def _summary(incidents: list[dict]) -> list[tuple]:
    from test_kafka_workers import _summary as summary

    return summary(incidents)


def _replayed(folder) -> list[dict]:
    from evaluation.scenarios import replay_scenario

    key = str(folder)
    if key not in _replays:
        _replays[key] = replay_scenario(folder)[1]
    return _replays[key]


def _port(proc) -> int | None:
    args = list(proc.args)
    return int(args[args.index("--metrics-port") + 1]) if "--metrics-port" in args else None


def _worker_figures(fleet) -> list[dict]:
    import httpx

    from test_kafka_workers import _metrics

    out = []
    for worker in fleet.workers:  # testkit.workers.WorkerProcess
        proc, name, port = worker.proc, worker.name, worker.port
        if proc.poll() is not None or port is None:
            continue
        try:
            m = _metrics(f"http://127.0.0.1:{port}")
            status = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).json()["status"]
        except Exception as exc:  # noqa: BLE001 - a figure, not a verdict: say what happened
            out.append({"worker": name, "error": f"{type(exc).__name__}: {exc}"[:200]})
            continue
        out.append({"worker": name, "health": status, "records": int(m.get("fabric_rca_records_total", 0)),
                    "dead_lettered": int(m.get("fabric_rca_dead_lettered_total", 0)),
                    "dead_letter_failed": int(m.get("fabric_rca_dead_letter_failed_total", 0)),
                    "checkpoints_refused": int(m.get("fabric_rca_checkpoints_refused_total", 0)),
                    "stages_restored": int(m.get("fabric_rca_stages_restored_total", 0)),
                    "duplicates": int(m.get("fabric_rca_duplicates_total", 0)),
                    "unread": int(sum(v for k, v in m.items() if k.startswith("fabric_rca_consumer_lag_messages{")))})
    return out


def _dlq_messages(fleet) -> int | None:
    from test_kafka_worker_faults import _consume

    try:
        return len(_consume(fleet.bootstrap, fleet.prefix + "fabric.telemetry.dlq", until=lambda g: False, timeout=4))
    except Exception:  # noqa: BLE001 - the broker of the test may be gone
        return None


def _fleet_figures(fleet) -> dict:
    stored = fleet.stored()
    ids = [i["id"] for i in stored]
    replay = _replayed(fleet.folder)
    return {"published": getattr(fleet, "_published_records", 0), "workers": _worker_figures(fleet),
            "dlq_messages": _dlq_messages(fleet), "incidents": len(stored), "replay_incidents": len(replay),
            "duplicate_ids": len(ids) - len(set(ids)), "equal_to_replay": _summary(stored) == _summary(replay)}


def _watch_fleets() -> None:
    from test_kafka_workers import Fleet

    if getattr(Fleet, "_watched", False):
        return
    publish, stop = Fleet.publish, Fleet.stop

    @functools.wraps(publish)
    def watched_publish(self, *args, **kw):
        stats = publish(self, *args, **kw)
        self._published_records = getattr(self, "_published_records", 0) + stats.records
        return stats

    @functools.wraps(stop)
    def watched_stop(self):
        try:
            figures = _fleet_figures(self)
        except Exception as exc:  # noqa: BLE001
            figures = {"error": f"{type(exc).__name__}: {exc}"[:300]}
        record("fleet", **figures)
        return stop(self)

    Fleet.publish, Fleet.stop, Fleet._watched = watched_publish, watched_stop, True


def _watch_fuzz() -> None:
    from schemathesis import Case

    call = Case.call
    if getattr(call, "_watched", False):
        return

    @functools.wraps(call)
    def watched_call(self, *args, **kw):
        response = call(self, *args, **kw)
        from reliability_figures import current_test

        _fuzz.setdefault(current_test(), Counter())[f"{response.status_code // 100}xx"] += 1
        return response

    watched_call._watched = True
    Case.call = watched_call


def pytest_collection_finish(session):
    names = {item.module.__name__ for item in session.items if getattr(item, "module", None)}
    if {"test_kafka_workers", "test_kafka_worker_faults", "test_kafka_worker_refusals", "test_kafka_corpus"} & names:
        _watch_fleets()
    if "test_api_fuzz" in names:
        _watch_fuzz()


@pytest.hookimpl(trylast=True)
def pytest_runtest_logreport(report):
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        outcome = ("xfailed" if report.skipped else "xpassed") if hasattr(report, "wasxfail") else report.outcome
        record("test", test=report.nodeid, outcome=outcome, seconds=round(report.duration, 1))
    if report.when == "teardown" and report.nodeid in _fuzz:
        record("fuzz", test=report.nodeid, **dict(_fuzz.pop(report.nodeid)))


def pytest_sessionstart(session):
    session.config._reliability_started = time.monotonic()


def pytest_sessionfinish(session, exitstatus):
    started = getattr(session.config, "_reliability_started", None)
    if started is not None:
        record("session", exit_status=int(exitstatus), seconds=round(time.monotonic() - started, 1))
