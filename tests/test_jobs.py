"""Job parsing (hostlists, job_placement records, squeue --json) and the JobBook.

T0 = 1764400000 is 2025-11-29T07:06:40Z (20421 days and 25600 s after the epoch).
"""
from __future__ import annotations

import gzip
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.jobs import (
    JobBook,
    JobError,
    epoch_seconds,
    expand_hostlist,
    job_from_placement,
    jobs_from_squeue,
)
from engine.job_sources import load_jobs
from engine.types import Job

T0 = 1764400000


# ------------------------------------------------------------------ hostlists


@pytest.mark.parametrize(
    ("expr", "hosts"),
    [
        ("gpu[001-004,009],gpu011", ["gpu001", "gpu002", "gpu003", "gpu004", "gpu009", "gpu011"]),
        ("r[1-2]n[01-02]", ["r1n01", "r1n02", "r2n01", "r2n02"]),
        (" gpu001 , gpu[002 - 003]\n", ["gpu001", "gpu002", "gpu003"]),
        ("n[9-11]", ["n9", "n10", "n11"]),
        ("n[08-10]-ib", ["n08-ib", "n09-ib", "n10-ib"]),
        ("gpu[7]", ["gpu7"]),
        ("gpu001", ["gpu001"]),
        ("", []),
    ],
)
def test_expand_hostlist(expr, hosts):
    assert expand_hostlist(expr) == hosts


@pytest.mark.parametrize(
    ("expr", "words"),
    [
        ("gpu[004-001]", "runs backwards"),
        ("gpu[001-", "'[' without ']'"),
        ("gpu]1", "']' without '['"),
        ("gpu[a-b]", "bad range 'a-b'"),
        ("gpu[]", "bad range ''"),
        ("gpu[1-2-3]", "bad range '1-2-3'"),
        ("gpu[[1]]", "nested"),
        ("gpu1,,gpu2", "empty name"),
        ("gpu[0-99999999]", "longer than"),
        ("a[1-40000],b[1-40000]", "expands to 80,000 hosts"),  # each part bounded, the list too
        ("g" + "[1]" * 17, "more than 16 ranges"),  # (python-hostlist recurses once per bracket)
    ],
)
def test_expand_hostlist_errors(expr, words):
    with pytest.raises(JobError, match=words.replace("[", "\\[")):
        expand_hostlist(expr)


def _compress(numbers: list[int], width: int) -> str:
    """Runs of consecutive numbers as N-M ranges, in the given order."""
    parts, i = [], 0
    while i < len(numbers):
        j = i
        while j + 1 < len(numbers) and numbers[j + 1] == numbers[j] + 1:
            j += 1
        lo, hi = f"{numbers[i]:0{width}d}", f"{numbers[j]:0{width}d}"
        parts.append(lo if i == j else f"{lo}-{hi}")
        i = j + 1
    return ",".join(parts)


@given(
    width=st.integers(1, 4),
    data=st.data(),
    prefix=st.text("abgpu-.", min_size=1, max_size=5),
    suffix=st.sampled_from(["", "-ib", ".rack1"]),
)
def test_expansion_of_compressed_padded_numbers_is_the_list(width, data, prefix, suffix):
    """Invariant: expanding a bracket expression built from a list of zero-padded
    numbers gives back the names of that list, in order."""
    numbers = data.draw(st.lists(st.integers(0, 10**width - 1), min_size=1, max_size=40))
    names = [f"{prefix}{n:0{width}d}{suffix}" for n in numbers]
    assert expand_hostlist(f"{prefix}[{_compress(numbers, width)}]{suffix}") == names


@given(st.lists(st.tuples(st.sampled_from(["r", "n", "-ib", ""]), st.integers(0, 12), st.integers(0, 3)),
                min_size=1, max_size=4))
