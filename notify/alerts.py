"""An incident (contract section 6 JSON) as Prometheus Alertmanager alerts (API v2).

Pure: the caller passes the wall-clock time. Alertmanager names an alert by its label
set, so one incident must keep one label set while it is active; when what the labels
say changes (the top cause is re-ranked, a job joins), the previous label set is sent
resolved beside the new one firing (`transition`), and Alertmanager holds exactly one
active alert per incident at any time. Never one alert per symptom: symptoms are not
labels.
"""
from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from contract.times import parse_rfc3339, rfc3339

ALERTNAME = "FabricRCAIncident"
MAX_LABEL_ITEMS = 20  # job ids / tenants spelled out in one label; beyond: "+N more"
# An open incident's alert expires this many resend intervals after the last send unless
# it is sent again (Prometheus uses the same factor): a notifier that dies leaves no
# alert firing for ever, one that lives refreshes it well before.
EXPIRY_RESENDS = 4


@dataclass(frozen=True)
class AlertSettings:
    fabric: str = "default"  # the `fabric` label: which fabric this engine watches
    console_url: str = "http://127.0.0.1:8000"  # the API's base URL: the console link points under it
    resend_s: float = 60.0  # wall seconds between resends of an open incident's alert


Labels = tuple[tuple[str, str], ...]  # sorted (name, value): hashable, comparable


def incident_labels(incident: dict, settings: AlertSettings) -> Labels:
    """The alert's identity: alertname, incident_id, cause, entity, entity_kind, severity,
    fabric, and tenants / job_ids when any job is affected (empty labels are left out:
    Alertmanager treats an empty label as absent)."""
    top = _top(incident)
    jobs = incident.get("affected_jobs") or []
    labels = {
        "alertname": ALERTNAME,
        "incident_id": str(incident["id"]),
        "cause": top["cause"] if top else "unexplained",
        "entity": top["entity"]["id"] if top else "",
        "entity_kind": top["entity"]["kind"] if top else "",
        "severity": str(incident.get("severity") or ""),
        "fabric": settings.fabric,
        "tenants": _joined(sorted({str(j["tenant"]) for j in jobs})),
        "job_ids": _joined(sorted({str(j["job_id"]) for j in jobs})),
    }
    return tuple(sorted((k, v) for k, v in labels.items() if v))


CONSOLE_PAGE = "/console/#/incident/{id}"  # the console's incident page (api/static/console/app.js routes)


def console_link(settings: AlertSettings, incident_id: str) -> str:
    """The incident's page in the console served at `settings.console_url` (the API's base URL)."""
    return settings.console_url.rstrip("/") + CONSOLE_PAGE.format(id=quote(incident_id, safe=""))


def alert(incident: dict, labels: Labels, *, now: float, settings: AlertSettings, resolved: bool) -> dict:
    """One alert of `incident` under `labels`: firing (endsAt a few resends ahead) or
    resolved (endsAt the incident's resolution, or now).

    Times are clamped to `now`: an incident of replayed telemetry from the future would
    otherwise fire until then, and Alertmanager refuses startsAt after endsAt."""
    starts = min(parse_rfc3339(incident["opened_at"]), now)
    if resolved:
        resolved_at = incident.get("resolved_at")
        ends = min(parse_rfc3339(resolved_at), now) if resolved_at else now
        ends = max(ends, starts)
    else:
        ends = now + EXPIRY_RESENDS * settings.resend_s
    link = console_link(settings, str(incident["id"]))
    return {
        "labels": dict(labels),
        "annotations": {
            "title": str(incident.get("title") or ""),
            "summary": str(incident.get("title") or ""),
            "description": _description(incident),
            "console": link,
        },
        "startsAt": rfc3339(starts),
        "endsAt": rfc3339(ends),
        "generatorURL": link,
    }


def transition(incident: dict, previous: Labels | None, *, now: float,
               settings: AlertSettings) -> tuple[list[dict], Labels | None]:
    """The alerts to post for this state of `incident`, given the label set last posted
    firing for it (`previous`, None if none), and the label set firing afterwards.

    An incident in maintenance is not notified: nothing is sent, except the resolution of
    an alert posted before it was marked."""
    labels = incident_labels(incident, settings)
    out: list[dict] = []
    if previous is not None and (previous != labels or incident.get("maintenance")):
        out.append(alert(incident, previous, now=now, settings=settings, resolved=True))
    if incident.get("maintenance"):
        return out, None
    if incident.get("status") == "resolved":
        if previous is None or previous == labels:  # (a changed label set was resolved above)
            out.append(alert(incident, labels, now=now, settings=settings, resolved=True))
        return out, None
    out.append(alert(incident, labels, now=now, settings=settings, resolved=False))
    return out, labels


def _top(incident: dict) -> dict | None:
    causes = incident.get("root_causes") or []
    return min(causes, key=lambda rc: rc.get("rank", 0)) if causes else None


def _joined(items: list[str]) -> str:
    if len(items) <= MAX_LABEL_ITEMS:
        return ",".join(items)
    return ",".join(items[:MAX_LABEL_ITEMS]) + f",+{len(items) - MAX_LABEL_ITEMS} more"


def _description(incident: dict) -> str:
    causes = sorted(incident.get("root_causes") or [], key=lambda rc: rc.get("rank", 0))
    ranked = "; ".join(f"{rc['rank']}. {rc['cause']} on {rc['entity']['id']} ({rc['score']:.2f})"
                       for rc in causes[:3])
    jobs = len(incident.get("affected_jobs") or [])
    symptoms = len(incident.get("symptoms") or [])
    return f"root causes: {ranked or 'none ranked'}; {jobs} job(s) affected; {symptoms} symptom(s)"
