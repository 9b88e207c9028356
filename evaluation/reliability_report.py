"""docs/reliability.md from the figures a run of the fault tests recorded.

    python -m evaluation.reliability_report FIGURES.jsonl --write docs/reliability.md

The figures (tests/reliability_plugin.py, tests/reliability_figures.py) are one JSON
object a line, each with a `section`; nothing here is typed in but the fault names.
"""
from __future__ import annotations

import argparse
import json
import platform
import os
from datetime import datetime, timezone
from pathlib import Path

COMMAND = "scripts/reliability"
# test node id (without the file) -> the fault it puts the system under
FAULTS = {
    "test_workers_give_the_same_incidents_as_replay": "none (the clean run)",
    "test_a_worker_killed_mid_stream_restarts_to_the_same_incidents": "worker SIGKILLed mid-stream, restarted",
    "test_workers_survive_a_broker_restart_mid_stream": "broker stopped and restarted mid-stream",
    "test_a_store_outage_mid_stream_loses_no_incident_change": "PostgreSQL stopped mid-stream, restarted",
    "test_a_refused_checkpoint_is_never_used_and_the_stage_rebuilt_from_input": "every checkpoint refused (garbage, a crafted pickle)",
    "test_a_checkpoint_refused_mid_stream_is_rebuilt_from_the_partitions_earliest_input":
        "every checkpoint refused mid-stream, rebuilt from the input",
    "test_hostile_records_are_dead_lettered_with_their_bytes_and_the_rest_is_diagnosed_as_replay_does": "hostile records inside the telemetry",
}
CORPUS_TESTS = ("test_the_corpus_through_a_worker_is_dead_lettered_as_expected_and_changes_no_incident",
                "test_the_corpus_in_the_fabrics_own_partitions_changes_no_incident")  # (their own table)


def load(path: Path) -> list[dict]:
    return [json.loads(x) for x in Path(path).read_text().splitlines() if x.strip()]


def _name(nodeid: str) -> str:
    return nodeid.split("::")[-1].split("[")[0]


def _yes(v) -> str:
    return "—" if v is None else ("yes" if v else "**no**")


def _outcomes(figures: list[dict]) -> dict[str, dict]:
    return {f["test"]: f for f in figures if f["section"] == "test"}


def _fault_rows(figures: list[dict], outcomes: dict[str, dict]) -> list[str]:
    rows = ["| fault | outcome | s | records published | records counted | lost (unread) | duplicates dropped "
            "| incidents (replay) | equal to the clean run | duplicate ids | dead letters counted | DLQ messages "
            "| checkpoints refused | stages restored |",
            "|---|---|--:|--:|--:|--:|--:|--:|---|--:|--:|--:|--:|--:|"]
    for f in (f for f in figures if f["section"] == "fleet" and _name(f["test"]) in FAULTS):
        t = outcomes.get(f["test"], {})
        if "error" in f:
            rows.append(f"| {FAULTS[_name(f['test'])]} | {t.get('outcome', '?')} | {t.get('seconds', '')} "
                        f"| figures not taken: {f['error']} |||||||||")
            continue
        live = [w for w in f["workers"] if "records" in w]
        read = live[-1]["records"] if live else None
        unread = sum(w.get("unread", 0) for w in live) if live else None
        dups = sum(w.get("duplicates", 0) for w in live)
        dl = sum(w["dead_lettered"] for w in live)
        refused = sum(w["checkpoints_refused"] for w in live)
        restored = sum(w["stages_restored"] for w in live)
        rows.append(f"| {FAULTS[_name(f['test'])]} | {t.get('outcome', '?')} | {t.get('seconds', '')} "
                    f"| {f['published']} | {read} | {unread} | {dups} | {f['incidents']} ({f['replay_incidents']}) "
                    f"| {_yes(f['equal_to_replay'])} | {f['duplicate_ids']} | {dl} | {f['dlq_messages']} | {refused} "
                    f"| {restored} |")
    return rows


def _corpus_rows(figures: list[dict], outcomes: dict[str, dict]) -> list[str]:
    rows = ["| corpus sent | outcome | s | messages | too large to send | rejects expected | lettered "
            "| good records | good records lettered | DLQ messages | dead letters counted | incidents (clean) | equal | same ids |",
            "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|---|"]
    for f in (f for f in figures if f["section"] == "corpus_worker"):
        t = outcomes.get(f["test"], {})
        rows.append(f"| {f['where']} | {t.get('outcome', '?')} | {f['seconds']} | {f['corpus_messages']} "
                    f"| {f['skipped_too_large']} | {f['rejects_expected']} | {f['rejects_lettered']} | {f['good_records']} "
                    f"| {f['good_records_lettered']} | {f['dlq_messages']} | {f['dead_lettered_total']} "
                    f"| {f['incidents']} ({f['clean_incidents']}) | {_yes(f['incidents_equal_clean'])} | {_yes(f.get('ids_equal_clean'))} |")
    return rows