def test_a_name_of_several_ranges_expands_to_their_product_in_order(pieces):
    """Invariant: a name of several ranges (`r[1-2]n[01-02]`) expands as
    itertools.product of its pieces, the first range outermost."""
    from itertools import product

    expr = "".join(f"{text}[{lo}-{lo + span}]" for text, lo, span in pieces)
    expected = ["".join(p) for p in product(*[[f"{text}{n}" for n in range(lo, lo + span + 1)]
                                              for text, lo, span in pieces])]
    assert expand_hostlist(expr) == expected


@given(st.lists(st.from_regex(r"[a-z][a-z0-9.-]{0,8}", fullmatch=True), max_size=10))
def test_plain_names_expand_to_themselves(names):
    assert expand_hostlist(",".join(names)) == names


# ----------------------------------------------------------------------- times


@pytest.mark.parametrize(
    "value",
    [T0, T0 * 1000, T0 * 1_000_000, T0 * 1_000_000_000, float(T0), str(T0), "2025-11-29T07:06:40Z",
     "2025-11-29T08:06:40+01:00", "2025-11-29T07:06:40", {"set": True, "infinite": False, "number": T0}],
)
def test_epoch_seconds(value):
    assert epoch_seconds(value) == T0


@pytest.mark.parametrize("value", [None, 0, "", "Unknown", {"set": False, "number": 0}, {"set": True, "infinite": True, "number": 0}])
def test_epoch_seconds_unset(value):
    assert epoch_seconds(value) is None


@pytest.mark.parametrize("value", ["yesterday", float("nan"), True, [1]])
def test_epoch_seconds_bad(value):
    with pytest.raises(JobError):
        epoch_seconds(value)


# -------------------------------------------------------------- job_placement


def test_job_from_placement_running():
    job = job_from_placement(
        tags={"scheduler": "slurm", "cluster": "c1"},
        fields={"job_id": 4242, "account": "acme", "user": "alice", "job_state": "RUNNING",
                "nodes": "gpu[001-002],gpu001", "storage": "stor01, stor02", "start_time": T0 * 1000},
        ts=T0 + 60,
    )
    assert job == Job(job_id="4242", tenant="acme", user="alice", state="RUNNING", hosts=("gpu001", "gpu002"),
                      storage=("stor01", "stor02"), start=T0, end=None)


def test_job_from_placement_terminal_ends_at_snapshot_unless_end_given():
    fields = {"job_id": "7", "account": "beta", "job_state": "cancelled by 0", "nodes": "gpu003", "start_time": "2025-11-29T07:06:40Z"}
    job = job_from_placement(tags={}, fields=fields, ts=T0 + 500)
    assert (job.state, job.start, job.end, job.storage, job.user) == ("CANCELLED", T0, T0 + 500, None, "")
    job = job_from_placement(tags={}, fields={**fields, "end_time": T0 + 100}, ts=T0 + 500)
    assert job.end == T0 + 100


def test_job_from_placement_errors_name_the_job():
    with pytest.raises(JobError, match="without job_id"):
        job_from_placement(tags={}, fields={"nodes": "gpu1"}, ts=T0)
    with pytest.raises(JobError, match="job 9: hostlist 'gpu\\[2-1\\]'"):
        job_from_placement(tags={}, fields={"job_id": 9, "nodes": "gpu[2-1]"}, ts=T0)


# ----------------------------------------------------------------------- squeue


SQUEUE = {
    "last_update": {"set": True, "infinite": False, "number": T0 + 900},
    "jobs": [
        {"job_id": 4242, "account": "acme", "user_name": "alice", "job_state": ["RUNNING"], "nodes": "gpu[001-002]",
         "start_time": {"set": True, "infinite": False, "number": T0},
         "end_time": {"set": True, "infinite": True, "number": 0}},
        {"job_id": {"set": True, "infinite": False, "number": 4243}, "account": "beta", "user_name": "bob",
         "job_state": "COMPLETED", "nodes": "gpu003", "start_time": T0 - 1000, "end_time": {"set": False, "number": 0}},
        {"job_id": 4244, "account": "gamma", "user_name": "carol", "job_state": ["PENDING"], "nodes": "",
         "start_time": {"set": True, "infinite": False, "number": T0 + 3600},
         "end_time": {"set": True, "infinite": False, "number": T0 + 7200}},
    ],
}


