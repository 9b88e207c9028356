"""The jobs agent: a job_placement (Telegraf's or the contract's) or a whole scheduler
document in a message becomes job events on the symptoms topic; what cannot be read is
dead-lettered. Runs the agent in faust's test context (see test_agents.py)."""
from __future__ import annotations

import json
from pathlib import Path
from unittest import mock

import orjson

from engine.events import JOB, StageEvent
from streams.publish import messages_of_line
from streams.settings import WorkerSettings
from test_agents import run_agent, scenario, sent, sent_to, settings, truth  # noqa: F401 - fixtures
from testkit.samples import samples_dir

# --------------------------------------------------------------------------- jobs


def placement(scenario: Path, job_id: str) -> dict:
    """The scenario's job_placement record of `job_id`, as the contract (section 2) writes it."""
    for line in (scenario / "jobs.jsonl").read_bytes().splitlines():
        record = orjson.loads(line)
        if record["fields"]["job_id"] == job_id:
            return record
    raise AssertionError(f"job {job_id} is not in {scenario / 'jobs.jsonl'}")


def assert_one_job_event(settings: WorkerSettings, send: mock.MagicMock, *, record: dict, job: dict) -> None:
    out = sent_to(send, settings.symptoms_topic)
    assert [m.key for m in out] == [b"stage"]
    event = StageEvent.from_bytes(out[0].value)
    assert event.kind == JOB
    assert event.tick == record["timestamp"]
    assert event.job.job_id == job["job_id"]
    assert event.job.tenant == job["tenant"]
    assert list(event.job.hosts) == job["hosts"]


def test_jobs_turns_a_telegraf_placement_into_a_job_event(settings, sent, scenario, truth):
    """Telegraf adds its own `host` tag (the machine that ran the scheduler input) unless
    `omit_hostname` is set."""
    job = next(j for j in truth["jobs"] if j["job_id"] == truth["faults"][0]["affected_jobs"][0])
    record = placement(scenario, job["job_id"])
    record["tags"]["host"] = "slurmctl01"

    run_agent(settings, "jobs", [(job["job_id"].encode(), orjson.dumps(record))])

    assert sent_to(sent, settings.dlq_topic) == []
    assert_one_job_event(settings, sent, record=record, job=job)


def test_jobs_turns_a_contract_placement_into_a_job_event(settings, sent, scenario, truth):
    job = next(j for j in truth["jobs"] if j["job_id"] == truth["faults"][0]["affected_jobs"][0])
    record = placement(scenario, job["job_id"])
    assert "host" not in record["tags"]
    (message,) = messages_of_line(orjson.dumps(record))  # what `publish` sends for it
    assert (message.topic, message.key) == (settings.jobs_topic, job["job_id"].encode())

    run_agent(settings, "jobs", [(message.key, message.value)])

    assert sent_to(sent, settings.dlq_topic) == []
    assert_one_job_event(settings, sent, record=record, job=job)


def test_jobs_expands_an_squeue_document_and_dead_letters_only_its_bad_job(settings, sent):
    """A real slurmrestd answer (data_parser v0.0.42) sent as is, one job broken."""
    doc = json.loads((samples_dir() / "slurm" / "slurmrestd_jobs_v0.0.42_slurm24.11_slurmweb.json").read_text())
    doc["jobs"][2]["nodes"] = "cn[9-1]"
    run_agent(settings, "jobs", [(None, orjson.dumps(doc))])

    events = [StageEvent.from_bytes(m.value) for m in sent_to(sent, settings.symptoms_topic)]
    assert [(e.kind, e.tick, e.job.job_id, e.job.hosts) for e in events] == [
        (JOB, 1762788855, "6357", ("cn1",)), (JOB, 1762788855, "6365", ("cn1", "cn2", "cn3"))]
    [letter] = sent_to(sent, settings.dlq_topic)
    assert letter.headers["reason"] == b"bad_job" and b"jobs[2] (job 6369)" in letter.headers["detail"]
