"""Where the incident store lives: URL resolution, engine, schema.

Nothing here runs at import time; `main` resolves the URL once and passes it down.
Any SQLAlchemy URL works (`sqlite:///...`, `postgresql+psycopg://...`); a bare file
path means a SQLite file.
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import event, inspect, text
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError
from sqlalchemy.pool import StaticPool
from sqlmodel import SQLModel, create_engine

from api.store import ops_tables, tables  # noqa: F401  (registers the tables on SQLModel.metadata)

DEFAULT_DB_URL = "sqlite:///fabric-rca.db"
DB_ENV = "FABRIC_RCA_DB"


class StoreError(ValueError):
    """The store cannot be opened or used; the message names the URL and the reason."""


def resolve_db_url(flag: str | None, env: Mapping[str, str]) -> str:
    """The `--db` flag, else `$FABRIC_RCA_DB`, else `sqlite:///fabric-rca.db`.

    A value without `://` is a SQLite file path (`out/x.db` -> `sqlite:///out/x.db`).
    """
    value = (flag or "").strip() or (env.get(DB_ENV) or "").strip() or DEFAULT_DB_URL
    if "://" in value:
        return value
    return f"sqlite:///{value}"


def redacted_url(url: str | URL) -> str:
    """`url` fit to print or log: its password, if any, shown as `***`.

    The one way every command, log and summary shows a database URL. A URL SQLAlchemy
    cannot parse still loses whatever sits between `user:` and `@`.
    """
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError, TypeError):
        return re.sub(r"(://[^/:@]*:)[^/]*@", r"\1***@", str(url))


def json_text(value: Any) -> str:
    """The text of a JSON column: orjson's, which takes a tenth of the standard library's
    time (an incident's symptoms carry their samples, and a worker writes the incident at
    every change); the standard library's for what orjson refuses (integers past 64 bits).
    What is written was checked strict JSON before (repository: no NaN, no infinity)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except (TypeError, orjson.JSONEncodeError):
        return json.dumps(value)


def make_engine(url: str) -> Engine:
    """An engine for `url`; for SQLite, shareable across threads, in WAL mode."""
    parsed = _parse(url)
    shown = redacted_url(parsed)
    kwargs: dict[str, Any] = {"json_serializer": json_text}
    sqlite = parsed.get_backend_name() == "sqlite"
    if sqlite:
        kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
        if _sqlite_in_memory(parsed):
            kwargs["poolclass"] = StaticPool  # one shared in-memory database
        else:
            _make_parent_dir(parsed, shown)
    try:
        engine = create_engine(parsed, **kwargs)
    except NoSuchModuleError as exc:
        raise StoreError(
            f"database URL {shown!r}: unknown database dialect or driver "
            f"{parsed.drivername!r}"
        ) from exc
    except ImportError as exc:
        raise StoreError(
            f"database URL {shown!r}: the driver is not installed ({exc}); "
            "for PostgreSQL install fabric-rca[postgres]"
        ) from exc
    except (ArgumentError, TypeError, ValueError) as exc:
        raise StoreError(f"database URL {shown!r}: {exc}") from exc
    if sqlite:
        event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def create_schema(engine: Engine) -> None:
    """Create the tables that do not exist yet (safe to call on every start)."""
    for attempt in range(3):
        try:
            SQLModel.metadata.create_all(engine)
            _add_missing_columns(engine)
            return
        except SQLAlchemyError as exc:
            # Two processes starting on a fresh database race between "does the table
            # exist?" and "create it": the loser sees "already exists"; look again.
            if "already exists" in str(exc) and attempt < 2:
                continue
            shown = redacted_url(engine.url)
            raise StoreError(f"database URL {shown!r}: cannot create the schema: {exc}") from exc


def _add_missing_columns(engine: Engine) -> None:
    """Columns added to a table after a store was created (`incident.maintenance`, `symptom.samples`), added to
    that store: `create_all` makes missing tables only. Only columns with a default or
    NULL allowed are ever added this way, so existing rows stay valid."""
    inspector = inspect(engine)
    for table in SQLModel.metadata.sorted_tables:
        if not inspector.has_table(table.name):
            continue
        present = {c["name"] for c in inspector.get_columns(table.name)}
        for column in table.columns:
            if column.name in present:
                continue
            kind = column.type.compile(dialect=engine.dialect)
            default = " NOT NULL DEFAULT false" if str(kind).upper() == "BOOLEAN" and not column.nullable else ""
            try:
                with engine.begin() as conn:
                    conn.execute(text(f'ALTER TABLE "{table.name}" ADD COLUMN "{column.name}" {kind}{default}'))
            except SQLAlchemyError as exc:  # another process added it first
                if "duplicate column" not in str(exc) and "already exists" not in str(exc):
                    raise


def _parse(url: str) -> URL:
    if not url or "://" not in url:
        raise StoreError(
            f"database URL {redacted_url(url)!r}: not a URL (expected e.g. sqlite:///fabric-rca.db "
            "or postgresql+psycopg://user@host/db)"
        )
    try:
        return make_url(url)
    except (ArgumentError, ValueError) as exc:
        raise StoreError(f"database URL {redacted_url(url)!r}: cannot be parsed: {exc}") from exc


def _sqlite_in_memory(url: URL) -> bool:
    return url.database in (None, "", ":memory:") or "mode=memory" in str(url.query)


def _make_parent_dir(url: URL, shown: str) -> None:
    parent = Path(url.database or "").parent
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as exc:
        raise StoreError(
            f"database URL {shown!r}: cannot create directory {str(parent)!r}: {exc}"
        ) from exc


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
    finally:
        cursor.close()
