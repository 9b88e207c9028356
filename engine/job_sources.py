"""Job placements as schedulers give them, recognised by content whatever the file or
message is called:

- `job_placement` Telegraf metrics (contract section 2), one per line or in
  `{"metrics": [...]}` batches; other measurements are skipped, since a telemetry file
  may be passed as is (but a file with no job at all is refused, never read as empty);
- Slurm `squeue --json` / slurmrestd `/jobs` documents, data_parser v0.0.37 to v0.0.44
  (`engine.jobs.is_squeue_document`): pretty-printed, one per line, or several
  appended to one file (a `.out` of snapshots);
- Kubernetes pods, `kubectl get pods -o json` (`engine.k8s_pods`).

Files may be gzip-compressed (`.gz`). On the jobs topic a message is one such document
or record (`job_message_events`), bounded like every input (engine/bounds.py).
"""
from __future__ import annotations

import gzip
import json
import zlib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from engine.bounds import MAX_BATCH, MAX_LINE_BYTES, MAX_MESSAGE_HOSTS, detail
from engine.events import JOB, StageEvent
from engine.jobs import JobError, epoch_seconds, is_squeue_document, iter_squeue_jobs, job_from_placement
from engine.jsonstream import JSONStreamError, documents
from engine.k8s_pods import PodLabels, is_pod_document, jobs_from_pods
from engine.normalize import parse_line
from engine.pipeline import job_event
from engine.types import Job, Reject

MAX_JOBS_FILE_BYTES = 512 * 2**20  # a jobs file is read whole (its documents may span lines)
SQUEUE, PODS = "squeue", "pods"


def document_kind(doc: object) -> str | None:
    """SQUEUE, PODS, or None for anything else (a metric, a batch)."""
    if is_squeue_document(doc):
        return SQUEUE
    if is_pod_document(doc):
        return PODS
    return None


def jobs_of_document(doc: dict, kind: str, *, labels: PodLabels, taken: float | None,
                     on_error=None) -> Iterable[Job]:
    """The jobs of a scheduler document of `kind` (`document_kind`)."""
    if kind == SQUEUE:
        return iter_squeue_jobs(doc, ts=taken, on_error=on_error)
    return jobs_from_pods(doc, labels=labels, taken=taken, on_error=on_error)


def document_time(doc: dict) -> float | None:
    """When a scheduler document was taken, when it says (squeue's `last_update`)."""
    return epoch_seconds(doc.get("last_update")) if isinstance(doc, dict) else None


# ------------------------------------------------------------------------ files


@dataclass(frozen=True)
class JobsFile:
    """What a jobs file holds: its snapshots, sorted by event time, and, when it holds
    scheduler documents, which scheduler (`slurm`, `k8s`) and Slurm cluster they name."""

    snapshots: list[tuple[float, Job]]
    scheduler_documents: int = 0
    scheduler: str = ""
    cluster: str = ""


def load_jobs(path: str | Path, *, labels: PodLabels = PodLabels()) -> list[tuple[float, Job]]:
    """Job snapshots from a file (module docstring), sorted by event time. A placement's
    event time is its record's; a scheduler document's job's is its start (else the
    document's time, else 0), so a replay knows each job from the moment it runs."""
    return read_jobs_file(path, labels=labels).snapshots


def read_jobs_file(path: str | Path, *, labels: PodLabels = PodLabels()) -> JobsFile:
    """`load_jobs`, with what the file turned out to be."""
    p = Path(path)
    try:
        text = _read(p)
    except FileNotFoundError:
        raise JobError(f"{p}: no such jobs file") from None
    except (OSError, UnicodeDecodeError, EOFError, zlib.error) as exc:  # (corrupt deflate data: zlib.error)
        raise JobError(f"{p}: cannot read jobs file: {exc}") from None
    snaps: list[tuple[float, Job]] = []
    others: Counter[str] = Counter()  # measurements skipped
    kinds: list[str] = []
    cluster = ""
    line = 1
    try:
        for doc, line in documents(text):
            kind = document_kind(doc)
            if kind is None:
                snaps.extend(_jobs_of_message(doc, skipped=others))
                continue
            kinds.append(kind)
            cluster = cluster or _cluster(doc)
            taken = document_time(doc)
            for job in jobs_of_document(doc, kind, labels=labels, taken=taken):
                snaps.append((job.start if job.start is not None else (taken or 0.0), job))
    except JSONStreamError as exc:
        raise JobError(f"{p}, line {exc.line}: {exc.message}") from None
    except JobError as exc:
        raise JobError(f"{p}, line {line}: {exc}") from None
    if not snaps and not kinds and others:
        seen = ", ".join(f"{name} ({n})" for name, n in others.most_common(3))
        raise JobError(f"{p}: no jobs in {sum(others.values()):,} records (measurements: {seen}): expected "
                       "job_placement records, squeue --json / slurmrestd documents or kubectl get pods -o json")
    scheduler = {SQUEUE: "slurm", PODS: "k8s"}[kinds[0]] if kinds else ""
    return JobsFile(sorted(snaps, key=lambda s: s[0]), len(kinds), scheduler, cluster)


