"""An honest tune/test split of realistic scenarios (issue 12).

Each entry is a scenario run at 1 s, then rewritten by the realism layer (realism.py,
deliver.py) with parameters drawn from the entry's own seed. The two splits never share
a seed: tune uses TUNE_SEED + k, test TEST_SEED + k (k < SEED_SPAN), fixed here. Test
has wider ranges and what tune lacks: 30 s polling, the three-tier fabric with
superspines, and fault placements on odd leaves/hosts (tune places on even ones only).
Clean entries (no fault, only benign phenomena) are in both; `clean_hours` scales the
test split's clean time (900 s per clean entry).

A third split, "tune-wide", is tuned on like tune: tune's even placements with the test
split's ranges (intervals up to 30 s, link speeds, physics, intensities, benign
phenomena) and shapes (three-tier too), on fabrics as big as the test's but of other
sizes, from seeds of its own (TUNE_WIDE_SEED + k). It shows tuning the noise of wide
ranges and bigger fabrics; test keeps its own seeds, fabric sizes and odd placements.

A fourth, "tune-any", is tune-wide with placements anywhere (odd leaves and hosts too)
and odd spine counts (3 and 5 spines: ECMP over an odd number of uplinks), on fabric sizes
of its own, from seeds of its own (TUNE_ANY_SEED + k). A fabric does not choose where it
fails: an engine that is right on even placements only has a bug tuning must see. Test
keeps its own seeds and fabric sizes, which no tuning split has.

A fifth, "tune-range", is tune-any whose fabric is drawn per run from ranges (spines 2-5,
leaves 3-8, hosts per leaf 3-6, storage hosts 2-4; rails fabrics with 4-8 rails), never one
of any split's fixed specs (a draw that is one is drawn again), from seeds of its own
(TUNE_RANGE_SEED + k). The test split's fixed sizes are not a tuning split's, yet an
engine tuned on a handful of fixed sizes may fit them: sizes drawn from ranges show it.

A sixth, "tune-retired", is the first test split (seeds 900000 + k, its fabric sizes and
rails fabric), retired to tuning on 2026-12-04: its figures had been published six times
and its precision gap (0.90 while every tune split scored 1.00) could not be reproduced
on seeds of the tune splits, so it was opened up to be tuned on, as docs/accuracy.md
says must happen to a test split that is looked into. The test split since then has new
seeds (TEST_SEED = 1100000 + k) and fabric sizes no other split has, its rails fabric too.
On 2026-12-07 its seeds moved to 1300000 + k (the sizes stay): a false incident it showed
a candidate change was looked into, and the engine changed because of it; the same day to
1500000 + k: its first score after that missed faults at 30 s polling, and the engine's
30 s level windows changed once a tune probe at 30 s showed the same.

    simulate_split(out=Path("split/test"), split="test", clean_hours=1.5)
"""
from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from .deliver import apply
from .fabric import Fabric, FabricSpec
from .realism import draw, draw_events, draw_physics, wide
from .scenarios import make_plan, simulate
from .shapes import SHAPES, reshape

TUNE_SEED, TUNE_WIDE_SEED, TUNE_ANY_SEED, TEST_SEED, SEED_SPAN = 100_000, 300_000, 500_000, 1_500_000, 100_000
TUNE_RANGE_SEED, TUNE_RETIRED_SEED = 700_000, 900_000
SPLITS = ("tune", "tune-wide", "tune-any", "tune-range", "tune-retired", "test")
BASES = {"tune": TUNE_SEED, "tune-wide": TUNE_WIDE_SEED, "tune-any": TUNE_ANY_SEED,
         "tune-range": TUNE_RANGE_SEED, "tune-retired": TUNE_RETIRED_SEED, "test": TEST_SEED}
# Splits that place faults anywhere (odd leaves and hosts too); tune and tune-wide place
# them on even ones only.
ANYWHERE = frozenset({"tune-any", "tune-range", "tune-retired", "test"})
# The name a split's random streams are seeded with: tune-retired draws as the first test
# split did, so that its runs are that split's, byte for byte.
STREAM = {"tune-retired": "test"}
CAUSES = ("link_flap", "link_degraded", "pfc_storm", "congestion", "microburst",
          "nic_degraded", "storage_slow", "device_down", "noisy_neighbor",
          "fec_creep", "pcie_stall", "storage_drift", "pfc_storm_low")
HOSTISH = {"link_flap", "pfc_storm", "congestion", "microburst", "nic_degraded",
           "pcie_stall", "pfc_storm_low"}
