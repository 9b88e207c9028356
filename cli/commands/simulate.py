"""`fabric-rca simulate`: a scenario, the classic suite or a realistic tune/test split."""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from cli.common import CliError


def add(sub) -> None:
    g = sub.add_parser("simulate", help="generate a scenario: topology, jobs, telemetry and truth")
    g.add_argument("--out", type=Path, help="folder for one scenario (with --scenario)")
    g.add_argument("--scenario", help="scenario name (an unknown name lists them all)")
    g.add_argument("--seed", type=int, default=1)
    g.add_argument("--duration", type=float, help="seconds of event time (default: the scenario's)")
    g.add_argument("--intensity", choices=("strong", "medium", "weak"), default="strong",
                   help="how loud the fault is (default strong)")
    g.add_argument("--target", help="where the fault sits: a host, NIC, switch port, link, switch, "
                                    "storage host or job id, as the scenario takes")
    g.add_argument("--fabric", type=fabric_spec, metavar="SxLxH[xST]",
                   help="spines x leaves x hosts per leaf [x storage hosts] (default 2x4x4x2)")
    g.add_argument("--suite", nargs="?", const="", metavar="DIR",
                   help="build the scenario suite, one folder per entry under DIR (or --out)")
    g.add_argument("--only", metavar="GLOB", help="with --suite: only the entries whose name matches")
    g.add_argument("--split", choices=("tune", "tune-wide", "tune-any", "tune-range", "tune-retired", "test"),
                   help="with --suite: build the realistic tune, tune-wide (tune's even "
                        "placements, test's ranges), tune-any (tune-wide with placements "
                        "anywhere and odd spine counts), tune-range (tune-any on fabric "
                        "sizes drawn per run from ranges), tune-retired (the first test split, "
                        "retired to tuning) or test split (sim/split.py) "
                        "instead of the classic suite; its seeds are fixed, --seed is ignored")
    g.add_argument("--clean-hours", type=float, metavar="H",
                   help="with --split: hours of clean runs (default 0.5 tune, 1.5 test)")
    g.add_argument("--repeats", type=int,
                   help="with --split: runs of each cause (default 2 tune, 3 test)")
    g.add_argument("--intervals", type=interval_list, metavar="S,S,...",
                   help="with a tune --split: a probe whose runs draw their sample intervals from these "
                        "(1-60 s, e.g. 2,15,60) instead of the split's 1/5/10(/30) s; the truth keeps them "
                        "as probe_intervals")
    g.add_argument("--blips", type=float, default=1.0, metavar="X",
                   help="with a tune --split: a probe whose runs draw X times the blips of contract "
                        "section 8 (0-100; 3 or 10 ask how dense noise may get before it recurs on one "
                        "entity, which the contract calls a fault); the truth keeps X as probe_blips")
    g.set_defaults(fn=run)


def run(args) -> int:
    import sim

    if args.suite is not None:
        return _suite(args)
    if not args.scenario:
        raise CliError(f"--scenario is required (one of: {', '.join(sim.ALL_SCENARIOS)}) unless --suite is given")
    if args.out is None:
        raise CliError("--out DIR is required with --scenario")
    truth = sim.simulate(out=args.out, scenario=args.scenario, seed=args.seed, duration=args.duration,
                         intensity=args.intensity, target=args.target, fabric=args.fabric)
    print(f"wrote scenario {args.scenario!r} ({truth['records']:,} records, {len(truth['faults'])} fault(s)) to {args.out}")
    return 0


def _suite(args) -> int:
    import sim

    out = Path(args.suite) if args.suite else args.out
    if out is None:
        raise CliError("--suite needs a folder: --suite DIR (or --suite --out DIR)")
    total, t0 = 0, time.perf_counter()

    def done(entry, truth, seconds: float) -> None:
        nonlocal total
        total += truth["records"]
        faults = len(truth["faults"])
        print(f"  {entry.name:<40} {truth['records']:>10,} records  {faults} fault(s)  "
              f"{truth['hosts']:>4} hosts  {seconds:6.1f} s", flush=True)

    if (args.intervals or args.blips != 1.0) and not args.split:
        raise CliError("--intervals and --blips need --split (a probe of a tune split)")
    if args.split:
        from sim.split import check_blips, check_intervals, simulate_split
        try:
            check_intervals(args.split, args.intervals)
            check_blips(args.split, args.blips)
        except ValueError as exc:
            raise CliError(str(exc)) from None
        paths = simulate_split(out=out, split=args.split, clean_hours=args.clean_hours, repeats=args.repeats,
                               only=args.only, on_entry=done, intervals=args.intervals, blips=args.blips)
    else:
        paths = sim.simulate_suite(out=out, seed=args.seed, only=args.only, on_entry=done)
    print(f"wrote {len(paths)} scenarios under {out}: {total:,} records in {time.perf_counter() - t0:.0f} s")
    return 0


def fabric_spec(text: str):
    """SPINESxLEAVESxHOSTS_PER_LEAF[xSTORAGE_HOSTS], e.g. 8x32x16x4."""
    from sim import FabricSpec
    try:
        parts = [int(x) for x in text.lower().split("x")]
        if len(parts) not in (3, 4):
            raise ValueError
        return FabricSpec(*parts)
    except (TypeError, ValueError) as exc:
        detail = f": {exc}" if str(exc) else ""
        raise argparse.ArgumentTypeError(
            f"{text!r} is not SPINESxLEAVESxHOSTS[xSTORAGE] (e.g. 8x32x16x4){detail}") from None


def interval_list(text: str) -> tuple[int, ...]:
    """Comma-separated whole seconds, e.g. 2,15,60."""
    try:
        out = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        out = ()
    if not out:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of whole seconds (e.g. 2,15,60)")
    return out
