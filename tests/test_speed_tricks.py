"""Every speed trick of bench/speed_tricks.py changes the replay's speed, never its
result: each switch-off, applied as the bench applies it (a fresh process, the patch
before the replay), gives the incidents of the replay with every trick on, id for id,
cause, entity and times. So the bench's switch-offs cannot rot unseen (a patch of a
name that is gone fails here), and no trick may trade a verdict for speed."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.speed_tricks import TRICKS

REPO = Path(__file__).resolve().parent.parent
LINE_PROTOCOL = {"layouts"}  # tricks only line protocol exercises


def _replay(variant: str, folder: Path, telemetry: str = "") -> dict:
    out = subprocess.run([sys.executable, str(REPO / "bench" / "speed_tricks.py"), "--child", variant, str(folder),
                          str(folder), telemetry], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["demo", "pcie_stall"])
def test_no_speed_trick_changes_an_incident(scenario_dir, scenario):
    from bench.replay_mapped import write_line_protocol

    folder = scenario_dir(scenario)
    base = _replay("base:all", folder)
    assert base["digest"] and base["records"] > 10_000
    for name in TRICKS:
        if name not in LINE_PROTOCOL:
            assert _replay(name, folder)["digest"] == base["digest"], name
    ethtool = str(write_line_protocol(folder)[1])  # nic_port as inputs.ethtool: mapped back
    lp = _replay("base:all", folder, ethtool)
    assert lp["digest"] == base["digest"] and lp["mapped"] > 0
    for name in LINE_PROTOCOL:
        assert _replay(name, folder, ethtool)["digest"] == base["digest"], name
