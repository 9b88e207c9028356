"""Structured logs for the worker: one JSON object per line, quiet (WARNING) by default."""
from __future__ import annotations

import json
import logging
from datetime import datetime, timezone


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc = {
            "ts": datetime.fromtimestamp(record.created, tz=timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc, default=str)


def logging_config(*, level: str, fmt: str) -> dict:
    """A dictConfig for faust's Worker: JSON (default) or plain text on stderr."""
    formatter = {"()": f"{__name__}.JsonFormatter"} if fmt == "json" else {
        "format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"default": formatter},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "default", "stream": "ext://sys.stderr"}},
        "root": {"handlers": ["stderr"], "level": level.upper()},
    }
