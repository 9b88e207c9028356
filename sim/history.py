"""A clean history for each run of a built split: what the run's fabric looked like
before it, for anomaly models trained on "10 minutes of the fabric's own clean history"
(issue 12).

The split keeps no history of its own (each run starts at its fault plan's start), so
one is generated per run: the run's own fabric spec and shape (truth `realism`), the
`clean` scenario (no fault, the same kinds of benign phenomena), the run's sample
intervals, jitter, missed, duplicate and late rates and its persistent phenomena (flat
FEC floors, clock skew: `PERSISTENT`) and its physics constants (FEC noise, storage
latency, buffers, MTU, ECN knee), all read from its truth.json. The
simulator seed is the run's plus HISTORY_SEED_OFFSET, so a clean run's history is not
the run itself, and the benign phenomena are drawn from that seed (other blips, bursts
and operations than the run's). The history covers the same event-time span as a clean
plan starts at: the models do not care when it was recorded, only what was normal.

    python -m sim.history SPLIT_DIR --out HIST_DIR [--duration 600] [--run NAME ...]

writes HIST_DIR/<run>/ (topology.dot, jobs.jsonl, telemetry.jsonl.gz, truth.json) for
each run folder of SPLIT_DIR (read only).
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

from .deliver import apply
from dataclasses import replace

from .fabric import Fabric, FabricSpec, Physics
from .realism import Phenomenon, draw, draw_events
from .scenarios import simulate
from .shapes import reshape
from .split import STREAM

# What the fabric *is*, not what happens on it: a port's flat high corrected-FEC floor (a
# marginal optic), a device's clock skew. The history has the run's, over its own span;
# every other benign phenomenon is drawn anew (other blips, bursts and operations).
PERSISTENT = frozenset({"fec_floor", "clock_skew"})
HISTORY_SEED_OFFSET = 50_000  # tune seeds are 100000 + k (k < 100): 150000 + k is used by no split entry
DEFAULT_DURATION = 600.0


def build_history(run: Path, out: Path, *, duration: float = DEFAULT_DURATION) -> dict:
    """A clean `duration` s of `run`'s fabric, delivered as `run` is; returns its truth."""
    truth = json.loads((Path(run) / "truth.json").read_text())
    real = truth.get("realism")
    if not real:
        raise ValueError(f"{run}: truth.json has no 'realism' (not a run of a built split)")
    spec = FabricSpec(**real["fabric_spec"])
    fab = Fabric(spec)
    seed = int(truth["seed"]) + HISTORY_SEED_OFFSET
    split = truth.get("split", "tune")
    out = Path(out)
    rng = random.Random(f"{seed}:{STREAM.get(split, split)}:history")
    # The fabric's physics (its optics' FEC noise, its targets' latency, buffers, MTU, ECN
    # knee) is what the fabric *is*: the run's. Its workload events (job ramp-ups, an idle
    # port) are drawn anew, as for a clean run of the split, below the same ECN knee.
    physics = _physics(real.get("physics"))
    ceiling = round(min(0.9, physics.ecn_knee - 0.03), 3)
    events = tuple(replace(e, ceiling=ceiling) for e in draw_events(rng, split=split, busy=[], duration=duration))
    hist = simulate(out=out, scenario="clean", seed=seed, fabric=spec, duration=duration,
                    label=f"{truth['scenario']}-history", physics=physics, benign=events)
    params = draw(rng, split=split, fabric=fab, start=hist["start"], duration=duration,
                  more=random.Random(f"{seed}:{STREAM.get(split, split)}:history-more-blips"))
    t0, t1 = hist["start"] + 5, hist["start"] + duration - 5  # as realism.draw spans a run
    params.phenomena = [p for p in params.phenomena if p.kind not in PERSISTENT] + [
        Phenomenon(**(p | {"start": t0, "end": t1})) for p in real["phenomena"] if p["kind"] in PERSISTENT]
    params.intervals = dict(real["intervals"])  # delivered as the run is
    params.jitter_s, params.missed = real["jitter_s"], real["missed"]
    params.duplicate, params.late = real["duplicate"], real["late"]
    counts = apply(out, fab, params, seed=seed)
    counts |= reshape(out, fab, real["shape"], rng, interval=params.intervals["switch"])
    hist = json.loads((out / "truth.json").read_text())
    hist.update(counts)
    hist["history_of"] = truth["scenario"]
    hist["realism"] = params.describe() | {"shape": real["shape"], "fabric_spec": real["fabric_spec"],
                                           "physics": real.get("physics"), "events": hist.get("benign", [])}
    (out / "truth.json").write_text(json.dumps(hist, indent=2) + "\n")
    return hist


def _physics(drawn: dict | None) -> Physics:
    """The run's physics constants (truth realism.physics), or the default (older splits)."""
    if not drawn:
        return Physics()
    return Physics(**(drawn | {"storage_latency_ms": tuple(drawn["storage_latency_ms"])}))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("split", type=Path, help="a built split (its run folders are read, never written)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--duration", type=float, default=DEFAULT_DURATION)
    ap.add_argument("--run", action="append", default=[], help="only this run (folder name); repeatable")
    args = ap.parse_args(argv)
    runs = sorted(p for p in args.split.iterdir() if (p / "truth.json").exists())
    if not runs:
        print(f"{args.split}: no run folders (with truth.json)", file=sys.stderr)
        return 2
    for run in runs:
        if args.run and run.name not in args.run:
            continue
        target = args.out / run.name
        if (target / "truth.json").exists():
            continue  # built before (same inputs, same bytes)
        t0 = time.perf_counter()
        build_history(run, target, duration=args.duration)
        print(f"  {run.name}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
