"""Judged incidents as labelled cases in the scenario format `fabric-rca evaluate` scores.

One folder per judged incident (its latest verdict; duplicates are skipped: the fault is
the other incident's): `truth.json`, `telemetry.jsonl.gz` (the records from `margin_s`
before the incident opened to `margin_s` after it resolved, and every job placement),
`topology.dot` (the topology file's text, whatever its format: readers sniff it) and
`jobs.jsonl`. The truth holds the fault the operator says it was:

- `confirmed`: the incident's top cause and entity;
- `wrong_cause`: the right cause and entity the operator gave;
- `false_alarm`: no fault (`clean`), so the incident counts as a false one.

A field mistake thus becomes a regression case: the engine that made it fails the case
until it is fixed.
"""
from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

from sqlmodel import Session

from api.feedback import latest_verdicts
from api.store import repository
from contract.entities import CAUSE_ENTITY_KIND
from contract.times import parse_rfc3339
from engine.normalize import parse_line
from engine.replay import numbered_lines

JOB_MEASUREMENT = b'"job_placement"'


def case_truth(incident: dict, verdict: dict, *, margin_s: float) -> dict | None:
    """The truth of one judged incident (None for a duplicate). Pure."""
    if verdict["verdict"] == "duplicate_of":
        return None
    opened = parse_rfc3339(incident["opened_at"])
    ended = parse_rfc3339(incident["resolved_at"] or incident["updated_at"])
    start, end = opened - margin_s, ended + margin_s
    jobs = sorted({j["job_id"] for j in incident["affected_jobs"]})
    faults = []
    if verdict["verdict"] == "confirmed":
        top = incident["root_causes"][0]
        faults.append({"cause": top["cause"], "entity": dict(top["entity"]), "start": opened, "end": ended,
                       "affected_jobs": jobs})
    elif verdict["verdict"] == "wrong_cause":
        cause = verdict["right_cause"]
        faults.append({"cause": cause, "entity": {"kind": CAUSE_ENTITY_KIND[cause], "id": verdict["right_entity"]},
                       "start": opened, "end": ended, "affected_jobs": jobs})
    return {"scenario": f"field-{incident['id']}", "source": "operator feedback", "incident_id": incident["id"],
            "verdict": verdict["verdict"], "note": verdict["note"], "start": start, "end": end,
            "duration_s": end - start, "clean": not faults, "faults": faults}


def export_cases(session: Session, *, out: Path, telemetry: list[Path], topology: Path, jobs: Path | None,
                 margin_s: float = 300.0) -> list[Path]:
    """Write one case folder per judged incident under `out`; returns the folders."""
    written = []
    for verdict in latest_verdicts(session):
        incident = repository.get_incident(session, incident_id=verdict["incident_id"])
        truth = None if incident is None else case_truth(incident, verdict, margin_s=margin_s)
        if truth is None:
            continue
        folder = Path(out) / incident["id"]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "truth.json").write_text(json.dumps(truth, indent=2) + "\n")
        (folder / "topology.dot").write_text(Path(topology).read_text())
        if jobs is not None:
            shutil.copyfile(jobs, folder / "jobs.jsonl")
        else:
            (folder / "jobs.jsonl").write_text("")
        truth["records"] = _cut(telemetry, folder / "telemetry.jsonl.gz", truth["start"], truth["end"])
        (folder / "truth.json").write_text(json.dumps(truth, indent=2) + "\n")
        written.append(folder)
    return written


def _cut(files: list[Path], dest: Path, start: float, end: float) -> int:
    """Copy the lines with a record in [start, end] (and every job placement); returns how many."""
    kept = 0
    with gzip.open(dest, "wb") as out:
        for path in files:
            for _, line in numbered_lines(path):
                metrics, _ = parse_line(line)
                if JOB_MEASUREMENT in line or any(start <= m.ts <= end for m in metrics):
                    out.write(line.rstrip(b"\n") + b"\n")
                    kept += 1
    return kept
