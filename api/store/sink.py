"""Incident changes into the store (the same repository `replay` writes through)."""
from __future__ import annotations

from sqlmodel import Session

from api.store.db import create_schema, make_engine
from api.store.repository import save_topology, upsert_incidents


class StoreSink:
    def __init__(self, db_url: str, *, topology: dict | None = None):
        self.engine = make_engine(db_url)
        create_schema(self.engine)
        if topology is not None:
            with Session(self.engine) as session:
                save_topology(session, document=topology)
        self.written = 0

    def write(self, changes: list[dict]) -> None:
        """Idempotent upsert by incident id: a redelivered change rewrites the same row."""
        with Session(self.engine) as session:
            self.written += upsert_incidents(session, incidents=changes)
