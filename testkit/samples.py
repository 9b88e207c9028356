"""Where the real exporters' samples are: `shared/real-samples` beside the clone (as CI and
every session lay it out), or $FABRIC_RCA_SAMPLES."""
from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def samples_dir() -> Path:
    given = os.environ.get("FABRIC_RCA_SAMPLES")
    candidates = [Path(given)] if given else [ROOT.parent / "shared" / "real-samples", Path("/work/shared/real-samples")]
    for c in candidates:
        if c.is_dir():
            return c
    raise FileNotFoundError(f"no real-samples folder at {', '.join(map(str, candidates))}: set FABRIC_RCA_SAMPLES")
