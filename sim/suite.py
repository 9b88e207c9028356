"""The hard scenario suite: a declarative table of runs, built by simulate_suite().

Every contract cause at four placements and intensities (the classic run, the same
placement weak, another placement medium, a third placement weak on a 64-host fabric
with 4 spines), the four gray failures at three intensities, two and three concurrent
faults, a 900 s and a one-hour clean run, and a fabric of 512 hosts. Entry names are
the folder names and truth's "scenario"; truth's "base_scenario" names the scenario.
Each entry is reproducible with `fabric-rca simulate --scenario S --seed SEED
--intensity I --target T --fabric F --duration D` (SEED = the suite's seed + entry.seed).
"""
from __future__ import annotations

import fnmatch
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .fabric import FabricSpec
from .scenarios import simulate

SMALL = FabricSpec()  # 2 spines, 4 leaves x 4 hosts, 2 storage hosts: 16 hosts
M64 = FabricSpec(spines=4, leaves=8, hosts_per_leaf=8, storage_hosts=4)  # 64 hosts
H512 = FabricSpec(spines=8, leaves=32, hosts_per_leaf=16, storage_hosts=4)  # 512 hosts


@dataclass(frozen=True)
class SuiteEntry:
    name: str  # folder and truth "scenario"
    scenario: str
    intensity: str = "strong"
    target: str | None = None  # None: the scenario's own placement
    fabric: FabricSpec = SMALL
    duration: float | None = None  # None: the scenario's nominal duration
    seed: int = 0  # added to the suite's seed

    @property
    def hosts(self) -> int:
        return self.fabric.leaves * self.fabric.hosts_per_leaf

    @property
    def placement(self) -> tuple:
        """Where the fault sits: the fabric and the target (None: the default)."""
        return (self.fabric, self.target)


def _e(name: str, scenario: str, intensity: str = "strong", target: str | None = None,
       fabric: FabricSpec = SMALL, duration: float | None = None, seed: int = 0) -> SuiteEntry:
    return SuiteEntry(name, scenario, intensity, target, fabric, duration, seed)


# cause: (medium placement on the small fabric, weak placement on the 64-host fabric)
_PLACEMENTS: dict[str, tuple[str, str]] = {
    "link_flap": ("gpu011", "gpu027"),
    "link_degraded": ("leaf03:swp52", "leaf05:swp53"),
    "pfc_storm": ("gpu010", "gpu019"),
    "congestion": ("gpu003", "gpu037"),
    "microburst": ("gpu012", "gpu045"),
    "nic_degraded": ("gpu005", "gpu050"),
    "storage_slow": ("stor02", "stor03"),
    "device_down": ("leaf03", "leaf06"),
    "noisy_neighbor": ("4246", "4242"),
}
# gray scenario: (medium placement on the small fabric, weak placement on the 64-host fabric)
_GRAY: dict[str, tuple[str, str]] = {
    "fec_creep": ("leaf04:swp51", "spine04:swp4"),
    "pcie_stall": ("gpu007", "gpu030"),
    "storage_drift": ("stor01", "stor04"),
    "pfc_storm_low": ("gpu014", "gpu012"),
}


def _slug(target: str) -> str:
    return target.replace(":", "-")


def _table() -> list[SuiteEntry]:
    out: list[SuiteEntry] = [_e("clean", "clean"), _e("demo", "demo")]
    for cause, (medium, weak) in _PLACEMENTS.items():
        out += [
            _e(cause, cause),  # the classic run: same bytes as `simulate --scenario cause`
            _e(f"{cause}-weak", cause, "weak", seed=1),
            _e(f"{cause}-medium-{_slug(medium)}", cause, "medium", medium, seed=2),
            _e(f"{cause}-weak-m64-{_slug(weak)}", cause, "weak", weak, M64, seed=3),
        ]
    for name, (medium, weak) in _GRAY.items():
        out += [
            _e(name, name),
            _e(f"{name}-medium-{_slug(medium)}", name, "medium", medium, seed=1),
            _e(f"{name}-weak-m64-{_slug(weak)}", name, "weak", weak, M64, seed=2),
        ]
    out += [
        _e("concurrent2", "concurrent2"),
        _e("concurrent2-weak-m64", "concurrent2", "weak", fabric=M64, seed=1),
        _e("concurrent3", "concurrent3"),
        _e("concurrent3-medium-m64", "concurrent3", "medium", fabric=M64, seed=1),
        # 512 hosts: 2,576 records a second; 420 s keeps it near 1.1 M records
        _e("concurrent3-h512", "concurrent3", fabric=H512, duration=420.0, seed=2),
        _e("clean-m64", "clean", fabric=M64, seed=1),
        _e("clean_1h", "clean_1h"),
    ]
    return out


SUITE: list[SuiteEntry] = _table()


def select(only: str | None = None) -> list[SuiteEntry]:
    """The entries whose name matches the glob (all without one)."""
    chosen = [e for e in SUITE if only is None or fnmatch.fnmatchcase(e.name, only)]
    if not chosen:
        raise ValueError(f"no suite entry matches {only!r}; entries: "
                         + ", ".join(e.name for e in SUITE))
    return chosen


def build(entry: SuiteEntry, *, out: Path, seed: int = 1) -> dict:
    """Generate one entry into `out` (its folder); return its truth."""
    return simulate(out=out, scenario=entry.scenario, seed=seed + entry.seed,
                    fabric=entry.fabric, duration=entry.duration, intensity=entry.intensity,
                    target=entry.target, label=entry.name)


def simulate_suite(*, out: Path, seed: int = 1, only: str | None = None,
                   on_entry: Callable[[SuiteEntry, dict, float], None] | None = None
                   ) -> list[Path]:
    """Build every entry (or those matching the glob `only`) into out/<entry name>/;
    on_entry(entry, truth, seconds) is called after each."""
    paths = []
    for entry in select(only):
        path = Path(out) / entry.name
        t0 = time.perf_counter()
        truth = build(entry, out=path, seed=seed)
        if on_entry:
            on_entry(entry, truth, time.perf_counter() - t0)
        paths.append(path)
    return paths