def _cluster(doc: dict) -> str:
    for job in doc.get("jobs") or ():
        if isinstance(job, dict) and isinstance(job.get("cluster"), str):
            return job["cluster"]
    return ""


def _read(p: Path) -> str:
    opener = gzip.open if p.name.lower().endswith(".gz") else open
    with opener(p, "rb") as f:
        data = f.read(MAX_JOBS_FILE_BYTES + 1)
    if len(data) > MAX_JOBS_FILE_BYTES:
        raise JobError(f"{p}: more than {MAX_JOBS_FILE_BYTES:,} bytes; split it")
    return data.decode("utf-8")


def _jobs_of_message(msg: object, *, skipped: Counter) -> Iterable[tuple[float, Job]]:
    """Job snapshots in one Telegraf message (a metric or a `{"metrics": [...]}` batch);
    other measurements are counted in `skipped`."""
    metrics = msg.get("metrics") if isinstance(msg, dict) and "metrics" in msg else [msg]
    if not isinstance(metrics, list):
        raise JobError("'metrics' must be a list")
    for metric in metrics:
        if not isinstance(metric, dict):
            raise JobError("a metric must be a JSON object")
        if metric.get("name") != "job_placement":
            skipped[str(metric.get("name"))[:80]] += 1
            continue
        tags, fields = metric.get("tags") or {}, metric.get("fields") or {}
        if not isinstance(tags, dict) or not isinstance(fields, dict):
            raise JobError("job_placement tags and fields must be objects")
        ts = epoch_seconds(metric.get("timestamp"))
        if ts is None:
            raise JobError("job_placement record without a timestamp")
        yield ts, job_from_placement(tags=tags, fields=fields, ts=ts)


# ---------------------------------------------------------------------- messages


def job_message_events(value: bytes, *, received: float, source: str,
                       labels: PodLabels = PodLabels()) -> tuple[list[StageEvent], list[Reject]]:
    """The job events of one jobs-topic message: a scheduler document expands into one
    event per job, at the document's time (else `received`, the message's); anything
    else is read as `job_placement` records. What cannot be read is a reject, and a
    bad job never stops the good ones of its document."""
    doc = _scheduler_document(value)
    if doc is None:
        metrics, rejects = parse_line(value)
        events = []
        for m in metrics:
            result = job_event(m, tick=m.ts, source=source)
            (events if isinstance(result, StageEvent) else rejects).append(result)
        return events, rejects
    return _document_events(doc, value, received=received, source=source, labels=labels)


def _scheduler_document(value: bytes) -> dict | None:
    """The squeue or pod document a message holds; None when it holds something else
    (left to the record parser, which names what is wrong with it)."""
    if len(value) > MAX_LINE_BYTES or value.lstrip()[:1] != b"{" or not (b'"jobs"' in value or b'"kind"' in value):
        return None
    try:
        doc = json.loads(value)
    except (ValueError, RecursionError):
        return None
    return doc if document_kind(doc) is not None else None


def _document_events(doc: dict, value: bytes, *, received: float, source: str,
                     labels: PodLabels) -> tuple[list[StageEvent], list[Reject]]:
    raw = value.decode("utf-8", "replace")
    kind = document_kind(doc)
    rejects: list[Reject] = []
    members = doc.get("jobs") if kind == SQUEUE else doc.get("items", [doc])
    if len(members) > MAX_BATCH:
        return [], [Reject("batch_too_large", f"a {kind} document of {len(members):,} jobs (at most {MAX_BATCH:,})", raw)]
    try:
        taken = document_time(doc) or received
    except JobError as exc:
        return [], [Reject("bad_job", detail(f"{kind} document: last_update: {exc}"), raw)]
    events: list[StageEvent] = []
    hosts = 0
    bad = lambda exc: rejects.append(Reject("bad_job", detail(f"{kind} document: {exc}"), raw))  # noqa: E731
    for job in jobs_of_document(doc, kind, labels=labels, taken=taken, on_error=bad):
        hosts += len(job.hosts)
        if hosts > MAX_MESSAGE_HOSTS:
            rejects.append(Reject("too_many_hosts", f"a {kind} document placing more than {MAX_MESSAGE_HOSTS:,} "
                                  f"hosts; the jobs after {job.job_id} are not read", raw))
            break
        events.append(StageEvent(JOB, taken, source, job=job))
    return events, rejects
