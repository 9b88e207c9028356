"""The Go tools scripts/tools builds (Telegraf): where the binary is, whether it is
there. The path is the script's own answer (`scripts/tools path telegraf`: the cache
outside the clone, or $FABRIC_RCA_TELEGRAF), so the tests and CI agree on one place."""
from __future__ import annotations

import subprocess
from pathlib import Path

TOOLS = Path(__file__).resolve().parent.parent / "scripts" / "tools"


def telegraf_path() -> Path:
    out = subprocess.run([str(TOOLS), "path", "telegraf"], capture_output=True, text=True, timeout=30, check=True)
    return Path(out.stdout.strip())


def telegraf_ready() -> bool:
    """The binary at `telegraf_path()` runs `--version` (and, cached, is the pinned build)."""
    return subprocess.run([str(TOOLS), "check", "telegraf"], capture_output=True, timeout=30).returncode == 0
