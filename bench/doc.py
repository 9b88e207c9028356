"""What every benchmark shares: the run of median time, and its section of docs/benchmarks.md."""
from __future__ import annotations

import platform
from datetime import datetime, timezone
from pathlib import Path


def median_run(runs: list[dict]) -> dict:
    """The run of median time (of an even number, the slower middle one)."""
    return sorted(runs, key=lambda r: r["seconds"])[len(runs) // 2]


def run_stamp() -> str:
    """The start of a section's first sentence: when, on what."""
    from engine.shards import usable_cores

    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (f"Run {stamp} on {platform.machine()} ({usable_cores()} usable cores), Python {platform.python_version()}, "
            "a fresh process per run, ")


def write_section(path: Path, heading: str, section: str) -> None:
    """Replace (or append) one `## ` section of docs/benchmarks.md (its title before " (`"
    is `heading`), keeping the others."""
    text = path.read_text() if path.exists() else "# Benchmarks\n\nFigures written by the scripts in `bench/`.\n\n"
    parts = text.split("\n## ")
    kept = [parts[0].rstrip("\n") + "\n"] + ["## " + p.rstrip("\n") + "\n" for p in parts[1:]
                                              if "## " + p.split("\n", 1)[0].split(" (`")[0] != heading]
    path.write_text("\n".join(kept + [section]))