def test_jobs_from_squeue_unwraps_numbers_and_states():
    running, completed, pending = jobs_from_squeue(SQUEUE)
    assert running == Job(job_id="4242", tenant="acme", user="alice", state="RUNNING", hosts=("gpu001", "gpu002"),
                          storage=None, start=T0, end=None)
    # COMPLETED without an end time: ended by the document's last_update
    assert (completed.job_id, completed.state, completed.start, completed.end) == ("4243", "COMPLETED", T0 - 1000, T0 + 900)
    assert (pending.state, pending.hosts) == ("PENDING", ())
    assert not pending.running_at(T0 + 5000)  # projected times do not make it run
    assert jobs_from_squeue(SQUEUE, ts=T0 + 1)[1].end == T0 + 1


def test_jobs_from_squeue_errors():
    with pytest.raises(JobError, match="no 'jobs' list"):
        jobs_from_squeue({"meta": {}})
    with pytest.raises(JobError, match=r"jobs\[1\]: no job_id"):
        jobs_from_squeue({"jobs": [{"job_id": 1}, {"nodes": "x"}]})


# ------------------------------------------------------------------------ files


def _placement(job_id: str, state: str, ts: object, **extra) -> dict:
    fields = {"job_id": job_id, "account": "acme", "user": "u", "job_state": state, "nodes": "gpu[001-002]", **extra}
    return {"name": "job_placement", "tags": {"scheduler": "slurm", "cluster": "c1", "host": "slurmctld"},
            "fields": fields, "timestamp": ts}


def test_load_jobs_jsonl_gz_sorted_by_event_time(tmp_path):
    lines = [
        _placement("1", "COMPLETED", (T0 + 20) * 1_000_000_000),  # ns, arrives first
        {"metrics": [_placement("1", "RUNNING", "2025-11-29T07:06:40Z", start_time=T0),
                     {"name": "switch_port", "tags": {"host": "leaf01"}, "fields": {}, "timestamp": T0}]},
        _placement("2", "RUNNING", (T0 + 10) * 1000),  # ms
    ]
    path = tmp_path / "jobs.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as out:
        out.write("\n".join(json.dumps(x) for x in lines) + "\n\n")
    snaps = load_jobs(path)
    assert [(ts, job.job_id, job.state) for ts, job in snaps] == [
        (T0, "1", "RUNNING"), (T0 + 10, "2", "RUNNING"), (T0 + 20, "1", "COMPLETED"),
    ]
    assert snaps[2][1].end == T0 + 20


def test_load_jobs_errors_name_file_and_line(tmp_path):
    path = tmp_path / "jobs.jsonl"
    path.write_text(json.dumps(_placement("1", "RUNNING", T0)) + "\n{oops\n")
    with pytest.raises(JobError, match=r"jobs.jsonl, line 2: bad JSON"):
        load_jobs(path)
    path.write_text(json.dumps(_placement("1", "RUNNING", T0)) + "\n" + json.dumps(_placement("2", "RUNNING", None)) + "\n")
    with pytest.raises(JobError, match=r"jobs.jsonl, line 2: job_placement record without a timestamp"):
        load_jobs(path)
    path.write_text(json.dumps(_placement("3", "RUNNING", T0, nodes="gpu[9-1]")) + "\n")
    with pytest.raises(JobError, match=r"jobs.jsonl, line 1: job 3: hostlist"):
        load_jobs(path)
    with pytest.raises(JobError, match="missing.jsonl: no such jobs file"):
        load_jobs(tmp_path / "missing.jsonl")
    # a broken gzip file is named, whatever broke: its deflate data, its end, its CRC
    packed = gzip.compress((json.dumps(_placement("1", "RUNNING", T0)) + "\n").encode())
    bad_crc = packed[:-8] + bytes([packed[-8] ^ 0xFF]) + packed[-7:]
    for name, data, why in [("corrupt", packed[:10] + b"\xff" * 64, "invalid block type"),
                            ("truncated", packed[:-4], "ended before"), ("crc", bad_crc, "CRC check failed")]:
        path = tmp_path / f"{name}.jsonl.gz"
        path.write_bytes(data)
        with pytest.raises(JobError, match=rf"{name}.jsonl.gz: cannot read jobs file: .*{why}"):
            load_jobs(path)