FABRICS = {"tune": (FabricSpec(), FabricSpec(spines=2, leaves=4, hosts_per_leaf=6)),
           # tune-wide: fabrics as big as the test's, of sizes no other split has
           "tune-wide": (FabricSpec(), FabricSpec(spines=4, leaves=4, hosts_per_leaf=6),
                         FabricSpec(spines=2, leaves=6, hosts_per_leaf=5, storage_hosts=3)),
           # tune-any: odd spine counts, of sizes no other split has
           "tune-any": (FabricSpec(), FabricSpec(spines=3, leaves=6, hosts_per_leaf=5),
                        FabricSpec(spines=5, leaves=4, hosts_per_leaf=5, storage_hosts=3)),
           # tune-retired: the first test split's sizes (sim/split.py docstring)
           "tune-retired": (FabricSpec(), FabricSpec(spines=4, leaves=6, hosts_per_leaf=4),
                            FabricSpec(spines=3, leaves=8, hosts_per_leaf=4, storage_hosts=3)),
           "test": (FabricSpec(), FabricSpec(spines=4, leaves=7, hosts_per_leaf=4),
                    FabricSpec(spines=3, leaves=5, hosts_per_leaf=6, storage_hosts=3))}

RAILS8 = FabricSpec(spines=2, leaves=8, hosts_per_leaf=4)  # 4 hosts of 8 NICs, 8 rails
RAILS = {"test": FabricSpec(spines=4, leaves=8, hosts_per_leaf=3)}  # the test's own: 3 hosts, 4 spines
FIXED = frozenset({RAILS8, *RAILS.values()} | {s for specs in FABRICS.values() for s in specs})
# tune-range: (low, high) of spines, leaves, hosts per leaf, storage hosts; rails: leaves = rails
RANGES = {"two_tier": ((2, 5), (3, 8), (3, 6), (2, 4)), "rails": ((2, 5), (4, 8), (3, 6), (2, 4))}


@dataclass(frozen=True)
class SplitEntry:
    name: str
    scenario: str
    seed: int
    duration: float


