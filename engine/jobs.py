"""Jobs: where they run and when, from `job_placement` records or `squeue --json`
(the files and messages that hold them: `engine.job_sources`).

A job is known by snapshots; the newest one wins. Times are event times (seconds). A
job holds its nodes over `[start, end)`; None is open on that side. A job seen in a
terminal state without an end time ended no later than the snapshot that said so.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from contract import times
from engine.hostlist import HostlistError, expand
from engine.types import Job

TERMINAL_STATES = frozenset(
    {
        "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
        "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY", "REVOKED", "SPECIAL_EXIT",
    }
)
_NO_NODES = frozenset({"", "(null)", "none", "none assigned", "n/a"})
_NO_TIME = frozenset({"", "none", "unknown", "n/a", "null", "unlimited", "infinite"})


class JobError(ValueError):
    """A job record or file that cannot be read; the message says where and why."""


def job_sort_key(job_id: str) -> tuple[int, int, str]:
    """Numeric ids in numeric order (999 before 1000), then the others by text."""
    return (0, int(job_id), job_id) if job_id.isdigit() else (1, 0, job_id)


# ------------------------------------------------------------------ hostlists

def expand_hostlist(expr: str) -> list[str]:
    """Expand a Slurm hostlist in the order written (engine.hostlist); JobError says why not."""
    try:
        return expand(expr)
    except HostlistError as exc:
        raise JobError(str(exc)) from None


# ----------------------------------------------------------------------- times


def epoch_seconds(value: object) -> float | None:
    """Event time in seconds from s/ms/us/ns numbers (by magnitude), numeric strings or
    RFC 3339; None for unset (absent, 0, "Unknown", Slurm's unset/infinite wrapper)."""
    value = _unwrap(value)
    if value is None:
        return None
    if isinstance(value, bool):
        raise JobError(f"bad time {value!r}")
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in _NO_TIME:
            return None
        if not text.isascii():  # float() reads other scripts' digits too
            raise JobError(f"bad time {text[:40]!r}: characters other than ASCII")
        try:
            return epoch_seconds(float(text))
        except ValueError:
            return _rfc3339(text)
    if isinstance(value, (int, float)):
        if not -1e30 < value < 1e30:  # NaN, infinities, and integers float() cannot hold
            raise JobError(f"bad time {repr(value)[:40]}")
        return _scale(float(value))
    raise JobError(f"bad time {value!r}")


def _scale(number: float) -> float | None:
    if number <= 0:
        return None  # Slurm writes 0 for "not set"
    ts = times.epoch_seconds(number)
    if ts >= 1e11:
        raise JobError(f"time {number!r} is too large for an epoch in s, ms, us or ns")
    return ts


def _rfc3339(text: str) -> float:
    try:
        return times.parse_rfc3339(text, naive_utc=True)  # Slurm writes local times without a zone
    except ValueError:
        raise JobError(f"bad time {text!r}: neither an epoch number nor RFC 3339") from None


def _unwrap(value: object) -> object:
    """Slurm's `{"set": true, "infinite": false, "number": 123}` -> 123 (None if unset)."""
    if isinstance(value, dict) and "number" in value:
        if not value.get("set", True) or value.get("infinite", False):
            return None
        return value["number"]
    return value


# ---------------------------------------------------------------------- records


def job_from_placement(*, tags: dict, fields: dict, ts: float) -> Job:
    """A `job_placement` Telegraf record (contract section 2) taken at event time ts."""

    def get(name: str) -> object:
        return fields.get(name, tags.get(name))

    job_id = _text(get("job_id"))
    if not job_id:
        raise JobError("job_placement record without job_id")
    try:
        state = _state(get("job_state")) or "RUNNING"
        start, end = epoch_seconds(get("start_time")), epoch_seconds(get("end_time"))
        return Job(
            job_id=job_id,
            tenant=_text(get("account")),
            user=_text(get("user")),
            state=state,
            hosts=_hosts(get("nodes")),
            storage=_storage(get("storage")),
            start=start,
            end=end if end is not None or state not in TERMINAL_STATES else ts,
        )
    except JobError as exc:
        raise JobError(f"job {job_id}: {exc}") from None


def jobs_from_squeue(doc: dict, *, ts: float | None = None) -> list[Job]:
    """Jobs of a Slurm `squeue --json` / slurmrestd `/jobs` document (data_parser v0.0.37
    to v0.0.44). `ts` is when it was taken (default: its `last_update`); it ends terminal
    jobs that carry no end time."""
    return list(iter_squeue_jobs(doc, ts=ts))


def iter_squeue_jobs(doc: dict, *, ts: float | None = None,
                     on_error: Callable[[JobError], None] | None = None) -> Iterator[Job]:
    """`jobs_from_squeue` one job at a time, so whoever bounds the work can stop early;
    with `on_error`, a job that cannot be read is handed to it and skipped."""
    records = doc.get("jobs") if isinstance(doc, dict) else None
    if not isinstance(records, list):
        raise JobError("squeue document has no 'jobs' list")
    taken = ts if ts is not None else epoch_seconds(doc.get("last_update"))
    for i, rec in enumerate(records):
        try:
            yield _squeue_job(rec, index=i, taken=taken)
        except JobError as exc:
            if on_error is None:
                raise
            on_error(exc)


def is_squeue_document(doc: object) -> bool:
    """An squeue/slurmrestd jobs document: a `jobs` list, and none of a Telegraf metric's
    or batch's keys (so a `job_placement` record is never read as one, nor one as it)."""
    return (isinstance(doc, dict) and isinstance(doc.get("jobs"), list)
            and not any(k in doc for k in ("name", "fields", "tags", "timestamp", "metrics")))


def _squeue_job(rec: object, *, index: int, taken: float | None) -> Job:
    if not isinstance(rec, dict):
        raise JobError(f"jobs[{index}]: not an object")
    job_id = _text(_unwrap(rec.get("job_id")))
    if not job_id:
        raise JobError(f"jobs[{index}]: no job_id")
    try:
        state = _state(rec.get("job_state")) or "UNKNOWN"
        start, end = epoch_seconds(rec.get("start_time")), epoch_seconds(rec.get("end_time"))
        if end is None and state in TERMINAL_STATES:
            end = taken if taken is not None else start
        return Job(
            job_id=job_id,
            tenant=_text(rec.get("account")),
            user=_text(rec.get("user_name", rec.get("user"))),
            state=state,
            hosts=_hosts(rec.get("nodes")),
            storage=_storage(rec.get("storage")),
            start=start,
            end=end,
        )
    except JobError as exc:
        raise JobError(f"jobs[{index}] (job {job_id}): {exc}") from None


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))  # JSON numbers may arrive as 4242.0
    return str(value).strip()


