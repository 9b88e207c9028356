"""Figures a fault test measured, for docs/reliability.md (scripts/reliability).

`record(section, **figures)` appends one JSON object to the file FABRIC_RCA_FIGURES names
(scripts/reliability sets it); without it, it does nothing, so a test that records runs
the same under a plain pytest. The figures are what the run measured, never typed in.
"""
from __future__ import annotations

import json
import os

FIGURES_ENV = "FABRIC_RCA_FIGURES"


def current_test() -> str:
    """The running test's node id (pytest sets PYTEST_CURRENT_TEST: "<nodeid> (call)")."""
    return os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]


def record(section: str, **figures) -> None:
    path = os.environ.get(FIGURES_ENV)
    if not path:
        return
    doc = {"section": section, "test": current_test(), **figures}
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(doc, sort_keys=True, default=str) + "\n")