def _fuzz_rows(figures: list[dict], outcomes: dict[str, dict]) -> list[str]:
    rows = ["| operation, mode, backend | outcome | s | requests | 2xx | 4xx | 5xx |", "|---|---|--:|--:|--:|--:|--:|"]
    total = {"requests": 0, "5xx": 0}
    for nodeid, t in outcomes.items():
        if "test_no_request_gets_a_5xx" not in nodeid:
            continue
        c = next((f for f in figures if f["section"] == "fuzz" and f["test"] == nodeid), {})
        n = sum(v for k, v in c.items() if k.endswith("xx"))
        total["requests"] += n
        total["5xx"] += c.get("5xx", 0)
        rows.append(f"| {nodeid.split('[', 1)[1].rstrip(']')} | {t['outcome']} | {t['seconds']} | {n} "
                    f"| {c.get('2xx', 0)} | {c.get('4xx', 0)} | {c.get('5xx', 0)} |")
    rows.append(f"| **all** | | | {total['requests']} | | | **{total['5xx']}** |")
    return rows


def _other_rows(outcomes: dict[str, dict]) -> list[str]:
    rows = ["| test | outcome | s |", "|---|---|--:|"]
    for nodeid, t in outcomes.items():
        if _name(nodeid) not in (*FAULTS, *CORPUS_TESTS) and "test_api_fuzz" not in nodeid:
            rows.append(f"| `{nodeid}` | {t['outcome']} | {t['seconds']} |")
    return rows


def render(figures: list[dict], *, when: str, machine: str) -> str:
    outcomes = _outcomes(figures)
    session = next((f for f in figures if f["section"] == "session"), {})
    failed = [n for n, t in outcomes.items() if t["outcome"] == "failed"]
    parts = [
        "# Reliability under faults",
        "",
        f"Regenerated by one command, `{COMMAND}` (about 10 minutes): it runs the fault tests with pytest and "
        "a plugin that records what they measured (tests/reliability_plugin.py), then writes this page from "
        "those figures (evaluation/reliability_report.py). Nothing below is typed in.",
        "",
        f"Run: {when}, {machine}; {len(outcomes)} tests in {session.get('seconds', '?')} s, "
        f"{len(failed)} failed{': ' + ', '.join(f'`{n}`' for n in failed) if failed else ''}.",
        "",
        "## Workers under faults (real broker, real processes)",
        "",
        "Each row is one test: a pfc_storm scenario published to a real broker, read by `fabric-rca worker` "
        "processes, under the fault named. *records counted*: the last live worker's "
        "`fabric_rca_records_total` (records read by its stages, rejects included; a stage restored "
        "from a snapshot after a rebalance counts from there, so it may be under the records "
        "published without any loss); *lost (unread)*: the messages its partitions still had "
        "unconsumed at the end (`fabric_rca_consumer_lag_messages`); *duplicates dropped*: "
        "`fabric_rca_duplicates_total` (records re-read after a restart and recognised). *incidents*: those stored at the end, against "
        "the in-memory replay of the same files (replayed by the plugin); *equal* compares ids, ranked "
        "causes and affected jobs. *dead letters counted*: `fabric_rca_dead_lettered_total`; *DLQ "
        "messages*: what the dead-letter topic holds, read back.",
        "",
        *_fault_rows(figures, outcomes),
        "",
        "## The hostile corpus through a worker",
        "",
        "tests/test_kafka_corpus.py: every line of tests/corpus produced raw (no publisher checks) onto a "
        "telemetry topic, its job lines onto the jobs topic too, then the scenario's telemetry. Each bad "
        "record must be dead-lettered with its own bytes and expected reason; none of the good telemetry.",
        "",
        *_corpus_rows(figures, outcomes),
        "",
        "In the fabric's own partitions the corpus's accepted records (some 18 hosts, all at one event "
        "time) outvote a partition's real devices in the reorderer's fleet time: the real devices' "
        "records are quarantined as `future_timestamp` and a false incident opens. That test is an "
        "expected failure (xfail, strict) until engine/order.py resists it. *equal* compares the "
        "incidents' statuses, opening times, ranked causes and jobs; *same ids* their ids too (an id "
        "hashes the founding symptom, and with the corpus topic's partitions among correlation's "
        "sources another symptom of the same incident may come first).",
        "",
        "## The API under schemathesis",
        "",
        "tests/test_api_fuzz.py: positive and negative requests of every operation of the served API; "
        "the status of every answer counted.",
        "",
        *_fuzz_rows(figures, outcomes),
        "",
        "## Other fault tests",
        "",
        *_other_rows(outcomes),
        "",
    ]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("figures", type=Path)
    p.add_argument("--write", type=Path, required=True)
    a = p.parse_args(argv)
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    machine = f"{os.cpu_count()} cores, Python {platform.python_version()}"
    a.write.write_text(render(load(a.figures), when=when, machine=machine))
    print(a.write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
