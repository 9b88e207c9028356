"""The incidents a worker stored, and what tests compare them by."""
from __future__ import annotations

from pathlib import Path


def stored_incidents(db: Path | str) -> list[dict]:
    """Every incident in a store (a SQLite file's path, or a database URL); [] while the
    file, the server or the schema is not there yet (the worker creates the schema)."""
    from sqlmodel import Session

    from api.store.db import make_engine
    from api.store.repository import list_incidents

    if isinstance(db, Path):
        if not db.exists():
            return []
        db = f"sqlite:///{db}"
    try:
        engine = make_engine(db)
    except Exception:  # noqa: BLE001 - the server is down
        return []
    try:
        with Session(engine) as session:
            return list_incidents(session, limit=None)
    except Exception:  # noqa: BLE001 - the server is down, or the schema not there yet
        return []
    finally:
        engine.dispose()


def incident_summary(incidents: list[dict]) -> list[tuple]:
    """Ids, ranked causes with their entities and affected jobs: what a worker fleet and a
    replay of the same telemetry must agree on."""
    return sorted(
        (i["id"], tuple((r["rank"], r["cause"], r["entity"]["id"]) for r in i["root_causes"]),
         tuple(sorted(j["job_id"] for j in i["affected_jobs"])))
        for i in incidents
    )


def incident_causes(incidents: list[dict]) -> list[tuple]:
    """Ids and causes with their entities, in rank order (no jobs, no ranks)."""
    return sorted((i["id"], tuple((r["cause"], r["entity"]["id"]) for r in i["root_causes"])) for i in incidents)
