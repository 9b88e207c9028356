"""What a tenant may see of an incident: the one place tenant scoping happens. Pure.

A tenant sees an incident only when one of its affected jobs is the tenant's, and in it
only what is the tenant's or nobody's:

- its own affected jobs (other tenants' jobs, their ids included, are left out);
- the fabric (switches, storage, the links between them) and the hosts its own jobs run
  on (`affected_jobs[].hosts`); any other host is private to whoever runs there. A
  private host's symptoms and evidence are dropped; where its name stays needed (a root
  cause on it, a link to it, a title, an impact) it reads `(hidden)`:
  `PFC pause storm from (hidden):eth0`. Another tenant's job reads `job (hidden)`.
- Without a topology the API cannot tell a switch from a host: every device but the
  tenant's own hosts is then private (it fails closed).

The routes filter on the scoped view (`matches`), so no filter, id or stream reaches
what scoping took out. Users are never in an incident (the job book keeps them).
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from engine.incidents import incident_title

HIDDEN = "(hidden)"
SHARED_ROLES = frozenset({"superspine", "spine", "leaf", "storage"})


@dataclass(frozen=True)
class Fabric:
    """What scoping needs of the topology: which devices are shared fabric."""

    shared: frozenset[str] = frozenset()

    @classmethod
    def of(cls, document: dict | None) -> Fabric:
        devices = (document or {}).get("devices") or []
        return cls(frozenset(str(d.get("id")) for d in devices
                             if isinstance(d, dict) and d.get("id") and str(d.get("role") or "") in SHARED_ROLES))


def devices_of(entity_id: str, kind: str = "") -> list[str]:
    """The devices an entity id names: a link's two ends' devices, an interface's device."""
    if kind == "job":
        return []
    return [end.partition(":")[0] for end in str(entity_id).split("--")]


def scope_incident(incident: dict, *, tenant: str, fabric: Fabric) -> dict | None:
    """`incident` as `tenant` may see it, or None when none of its jobs is the tenant's."""
    jobs = incident.get("affected_jobs") or []
    mine = [j for j in jobs if j.get("tenant") == tenant]
    if not mine:
        return None
    own_jobs = {str(j["job_id"]) for j in mine}
    own_hosts = {str(h) for j in mine for h in j.get("hosts") or []}
    names = _device_names(incident)
    private = {d for d in names if d not in own_hosts and d not in fabric.shared}
    hide = _Hider(private, {str(j["job_id"]) for j in jobs} - own_jobs)
    causes = [_cause(rc, hide, own_jobs) for rc in incident.get("root_causes") or []]
    top = min(causes, key=lambda rc: rc.get("rank", 0), default=None)
    return {
        **incident,
        "title": incident_title(top["cause"], top["entity"]["id"], len(mine)) if top else hide.text(incident["title"]),
        "maintenance_reason": hide.text(incident.get("maintenance_reason")),
        "root_causes": causes,
        "affected_jobs": [{**j, "impact": hide.text(j.get("impact"))} for j in mine],
        "symptoms": [s for s in incident.get("symptoms") or [] if not hide.touches(s.get("device", ""))
                     and not hide.touches_entity(s.get("entity") or {})],
    }


def scope_topology(document: dict, *, visible_hosts: Iterable[str]) -> dict:
    """`document` without the devices that are neither fabric nor in `visible_hosts`, nor their links."""
    keep = Fabric.of(document).shared | set(visible_hosts)
    devices = [d for d in document.get("devices") or [] if isinstance(d, dict) and str(d.get("id")) in keep]
    links = [k for k in document.get("links") or []
             if isinstance(k, dict) and all(end in keep for end in devices_of(str(k.get("a"))) + devices_of(str(k.get("b"))))]
    return {**document, "devices": devices, "links": links}


def visible_hosts(incident: dict) -> set[str]:
    """The hosts a scoped incident's jobs run on."""
    return {str(h) for j in incident.get("affected_jobs") or [] for h in j.get("hosts") or []}


def matches(incident: dict, *, entity: str | None = None, job: str | None = None, tenant: str | None = None,
            **_others: Any) -> bool:
    """The filters of `GET /incidents` that name things scoping may hide, on a scoped incident.

    (status, cause and the time window are the same on both views: the SQL query keeps them.)"""
    jobs = incident.get("affected_jobs") or []
    if job is not None and all(str(j["job_id"]) != job for j in jobs):
        return False
    if tenant is not None and all(j.get("tenant") != tenant for j in jobs):
        return False
    if entity is not None:
        ids = {rc["entity"]["id"] for rc in incident.get("root_causes") or []}
        ids |= {s["entity"]["id"] for s in incident.get("symptoms") or []}
        ids |= {s["device"] for s in incident.get("symptoms") or []}
        return entity in ids
    return True


class _Hider:
    """Names of private hosts and other tenants' jobs, taken out of ids and text."""

    def __init__(self, private: set[str], other_jobs: set[str]) -> None:
        self.private = private
        alternatives = "|".join(re.escape(d) for d in sorted(private, key=len, reverse=True))
        # a name stands alone: not inside a longer name (gpu0 in gpu01), but a link's `--` may border it
        self._device = re.compile(rf"(?:(?<=--)|(?<![\w.-]))(?:{alternatives})(?![\w.]|-(?!-))") if private else None
        jobs = "|".join(re.escape(j) for j in sorted(other_jobs, key=len, reverse=True))
        self._job = re.compile(rf"\b(job\s+)(?:{jobs})(?![\w.-])", re.IGNORECASE) if other_jobs else None

    def touches(self, device: str) -> bool:
        return device in self.private

    def touches_entity(self, entity: dict) -> bool:
        return any(d in self.private for d in devices_of(str(entity.get("id", "")), str(entity.get("kind", ""))))

    def text(self, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        if self._device is not None:
            value = self._device.sub(HIDDEN, value)
        if self._job is not None:
            value = self._job.sub(lambda m: m.group(1) + HIDDEN, value)
        return value

    def deep(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: self.deep(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.deep(v) for v in value]
        return self.text(value)


def _cause(rc: dict, hide: _Hider, own_jobs: set[str]) -> dict:
    entity = rc.get("entity") or {}
    if entity.get("kind") == "job":
        shown = entity.get("id") if str(entity.get("id")) in own_jobs else HIDDEN
    else:
        shown = hide.text(entity.get("id"))
    evidence = [hide.deep(ev) for ev in rc.get("evidence") or []
                if not any(hide.touches(d) for d in devices_of(str(ev.get("entity", ""))))]
    return {**rc, "entity": {**entity, "id": shown}, "evidence": evidence}


def _device_names(incident: dict) -> set[str]:
    """Every device the incident names anywhere (causes, evidence, symptoms, jobs' hosts)."""
    names: set[str] = set()
    for rc in incident.get("root_causes") or []:
        entity = rc.get("entity") or {}
        names.update(devices_of(str(entity.get("id", "")), str(entity.get("kind", ""))))
        for ev in rc.get("evidence") or []:
            if ev.get("entity"):
                names.update(devices_of(str(ev["entity"])))
    for s in incident.get("symptoms") or []:
        entity = s.get("entity") or {}
        names.update(devices_of(str(entity.get("id", "")), str(entity.get("kind", ""))))
        names.add(str(s.get("device", "")))
    for j in incident.get("affected_jobs") or []:
        names.update(str(h) for h in j.get("hosts") or [])
    names.discard("")
    return names
