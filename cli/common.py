"""What every subcommand shares: the error a user can fix, the store URL, small argument types."""
from __future__ import annotations

import argparse
import os

from cli.engine_flags import positive

EXIT_USAGE = 2
DB_HELP = "SQLAlchemy URL or SQLite file (default: $FABRIC_RCA_DB, else sqlite:///fabric-rca.db)"

__all__ = ["CliError", "DB_HELP", "EXIT_USAGE", "count", "db_url", "kafka_security_arguments", "positive"]


class CliError(Exception):
    """A problem the user can fix; printed without a traceback."""


def db_url(args) -> str:
    from api.store.db import resolve_db_url
    return resolve_db_url(args.db, os.environ)


def count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be 0 or more")
    return value


def kafka_security_arguments(p: argparse.ArgumentParser) -> None:
    from streams.security import add_arguments
    add_arguments(p)