def test_load_jobs_squeue_document(tmp_path):
    path = tmp_path / "squeue.json"
    path.write_text(json.dumps(SQUEUE))
    # event time: the job's start, else the document's last_update
    assert [(ts, job.job_id) for ts, job in load_jobs(path)] == [(T0 - 1000, "4243"), (T0, "4242"), (T0 + 3600, "4244")]
    path.write_text('{"jobs": [\n  {"job_id": 1,}\n]}')
    with pytest.raises(JobError, match=r"squeue.json, line 2: bad JSON"):
        load_jobs(path)


# ----------------------------------------------------------------------- JobBook


def _job(job_id: str, *, hosts=("gpu001",), state="RUNNING", start=None, end=None) -> Job:
    return Job(job_id=job_id, tenant="t", user="u", state=state, hosts=tuple(hosts), storage=None, start=start, end=end)


def test_book_running_windows_are_half_open():
    book = JobBook()
    book.update(_job("10", start=100.0, end=200.0))
    book.update(_job("9", start=None, end=None, hosts=("gpu002",)))
    book.update(_job("1000", start=150.0, end=None, hosts=("gpu001", "gpu002")))
    book.update(_job("11", state="PENDING", start=None, end=None))
    assert [j.job_id for j in book.running(99.0)] == ["9"]
    assert [j.job_id for j in book.running(100.0)] == ["9", "10"]
    assert [j.job_id for j in book.running(199.9)] == ["9", "10", "1000"]  # numeric order
    assert [j.job_id for j in book.running(200.0)] == ["9", "1000"]
    assert [j.job_id for j in book.jobs_of_host("gpu001", 160.0)] == ["10", "1000"]
    assert [j.job_id for j in book.jobs_of_host("gpu002", 120.0)] == ["9"]
    assert book.jobs_of_host("gpu404", 120.0) == []
    assert [j.job_id for j in book.all()] == ["9", "10", "11", "1000"]


def test_book_newest_snapshot_replaces_and_late_ones_are_ignored():
    book = JobBook()
    book.update(_job("1", start=100.0), ts=100.0)
    book.update(_job("1", state="COMPLETED", start=100.0, end=150.0, hosts=("gpu009",)), ts=150.0)
    book.update(_job("1", start=100.0), ts=140.0)  # a late RUNNING record
    assert book.get("1").state == "COMPLETED"
    assert book.running(160.0) == [] and [j.job_id for j in book.running(120.0)] == ["1"]
    assert book.jobs_of_host("gpu001", 120.0) == []  # the old placement is forgotten
    assert [j.job_id for j in book.jobs_of_host("gpu009", 120.0)] == ["1"]
    assert book.get("2") is None


def test_book_round_trip_and_prune():
    book = JobBook()
    book.update(_job("1", start=100.0, end=150.0), ts=150.0)
    book.update(Job(job_id="2", tenant="acme", user="a", state="RUNNING", hosts=("gpu1", "gpu2"),
                    storage=("stor01",), start=120.0, end=None), ts=120.0)
    d = json.loads(json.dumps(book.to_dict()))
    again = JobBook.from_dict(d)
    assert again.all() == book.all() and again.to_dict() == d
    again.update(_job("1", start=100.0), ts=149.0)  # snapshot times survive the trip
    assert again.get("1").end == 150.0
    assert again.prune(before=151.0) == 1
    assert [j.job_id for j in again.all()] == ["2"] and again.jobs_of_host("gpu001", 120.0) == []
