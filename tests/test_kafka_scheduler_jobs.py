"""Jobs sent the way a scheduler gives them: a worker fleet whose only jobs arrive on the
jobs topic as one slurmrestd document (data_parser v0.0.41 shape, as the real sample in
shared/real-samples/slurm has it: job_state a list, times wrapped) names the same
affected jobs as a replay that preloads the scenario's job_placement file.

KAFKA_BOOTSTRAP=127.0.0.1:9092 pytest tests/test_kafka_scheduler_jobs.py
"""
import json
import shutil

import pytest

from engine.job_sources import load_jobs
from testkit.store import incident_summary
from testkit.workers import Fleet

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.slow,
    pytest.mark.filterwarnings(r"ignore:.*is deprecated\. Use files\(\) instead:DeprecationWarning"),
]


def _number(value):
    return {"set": value is not None, "infinite": False, "number": int(value or 0)}


def slurmrestd_document(jobs_file) -> dict:
    """The scenario's jobs, each at its latest snapshot, as slurmrestd v0.0.41 answers /jobs."""
    latest = {job.job_id: (ts, job) for ts, job in load_jobs(jobs_file)}
    first = min(ts for ts, _ in latest.values())
    return {
        "jobs": [{"job_id": int(job.job_id), "account": job.tenant, "user_name": job.user, "cluster": "sim",
                  "job_state": [job.state], "nodes": ",".join(job.hosts),
                  "start_time": _number(job.start), "end_time": _number(job.end)}
                 for _, job in latest.values()],
        "last_update": _number(first), "meta": {"plugin": {"data_parser": "data_parser/v0.0.41"}},
        "errors": [], "warnings": [],
    }


def test_jobs_from_a_slurmrestd_document_on_the_jobs_topic(tmp_path, scenario_dir, kafka_bootstrap, replay_once):
    from kafka import KafkaProducer

    source = scenario_dir("pfc_storm")
    _, expected, _ = replay_once(source)
    assert any(i["affected_jobs"] for i in expected), "the scenario must affect a job for this test to mean anything"
    folder = tmp_path / "scenario"
    folder.mkdir()
    for name in ("topology.dot", "telemetry.jsonl.gz"):
        shutil.copy(source / name, folder / name)
    (folder / "jobs.jsonl").write_text('{"meta": {}, "jobs": [], "errors": []}\n')  # an empty queue preloaded

    fleet = Fleet(tmp_path, folder, kafka_bootstrap)
    try:
        fleet.start("w1")
        producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
        producer.send(fleet.prefix + "fabric.jobs", value=json.dumps(slurmrestd_document(source / "jobs.jsonl")).encode())
        producer.flush()
        producer.close()
        stats = fleet.publish()
        assert stats.failed == 0 and stats.jobs == 0
        got = fleet.wait_for(expected)
        assert incident_summary(got) == incident_summary(expected), fleet.logs()
    finally:
        fleet.stop()
