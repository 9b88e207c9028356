"""The API server's notifier: it reads the store, so it notifies what any writer stored.

`serve --alertmanager URL` runs this beside the HTTP API: every `poll_s` seconds it reads
the open incidents and submits them (a changed one is sent; every open one is re-sent on
the resend interval by the notifier), and submits once, resolved, each incident that
left the open set since the last poll. On start it submits every open incident, so a
restarted server restores the alerts of what is still open. A store that is down is
retried at the next poll; nothing here stops the server.
"""
from __future__ import annotations

import logging
import threading

from sqlalchemy.engine import Engine
from sqlmodel import Session

from api.store import repository
from api.store.db import create_schema

log = logging.getLogger("fabric_rca.notify")

POLL_S = 2.0


class StoreWatcher:
    def __init__(self, engine: Engine, notifier, *, poll_s: float = POLL_S) -> None:
        self.engine, self.notifier, self.poll_s = engine, notifier, poll_s
        self._open: dict[str, dict] = {}  # incident id -> state last submitted
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fabric-rca-store-watcher", daemon=True)
        self.polls = 0
        self._schema = False

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._thread.join(timeout=timeout)
        self.notifier.close(timeout=timeout)

    def poll(self) -> None:
        """One look at the store (the thread's step; tests call it directly)."""
        if not self._schema:
            create_schema(self.engine)
            self._schema = True
        with Session(self.engine) as session:
            now_open = {i["id"]: i for i in repository.list_incidents(session, status="open", limit=None)}
            gone = [repository.get_incident(session, incident_id=iid) for iid in self._open if iid not in now_open]
        changed = [inc for iid, inc in now_open.items() if self._open.get(iid) != inc]
        changed += [inc for inc in gone if inc is not None]
        self._open = now_open
        self.notifier.submit(changed)
        self.polls += 1

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll()
            except Exception as exc:  # noqa: BLE001 - a store outage or a bad row: try again next poll
                log.warning("store watcher: %s: %s", type(exc).__name__, str(exc).splitlines()[0][:200] if str(exc) else "")
            self._stop.wait(self.poll_s)
