"""Incidents as the caller may see them: every route that serves incidents reads through here.

An operator (or admin, or anyone under `--auth none`) gets the store's answer as it is.
A tenant gets the incidents with one of its jobs, each scoped by `api.scope`; the
filters that name hidden things (entity, job, tenant) are applied to the scoped view and
the page is cut after that, so a filter cannot find what scoping hid, and the total
counts what the tenant sees. An incident of another tenant is simply not there: the
routes answer 404, as for an id that never existed.
"""
from __future__ import annotations

from typing import Any

from sqlmodel import Session

from api import scope
from api.auth import Principal
from api.store import repository


def fabric(topology: dict | None, session: Session) -> scope.Fabric:
    """The shared devices of the topology served (`topology`, else the stored one)."""
    return scope.Fabric.of(topology if topology is not None else repository.load_topology(session))


def page(session: Session, principal: Principal, shared: scope.Fabric, filters: dict[str, Any], *, limit: int | None,
         offset: int = 0) -> tuple[list[dict], int]:
    """(one page of incidents, how many match in all), newest first."""
    if principal.sees_everything:
        items = repository.list_incidents(session, **filters, limit=limit, offset=offset)
        return items, repository.count_incidents(session, **filters)
    seen = _tenant_view(principal, shared, repository.list_incidents(session, **_narrowed(principal, filters),
                                                                   limit=None), filters)
    return (seen[offset:] if limit is None else seen[offset:offset + limit]), len(seen)


def one(session: Session, principal: Principal, shared: scope.Fabric, incident_id: str) -> dict | None:
    incident = repository.get_incident(session, incident_id=incident_id)
    if incident is None or principal.sees_everything:
        return incident
    return scope.scope_incident(incident, tenant=str(principal.tenant), fabric=shared)


def by_id(session: Session, principal: Principal, shared: scope.Fabric, ids: list[str],
          filters: dict[str, Any]) -> dict[str, dict]:
    """The incidents of `ids` that match `filters` as the caller sees them, by id."""
    if principal.sees_everything:
        return repository.incidents_by_id(session, ids=ids, **filters)
    found = repository.incidents_by_id(session, ids=ids, **_narrowed(principal, filters))
    return {inc["id"]: inc for inc in _tenant_view(principal, shared, list(found.values()), filters)}


def _narrowed(principal: Principal, filters: dict[str, Any]) -> dict[str, Any]:
    """The query's filters with the tenant's own: a superset of what the tenant may see."""
    return {**filters, "tenant": principal.tenant}


def _tenant_view(principal: Principal, shared: scope.Fabric, incidents: list[dict], filters: dict[str, Any]) -> list[dict]:
    if filters.get("tenant") not in (None, principal.tenant):
        return []
    scoped = (scope.scope_incident(inc, tenant=str(principal.tenant), fabric=shared) for inc in incidents)
    return [inc for inc in scoped if inc is not None and scope.matches(inc, **filters)]