def _state(value: object) -> str:
    """Base Slurm state: first of a list, first word ("CANCELLED by 0"), upper case."""
    if isinstance(value, list):
        value = value[0] if value else None
    words = _text(value).upper().split()
    return words[0] if words else ""


def _hosts(value: object) -> tuple[str, ...]:
    text = _text(value)
    if text.lower() in _NO_NODES:
        return ()
    return tuple(dict.fromkeys(expand_hostlist(text)))


def _storage(value: object) -> tuple[str, ...] | None:
    """Comma-separated storage hosts (hostlist syntax allowed); absent or blank: None,
    meaning every storage host."""
    text = _text(value)
    if not text:
        return None
    return tuple(dict.fromkeys(expand_hostlist(text)))


# ---------------------------------------------------------------------- the book


def job_to_dict(job: Job) -> dict:
    return {
        "job_id": job.job_id, "tenant": job.tenant, "user": job.user, "state": job.state,
        "hosts": list(job.hosts), "storage": None if job.storage is None else list(job.storage),
        "start": job.start, "end": job.end,
    }


def job_from_dict(d: dict) -> Job:
    storage = d.get("storage")
    return Job(
        job_id=str(d["job_id"]), tenant=d.get("tenant", ""), user=d.get("user", ""),
        state=d.get("state", "RUNNING"), hosts=tuple(d.get("hosts", ())),
        storage=None if storage is None else tuple(storage), start=d.get("start"), end=d.get("end"),
    )


class JobBook:
    """Which job runs where, by event time. Keeps the newest snapshot of every job; a
    snapshot older than the one held (a late record) is ignored when times are given."""

    def __init__(self) -> None:
        self._jobs: dict[str, Job] = {}
        self._seen: dict[str, float] = {}  # event time of the snapshot held, when known
        self._by_host: dict[str, set[str]] = {}

    @classmethod
    def from_file(cls, path: str | Path | None, **options) -> JobBook:
        """The jobs of a job file (`engine.job_sources.load_jobs`, with its `options`),
        each as its latest snapshot; empty for None."""
        from engine.job_sources import load_jobs  # (the readers of every source build on this module)

        book = cls()
        if path:
            for _, job in load_jobs(path, **options):
                book.update(job)
        return book

    def update(self, job: Job, *, ts: float | None = None) -> None:
        """Hold `job` as the latest snapshot of its id (taken at event time `ts`)."""
        held_at = self._seen.get(job.job_id)
        if ts is not None and held_at is not None and ts < held_at:
            return
        self._forget(job.job_id)
        self._jobs[job.job_id] = job
        if ts is not None:
            self._seen[job.job_id] = ts
        for host in job.hosts:
            self._by_host.setdefault(host, set()).add(job.job_id)

    def get(self, job_id: str) -> Job | None:
        return self._jobs.get(job_id)

    def running(self, at: float) -> list[Job]:
        return sorted((j for j in self._jobs.values() if j.running_at(at)), key=lambda j: job_sort_key(j.job_id))

    def jobs_of_host(self, host: str, at: float) -> list[Job]:
        jobs = (self._jobs[i] for i in self._by_host.get(host, ()))
        return sorted((j for j in jobs if j.running_at(at)), key=lambda j: job_sort_key(j.job_id))

    def all(self) -> list[Job]:
        return sorted(self._jobs.values(), key=lambda j: job_sort_key(j.job_id))

    def prune(self, *, before: float) -> int:
        """Forget jobs that ended before `before`, so a long-running book stays small."""
        done = [i for i, j in self._jobs.items() if j.end is not None and j.end < before]
        for job_id in done:
            self._forget(job_id)
        return len(done)

    def _forget(self, job_id: str) -> None:
        old = self._jobs.pop(job_id, None)
        self._seen.pop(job_id, None)
        for host in (old.hosts if old else ()):
            ids = self._by_host.get(host)
            if ids is not None:
                ids.discard(job_id)
                if not ids:
                    del self._by_host[host]

    def to_dict(self) -> dict:
        return {"jobs": [{**job_to_dict(j), "seen": self._seen.get(j.job_id)} for j in self.all()]}

    @classmethod
    def from_dict(cls, d: dict) -> JobBook:
        book = cls()
        for item in d.get("jobs", []):
            book.update(job_from_dict(item), ts=item.get("seen"))
        return book
