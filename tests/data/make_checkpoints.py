"""Write the checkpoint fixture of the current format: `checkpoint-v2-detect.bin`.

    PYTHONPATH=. python tests/data/make_checkpoints.py

The detect stage of a short generated scenario (pfc_storm, seed 5, 40 s), snapshotted
after half its lines, with the default rules and no models. tests/test_checkpoint.py
restores it: when the format changes (CHECKPOINT_VERSION), that test fails until the
fixture is written again with this script and the old one is kept as the fixture of the
refused previous format.

`checkpoint-v1-detect.bin` is the same snapshot written by the release before (pickle,
fabric-rca <= 0.1, commit 646f986's parent); it cannot be made again by this code.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

SCENARIO, SEED, DURATION = "pfc_storm", 5, 40


def detect_snapshot(folder: Path) -> tuple[bytes, int]:
    """(the snapshot, the number of lines it covers)."""
    import sim
    from cli.run import build_pipeline
    from evaluation.scenarios import scenario_files
    from engine.replay import open_lines
    from engine.topology import load_topology

    sim.simulate(out=folder, scenario=SCENARIO, seed=SEED, duration=DURATION)
    files = scenario_files(folder)
    p = build_pipeline(topology=load_topology(files["topology"]), jobs_file=files["jobs"], rule_files=None)
    lines = list(open_lines(files["telemetry"]))
    half = lines[: len(lines) // 2]
    for line in half:
        p.feed(line)
    return p.detect.snapshot(), len(half)


def main() -> None:
    from engine.checkpoint import CHECKPOINT_VERSION

    with tempfile.TemporaryDirectory() as tmp:
        blob, n = detect_snapshot(Path(tmp))
    out = HERE / f"checkpoint-v{CHECKPOINT_VERSION}-detect.bin"
    out.write_bytes(blob)
    print(f"{out}: {len(blob)} bytes, {n} lines")


if __name__ == "__main__":
    main()
