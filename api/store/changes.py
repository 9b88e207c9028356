"""The change log of the incident store: which incident was written, in which order.

`upsert_incidents` calls `record` in its own transaction, so every writer (replay, a
store-writer worker, any process on the same database) numbers what it writes, and a
reader in another process follows with `after(seq)`: an indexed range read that costs
nothing while nothing changes. That is what `GET /incidents/stream` polls.

The numbers must appear in commit order, or a follower that has read change 6 never
sees a change 5 that committed after it. SQLite has one writer at a time, held from the
first write to the commit. PostgreSQL hands out sequence numbers at insert time and
commits in any order, so `record` first takes a lock that only writers of the log take
(SHARE ROW EXCLUSIVE conflicts with itself, not with readers): writers number and commit
one after another, readers never wait.
"""
from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import delete, func, insert, text
from sqlmodel import Session, col, select

from api.store.tables import IncidentChangeRow

_CHUNK = 500  # ids per IN (...) clause, as in api/store/repository.py


def record(session: Session, *, incident_ids: list[str]) -> None:
    """Number the writes of `incident_ids` (part of the caller's transaction, not committed)."""
    if not incident_ids:
        return
    if session.get_bind().dialect.name == "postgresql":
        session.exec(text("LOCK TABLE incident_change IN SHARE ROW EXCLUSIVE MODE"))  # type: ignore[call-overload]
    table = col(IncidentChangeRow.incident_id)
    for start in range(0, len(incident_ids), _CHUNK):
        chunk = incident_ids[start : start + _CHUNK]
        session.exec(delete(IncidentChangeRow).where(table.in_(chunk)))  # type: ignore[call-overload]
    now = datetime.now(timezone.utc)
    rows = [{"incident_id": iid, "written_at": now} for iid in incident_ids]
    session.exec(insert(IncidentChangeRow), params=rows)  # type: ignore[call-overload]


def after(session: Session, *, seq: int, limit: int = 500) -> list[tuple[int, str]]:
    """(seq, incident id) of the writes after change `seq`, oldest first, at most `limit`."""
    stmt = (
        select(IncidentChangeRow.seq, IncidentChangeRow.incident_id)
        .where(col(IncidentChangeRow.seq) > seq)
        .order_by(col(IncidentChangeRow.seq))
        .limit(limit)
    )
    return [(int(s), iid) for s, iid in session.exec(stmt)]


def latest(session: Session) -> int:
    """The number of the last change (0 for a store nothing was written to)."""
    return int(session.exec(select(func.coalesce(func.max(IncidentChangeRow.seq), 0))).one())