def entries(split: str, *, clean_hours: float | None = None,
            repeats: int | None = None) -> list[SplitEntry]:
    """The split's table: every cause `repeats` times (default 2 tune, 3 test) and the
    clean runs."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; valid: {', '.join(SPLITS)}")
    base = BASES[split]
    hours = clean_hours if clean_hours is not None else (0.5 if split == "tune" else 1.5)
    out, k = [], 0
    for r in range(repeats or (2 if split == "tune" else 3)):
        for cause in CAUSES:
            gray = cause in ("fec_creep", "pcie_stall", "storage_drift", "pfc_storm_low")
            out.append(SplitEntry(f"{cause}-{r}", cause, base + k, 600.0 if gray else 420.0))
            k += 1
    for c in range(max(1, math.ceil(hours * 4))):
        out.append(SplitEntry(f"clean-{c}", "clean", base + k, 900.0))
        k += 1
    assert k < SEED_SPAN
    return out


def _target(rng: random.Random, split: str, scenario: str, fab: Fabric) -> str | None:
    """A placement: tune (and tune-wide) on even leaves/hosts only, the others anywhere."""
    pick = rng.choice if split in ANYWHERE else (lambda xs: rng.choice(xs[::2]))
    if scenario in HOSTISH:
        return pick([e.name for e in fab.hosts])
    if scenario in ("link_degraded", "fec_creep"):
        return pick([fab.uplink(leaf, s) for leaf in range(fab.spec.leaves)
                     for s in range(fab.spec.spines)])
    if scenario in ("storage_slow", "storage_drift"):
        return pick([e.name for e in fab.storage])
    if scenario == "device_down":
        return pick(fab.switches)
    return None


def drawn_spec(seed: int, shape: str) -> FabricSpec:
    """tune-range's fabric for one run: sizes from RANGES, from the seed's own stream,
    never a fixed spec of any split (drawn again until it is none)."""
    rng = random.Random(f"{seed}:tune-range:fabric")
    lims = RANGES["rails" if shape == "rails" else "two_tier"]
    while True:
        spines, leaves, hosts, storage = (rng.randint(lo, hi) for lo, hi in lims)
        spec = FabricSpec(spines=spines, leaves=leaves, hosts_per_leaf=hosts, storage_hosts=storage)
        if spec not in FIXED:
            return spec


def _spec(rng: random.Random, split: str, shape: str, seed: int) -> FabricSpec:
    if split == "tune-range":
        return drawn_spec(seed, shape)
    return RAILS.get(split, RAILS8) if shape == "rails" else rng.choice(FABRICS[split])


def fault_devices(plan, start: float) -> tuple[tuple[str, float, float], ...]:
    """Each fault's devices and interfaces (a link's two ends and their devices, an
    interface and its device, a host, a switch) with the stretch of event time they must
    stay observed, as `busy` widens a fault."""
    out = []
    for f in plan.faults:
        lo, hi = start + f.start - plan.start - 30, start + f.end - plan.start + 60
        for part in str(f.entity).split("--"):
            out += [(name, lo, hi) for name in dict.fromkeys((part.split(":")[0], part))]
    return tuple(out)


def build(entry: SplitEntry, *, out: Path, split: str, intervals: tuple[int, ...] | None = None,
          blips: float = 1.0) -> dict:
    """Generate one entry: scenario at 1 s with drawn physics and benign events, shape,
    realism; truth gains "realism". `intervals` (a probe: `check_intervals`) replaces the
    split's sample interval choices and is kept in the truth as `probe_intervals`; `blips`
    (a probe: `check_blips`) multiplies the blips drawn, kept as `probe_blips`."""
    rng = random.Random(f"{entry.seed}:{STREAM.get(split, split)}:realism")
    prng = random.Random(f"{entry.seed}:{STREAM.get(split, split)}:physics")  # its own stream: the rest as before
    shape = rng.choice(SHAPES[split])
    speed, physics = draw_physics(prng, split)
    spec = replace(_spec(rng, split, shape, entry.seed), speed_gbps=speed)
    fab = Fabric(spec)
    intensity = rng.choice(("strong", "medium", "weak") if wide(split) else ("strong", "medium"))
    target = _target(rng, split, entry.scenario, fab)
    kw = dict(scenario=entry.scenario, seed=entry.seed, fabric=spec, duration=entry.duration,
              intensity=intensity, target=target)
    plan = make_plan(**kw)  # the fault windows, for benign events to keep clear of
    busy = [(f.start - plan.start - 30, f.end - plan.start + 60) for f in plan.faults]
    ceiling = round(min(0.9, physics.ecn_knee - 0.03), 3)  # a ramp stays below ECN marking
    events = tuple(replace(e, ceiling=ceiling) for e in
                   draw_events(prng, split=split, busy=busy, duration=entry.duration))
    truth = simulate(out=out, label=entry.name, physics=physics, benign=events, **kw)
    params = draw(rng, split=split, fabric=fab, start=truth["start"], duration=entry.duration,
                  intervals=intervals, more=random.Random(f"{entry.seed}:{STREAM.get(split, split)}:more-blips"),
                  clear=fault_devices(plan, truth["start"]), blip_scale=blips)
    counts = apply(out, fab, params, seed=entry.seed)
    counts |= reshape(out, fab, shape, rng, interval=params.intervals["switch"])
    truth = json.loads((Path(out) / "truth.json").read_text())  # reshape may rename
    truth.update(counts)
    truth["split"] = split
    if intervals:
        truth["probe_intervals"] = list(intervals)
    if blips != 1.0:
        truth["probe_blips"] = blips
    realism = params.describe()
    for b in truth.get("benign", []):
        realism["benign_kinds"][b["kind"]] = realism["benign_kinds"].get(b["kind"], 0) + 1
    truth["realism"] = realism | {"shape": shape, "fabric_spec": asdict(spec),
                                  "physics": asdict(physics), "events": truth.get("benign", [])}
    (Path(out) / "truth.json").write_text(json.dumps(truth, indent=2) + "\n")
    return truth


def check_intervals(split: str, intervals: tuple[int, ...] | None) -> None:
    """A probe's interval choices: tune splits only (the test split is built as it is,
    once: docs/accuracy.md), each a whole number of seconds within contract section 1's
    1-60 s. ValueError says what is wrong."""
    if not intervals:
        return
    if split == "test":
        raise ValueError("--intervals builds a probe of a tune split; the test split keeps its own intervals")
    bad = [i for i in intervals if not 1 <= i <= 60]
    if bad:
        raise ValueError(f"sample intervals are 1-60 s (contract section 1), not {bad[0]}")


def check_blips(split: str, blips: float) -> None:
    """A probe's blip multiplier: tune splits only, 0-100 (0: no blips). ValueError says
    what is wrong."""
    if blips == 1.0:
        return
    if split == "test":
        raise ValueError("--blips builds a probe of a tune split; the test split keeps its own blips")
    if not 0 <= blips <= 100:
        raise ValueError(f"--blips multiplies the blips a run draws: 0 to 100, not {blips:g}")


def simulate_split(*, out: Path, split: str, clean_hours: float | None = None,
                   repeats: int | None = None, only: str | None = None,
                   on_entry: Callable[[SplitEntry, dict, float], None] | None = None,
                   intervals: tuple[int, ...] | None = None, blips: float = 1.0) -> list[Path]:
    import fnmatch
    check_intervals(split, intervals)
    check_blips(split, blips)
    paths = []
    for entry in entries(split, clean_hours=clean_hours, repeats=repeats):
        if only and not fnmatch.fnmatchcase(entry.name, only):
            continue
        path = Path(out) / entry.name
        t0 = time.perf_counter()
        truth = build(entry, out=path, split=split, intervals=intervals, blips=blips)
        if on_entry:
            on_entry(entry, truth, time.perf_counter() - t0)
        paths.append(path)
    return paths
