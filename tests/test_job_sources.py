"""Jobs as schedulers give them: squeue / slurmrestd documents (the real samples in
shared/real-samples/slurm, data_parser v0.0.37 to v0.0.44) whatever the file is called,
Kubernetes pod lists (tests/data/k8s/pods.json: a PodList in the shape `kubectl get pods
-o json` prints, written after Kubernetes' documented Pod fields), and both as messages
of the jobs topic. Expected jobs are read off the files by hand."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.bounds import MAX_BATCH, MAX_MESSAGE_HOSTS
from engine.events import JOB
from engine.job_sources import PODS, SQUEUE, document_kind, job_message_events, load_jobs, read_jobs_file
from engine.jobs import JobBook, JobError
from engine.k8s_pods import PodLabels
from testkit.samples import samples_dir

SLURM = samples_dir() / "slurm"
PODS_FILE = Path(__file__).parent / "data" / "k8s" / "pods.json"
T0 = 1764400000  # 2025-11-29T07:06:40Z

# sample -> (job id, state, hosts) of every job in it
SAMPLES = {
    "squeue_v0.0.37_slurm21.08_rivos.json": {("58948420", "PENDING", ()), ("26515966", "RUNNING", ("cs75",))},
    "squeue_json_v0.0.39_slurm23.02_rivos_excerpt.json": {("52173767", "COMPLETED", ("cs66",))},
    "slurmrestd_jobs_v0.0.40_slurm23.11_slurmweb.json": {
        ("717", "COMPLETED", ("cn3",)), ("816", "RUNNING", ("cn1",)), ("671", "PENDING", ())},
    "slurmrestd_jobs_v0.0.41_slurm24.05_slurmweb.json": {
        ("649717", "TIMEOUT", ("cn001",)), ("649728", "RUNNING", ("cn004", "cn005", "cn006")), ("649730", "PENDING", ())},
    "slurmrestd_jobs_v0.0.42_slurm24.11_slurmweb.json": {
        ("6357", "TIMEOUT", ("cn1",)), ("6365", "RUNNING", ("cn1", "cn2", "cn3")), ("6369", "PENDING", ())},
    "slurmrestd_jobs_v0.0.43_slurm25.05_slurmweb.json": {
        ("4730", "TIMEOUT", ("cn1",)), ("4734", "RUNNING", ("cn1", "cn2", "cn3")), ("4741", "PENDING", ())},
    "slurmrestd_jobs_v0.0.44_slurm25.11_slurmweb.json": {
        ("5737", "TIMEOUT", ("cn1",)), ("5745", "RUNNING", ("cn1",)), ("5750", "PENDING", ())},
}


def _jobs(snaps) -> set:
    return {(job.job_id, job.state, job.hosts) for _, job in snaps}


def _compact(name: str) -> str:
    return json.dumps(json.loads((SLURM / name).read_text()))


# ------------------------------------------------------------------- squeue files


@pytest.mark.parametrize("name", sorted(SAMPLES))
@pytest.mark.parametrize("as_", ["squeue.json", "squeue.out", "one-line.jsonl", "one-line.jsonl.gz", "noext"])
def test_squeue_documents_are_read_whatever_the_file_is_called(tmp_path, name, as_):
    text = (SLURM / name).read_text() if "one-line" not in as_ else _compact(name) + "\n"
    path = tmp_path / as_
    if as_.endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8") as out:
            out.write(text)
    else:
        path.write_text(text)
    found = read_jobs_file(path)
    assert _jobs(found.snapshots) == SAMPLES[name]
    assert (found.scheduler_documents, found.scheduler) == (1, "slurm")


def test_appended_squeue_snapshots_keep_the_newest_state(tmp_path):
    # v0.0.41: job 649728 RUNNING; a later snapshot of the same queue says COMPLETED.
    doc = json.loads((SLURM / "slurmrestd_jobs_v0.0.41_slurm24.05_slurmweb.json").read_text())
    later = json.loads(json.dumps(doc))
    later["jobs"] = [j for j in later["jobs"] if j["job_id"] == 649728]
    later["jobs"][0]["job_state"] = ["COMPLETED"]
    path = tmp_path / "squeue-every-minute.out"
    path.write_text(json.dumps(doc, indent=2) + "\n" + json.dumps(later, indent=2) + "\n")
    book = JobBook.from_file(path)
    assert book.get("649728").state == "COMPLETED" and len(book.all()) == 3


def test_files_with_no_job_are_refused_and_bad_ones_name_the_line(tmp_path):
    path = tmp_path / "telemetry.jsonl"
    path.write_text('{"name": "switch_port", "tags": {"host": "leaf01"}, "fields": {}, "timestamp": 1}\n' * 3)
    with pytest.raises(JobError, match=r"telemetry.jsonl: no jobs in 3 records \(measurements: switch_port \(3\)\)"):
        load_jobs(path)
    path.write_text(_compact("squeue_v0.0.37_slurm21.08_rivos.json") + "\n" + '{"jobs": [{"job_id": 9, "nodes": "x[2-1]"}]}\n')
    with pytest.raises(JobError, match=r"line 2: jobs\[0\] \(job 9\): hostlist"):
        load_jobs(path)
    path.write_text('{"jobs": []}\n{"jobs": [} \n')
    with pytest.raises(JobError, match=r"line 2: bad JSON"):
        load_jobs(path)
    (tmp_path / "empty.out").write_text('{"meta": {}, "jobs": [], "errors": []}')
    assert load_jobs(tmp_path / "empty.out") == []  # an empty queue is a queue


# ------------------------------------------------------------------------ pods


def test_kubectl_pods_are_jobs():
    found = read_jobs_file(PODS_FILE)
    assert found.scheduler == "k8s"
    jobs = {job.job_id: job for _, job in found.snapshots}
    assert set(jobs) == {"research:llama-pretrain", "infra:nccl-allreduce-check", "monitoring:dcgm-exporter-5d9c7b8f6",
                         "research:vit-sweep"}
    llama = jobs["research:llama-pretrain"]  # kubeflow label, Kueue queue as tenant, started 07:00:05Z
    assert (llama.state, llama.hosts, llama.tenant, llama.start, llama.end) == (
        "RUNNING", ("gpu001", "gpu002"), "team-llm", T0 - 395, None)
    nccl = jobs["infra:nccl-allreduce-check"]  # Job label; no queue label: tenant is the namespace
    assert (nccl.state, nccl.hosts, nccl.tenant, nccl.end) == ("COMPLETED", ("gpu003", "gpu004"), "infra", T0 - 658)
    assert jobs["monitoring:dcgm-exporter-5d9c7b8f6"].hosts == ("gpu005",)  # no job label: its ReplicaSet
    sweep = jobs["research:vit-sweep"]  # the JobSet label wins over its Job's; unscheduled
    assert (sweep.state, sweep.hosts, sweep.tenant) == ("PENDING", (), "team-vision")
    assert JobBook.from_file(PODS_FILE).running(T0) == [jobs["monitoring:dcgm-exporter-5d9c7b8f6"], llama]


def test_pod_labels_are_configurable():
    labels = PodLabels(job=("training.kubeflow.org/replica-type",), tenant=("app",))
    jobs = {job.job_id: job for _, job in load_jobs(PODS_FILE, labels=labels)}
    assert jobs["research:master"].hosts == ("gpu001",) and jobs["research:worker"].hosts == ("gpu002",)
    assert jobs["monitoring:dcgm-exporter-5d9c7b8f6"].tenant == "dcgm-exporter"


def test_bad_pods_are_named(tmp_path):
    path = tmp_path / "pods.json"
    path.write_text(json.dumps({"kind": "List", "items": [{"kind": "Pod", "metadata": {"namespace": "x"}}]}))
    with pytest.raises(JobError, match=r"items\[0\]: pod without a metadata.name"):
        load_jobs(path)
    bad_time = {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"nodeName": "n1"},
                "status": {"phase": "Running", "startTime": "yesterday"}}
    path.write_text(json.dumps(bad_time))
    with pytest.raises(JobError, match=r"job default:p: bad time 'yesterday'"):
        load_jobs(path)


# ------------------------------------------------------------------- messages


def test_an_squeue_message_expands_into_its_jobs_at_the_document_time():
    value = _compact("slurmrestd_jobs_v0.0.41_slurm24.05_slurmweb.json").encode()
    events, rejects = job_message_events(value, received=T0, source="jobs")
    assert rejects == []
    assert {(e.kind, e.tick, e.job.job_id) for e in events} == {
        (JOB, 1747754565, "649717"), (JOB, 1747754565, "649728"), (JOB, 1747754565, "649730")}
    # v0.0.37 has no last_update: the message's own time
    events, _ = job_message_events(_compact("squeue_v0.0.37_slurm21.08_rivos.json").encode(), received=T0, source="j")
    assert {e.tick for e in events} == {T0}


def test_a_pod_list_message_is_jobs_and_a_bad_job_leaves_the_others():
    doc = json.loads(PODS_FILE.read_text())
    doc["items"][4]["status"]["startTime"] = "not a time"  # the dcgm-exporter pod
    events, rejects = job_message_events(json.dumps(doc).encode(), received=T0, source="jobs")
    assert sorted(e.job.job_id for e in events) == ["infra:nccl-allreduce-check", "research:llama-pretrain",
                                                     "research:vit-sweep"]
    [reject] = rejects
    assert reject.reason == "bad_job" and "monitoring:dcgm-exporter-5d9c7b8f6: bad time 'not a time'" in reject.detail


def test_scheduler_messages_are_bounded():
    many = {"jobs": [{"job_id": i, "nodes": "n1"} for i in range(MAX_BATCH + 1)]}
    assert [r.reason for r in job_message_events(json.dumps(many).encode(), received=T0, source="j")[1]] == [
        "batch_too_large"]
    wide = {"jobs": [{"job_id": i, "nodes": "n[1-65536]"} for i in range(MAX_MESSAGE_HOSTS // 65536 + 2)]}
    events, rejects = job_message_events(json.dumps(wide).encode(), received=T0, source="j")
    assert len(events) == MAX_MESSAGE_HOSTS // 65536 and [r.reason for r in rejects] == ["too_many_hosts"]
    assert [r.reason for r in job_message_events(b'{"jobs": [1', received=T0, source="j")[1]] == ["bad_json"]


# ------------------------------------------------------------- never misread

_names = st.text("abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=12)
_placement = st.fixed_dictionaries({
    "name": st.just("job_placement"),
    "tags": st.fixed_dictionaries({"scheduler": st.sampled_from(["slurm", "k8s"]), "cluster": _names}),
    "fields": st.fixed_dictionaries({
        "job_id": st.integers(1, 10**9).map(str), "account": _names, "user": _names,
        "job_state": st.sampled_from(["RUNNING", "COMPLETED", "PENDING"]), "nodes": _names,
        # a placement may carry any field, even one called jobs
    }, optional={"jobs": _names, "storage": _names}),
    "timestamp": st.integers(T0, T0 + 10**6),
})
_squeue_job = st.fixed_dictionaries({
    "job_id": st.integers(1, 10**9), "job_state": st.sampled_from([["RUNNING"], "PENDING", ["COMPLETED"]]),
    "nodes": _names, "account": _names, "user_name": _names,
    "start_time": st.one_of(st.integers(T0, T0 + 10**6),
                            st.fixed_dictionaries({"set": st.just(True), "infinite": st.just(False),
                                                   "number": st.integers(T0, T0 + 10**6)})),
})
_squeue = st.fixed_dictionaries({"jobs": st.lists(_squeue_job, max_size=4)},
                                optional={"meta": st.just({"plugin": {"data_parser": "data_parser/v0.0.41"}}),
                                          "errors": st.just([]), "last_update": st.integers(T0, T0 + 10**6)})


@settings(max_examples=150, deadline=None)
@given(placements=st.lists(_placement, min_size=1, max_size=5), docs=st.lists(_squeue, max_size=3), data=st.data())
def test_placements_and_squeue_documents_are_never_taken_for_each_other(tmp_path_factory, placements, docs, data):
    assert all(document_kind(p) is None for p in placements) and all(document_kind(d) == SQUEUE for d in docs)
    assert document_kind({"metrics": placements}) is None
    lines = [json.dumps(x) for x in placements + docs]
    lines = data.draw(st.permutations(lines))
    path = tmp_path_factory.mktemp("j") / data.draw(st.sampled_from(["jobs.jsonl", "jobs.out", "jobs.json"]))
    path.write_text("\n".join(lines) + "\n")
    got = sorted(job.job_id for _, job in load_jobs(path))
    want = sorted([p["fields"]["job_id"] for p in placements] + [str(j["job_id"]) for d in docs for j in d["jobs"]])
    assert got == want
    for p in placements:  # as a message, a placement stays a placement
        events, rejects = job_message_events(json.dumps(p).encode(), received=T0, source="j")
        assert rejects == [] and [(e.tick, e.job.job_id) for e in events] == [(p["timestamp"], p["fields"]["job_id"])]


def test_pod_documents_are_recognised_only_as_such():
    doc = json.loads(PODS_FILE.read_text())
    assert document_kind(doc) == PODS and document_kind(doc["items"][0]) == PODS
    assert document_kind({"kind": "List", "items": [{"kind": "Service"}]}) is None
    assert document_kind({"name": "job_placement", "kind": "List", "items": []}) == PODS  # kubectl's, not Telegraf's


# ------------------------------------------------------------------- at start


def test_a_replay_says_which_hosts_of_its_jobs_the_topology_lacks(tmp_path, caplog):
    """A scheduler's node names that are not the fabric's (Slurm's cn004 where the
    topology says gpu004) leave every incident without its affected jobs: the engine says
    so when it starts, naming hosts and jobs, and says nothing when every host is known."""
    from compose.engine import EngineSettings, build_engine
    topology = Path(__file__).parent / "data" / "air.dot"
    text = (SLURM / "slurmrestd_jobs_v0.0.41_slurm24.05_slurmweb.json").read_text()
    foreign = tmp_path / "foreign.json"
    foreign.write_text(text)
    mixed = tmp_path / "mixed.json"  # (job 649728 on the fabric's hosts; 649717 still on cn001)
    mixed.write_text(text.replace("cn[004-006]", "gpu[004-006]").replace('"cn00', '"gpu00').replace('"gpu001"', '"cn001"'))
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({**json.loads(text), "jobs": []}))
    placements = tmp_path / "placements.jsonl"
    placements.write_text(json.dumps({"name": "job_placement", "tags": {"scheduler": "slurm"}, "timestamp": T0,
                                      "fields": {"job_id": "7", "account": "acme", "job_state": "RUNNING",
                                                 "nodes": "gpu[001-002]"}}) + "\n")
    said = {}
    for path in (foreign, mixed, empty, placements):
        caplog.clear()
        with caplog.at_level("WARNING", logger="fabric_rca.compose"):
            build_engine(EngineSettings(topology=topology, jobs_file=path))
        said[path.name] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("jobs: ")]
    [line] = said["foreign.json"]
    assert "4 of the 4 hosts its 3 job(s) run on are not in the topology (e.g. cn001, cn004, cn005)" in line
    assert "2 job(s) have no host in it (e.g. 649717, 649728)" in line
    [line] = said["mixed.json"]
    assert "1 of the 4 hosts" in line and "1 job(s) have no host in it (e.g. 649717)" in line
    [line] = said["empty.json"]
    assert "no job in it" in line
    assert said["placements.jsonl"] == []
