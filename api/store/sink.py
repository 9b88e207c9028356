"""Incident changes into the store (the same repository `replay` writes through)."""
from __future__ import annotations

from sqlmodel import Session

from api.store.db import create_schema, make_engine
from api.store.repository import save_topology, upsert_incidents


class StoreSink:
    """`notifier` (a `notify.Notifier`), if given, hears every change once it is stored:
    this is the one place incident changes leave the engine, for `replay` and the workers."""

    def __init__(self, db_url: str, *, topology: dict | None = None, notifier=None):
        self.engine = make_engine(db_url)
        self.notifier = notifier
        create_schema(self.engine)
        if topology is not None:
            with Session(self.engine) as session:
                save_topology(session, document=topology)
        self.written = 0

    def write(self, changes: list[dict]) -> None:
        """Idempotent upsert by incident id: a redelivered change rewrites the same row."""
        with Session(self.engine) as session:
            self.written += upsert_incidents(session, incidents=changes)
        if self.notifier is not None:
            self.notifier.submit(changes)
