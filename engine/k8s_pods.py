"""Kubernetes pods (`kubectl get pods -o json`, a `List`/`PodList` of `Pod`s, or one Pod)
as job placements: one job per group of pods that carry the same job label.

A pod's job is the value of the first of `PodLabels.job` it carries (defaults below,
all documented by their projects: JobSet, Kubeflow's training operator, Volcano,
LeaderWorkerSet, then the Job controller's own two), else its controlling owner
(`ownerReferences[controller]`), else the pod itself. The job id is
`<namespace>:<job>` (a `/` would not fit in a URL path segment such as
/jobs/{id}/incidents). Its tenant is the first of `PodLabels.tenant` (default: Kueue's
queue label) on any of its pods, else the namespace.

Hosts: `spec.nodeName` of every pod that has one. State: RUNNING when a pod runs (or
its node stopped reporting: phase Unknown), else PENDING when one waits, else FAILED
when one failed, else COMPLETED. Start: the earliest `status.startTime`; end, for a
finished job, the latest container `finishedAt`.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from engine.jobs import JobError, epoch_seconds
from engine.types import Job

DEFAULT_JOB_LABELS = (
    "jobset.sigs.k8s.io/jobset-name",
    "training.kubeflow.org/job-name",
    "volcano.sh/job-name",
    "leaderworkerset.sigs.k8s.io/name",
    "batch.kubernetes.io/job-name",
    "job-name",
)
DEFAULT_TENANT_LABELS = ("kueue.x-k8s.io/queue-name",)
_TERMINAL = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True)
class PodLabels:
    """Which pod labels name a pod's job and its tenant, first found wins."""

    job: tuple[str, ...] = DEFAULT_JOB_LABELS
    tenant: tuple[str, ...] = DEFAULT_TENANT_LABELS


def is_pod_document(doc: object) -> bool:
    """A Pod, or a list of them as kubectl prints it (kind List or PodList, items Pods)."""
    if not isinstance(doc, dict):
        return False
    if doc.get("kind") == "Pod":
        return "spec" in doc or "metadata" in doc
    items = doc.get("items")
    if doc.get("kind") not in ("List", "PodList") or not isinstance(items, list):
        return False
    return all(isinstance(i, dict) and (i.get("kind", "Pod") == "Pod") for i in items)


def jobs_from_pods(doc: dict, *, labels: PodLabels = PodLabels(), taken: float | None = None,
                   on_error: Callable[[JobError], None] | None = None) -> list[Job]:
    """The jobs of a pod document; `taken` (when it was taken) ends a finished job whose
    containers give no finish time. A pod or job that cannot be read raises, or with
    `on_error` is handed to it and left out."""
    pods = [doc] if doc.get("kind") == "Pod" else doc["items"]
    groups: dict[str, list[dict]] = {}
    tenants: dict[str, str] = {}
    for i, pod in enumerate(pods):
        where = "pod" if doc.get("kind") == "Pod" else f"items[{i}]"
        try:
            job_id, tenant = _job_of(pod, labels=labels, where=where)
        except JobError as exc:
            if on_error is None:
                raise
            on_error(exc)
            continue
        groups.setdefault(job_id, []).append(pod)
        if tenant and job_id not in tenants:
            tenants[job_id] = tenant
    jobs = []
    for job_id, members in groups.items():
        try:
            jobs.append(_job(job_id, members, tenant=tenants.get(job_id) or job_id.split(":", 1)[0], taken=taken))
        except JobError as exc:
            if on_error is None:
                raise
            on_error(exc)
    return jobs


def _job_of(pod: object, *, labels: PodLabels, where: str) -> tuple[str, str]:
    if not isinstance(pod, dict) or not isinstance(pod.get("metadata"), dict):
        raise JobError(f"{where}: not a pod (no 'metadata' object)")
    meta = pod["metadata"]
    name, namespace = meta.get("name"), meta.get("namespace") or "default"
    if not isinstance(name, str) or not name or not isinstance(namespace, str):
        raise JobError(f"{where}: pod without a metadata.name")
    tags = meta.get("labels") or {}
    if not isinstance(tags, dict):
        raise JobError(f"{where} (pod {name}): metadata.labels must be an object")
    job = next((tags[k] for k in labels.job if isinstance(tags.get(k), str) and tags[k]), None)
    if job is None:
        owners = meta.get("ownerReferences") or []
        owner = next((o for o in owners if isinstance(o, dict) and o.get("controller")), None)
        job = owner.get("name") if owner and isinstance(owner.get("name"), str) else name
    tenant = next((tags[k] for k in labels.tenant if isinstance(tags.get(k), str) and tags[k]), "")
    return f"{namespace}:{job}", tenant


def _job(job_id: str, pods: list[dict], *, tenant: str, taken: float | None) -> Job:
    phases = [_status(p).get("phase") or "Pending" for p in pods]
    if any(ph in ("Running", "Unknown") for ph in phases):
        state = "RUNNING"
    elif any(ph not in _TERMINAL for ph in phases):
        state = "PENDING"
    else:
        state = "FAILED" if "Failed" in phases else "COMPLETED"
    try:
        starts = [t for p in pods if (t := epoch_seconds(_status(p).get("startTime"))) is not None]
        ends = [t for p in pods for t in _finished(p)] if state in ("FAILED", "COMPLETED") else []
    except JobError as exc:
        raise JobError(f"job {job_id}: {exc}") from None
    hosts = sorted({n for p in pods if isinstance(n := (p.get("spec") or {}).get("nodeName"), str) and n})
    end = max(ends) if ends else (taken if state in ("FAILED", "COMPLETED") else None)
    return Job(job_id=job_id, tenant=tenant, user="", state=state, hosts=tuple(hosts), storage=None,
               start=min(starts) if starts else None, end=end)


def _status(pod: dict) -> dict:
    status = pod.get("status")
    return status if isinstance(status, dict) else {}


def _finished(pod: dict):
    for cs in _status(pod).get("containerStatuses") or ():
        term = ((cs or {}).get("state") or {}).get("terminated") if isinstance(cs, dict) else None
        if isinstance(term, dict):
            t = epoch_seconds(term.get("finishedAt"))
            if t is not None:
                yield t
