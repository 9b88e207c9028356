"""Every fault of a built tune probe in a line, to see what the engine misses or does
late, and the symptoms one run's entities sent the correlator, to see why.

    python -m evaluation.fault_report SPLIT_DIR [--models HIST] [--jobs N] [--json OUT]
    python -m evaluation.fault_report SPLIT_DIR --run NAME --symptoms SUBSTR [SUBSTR ...]

The first form replays every run (in N processes, default 2) and prints, per run sorted
by sample interval, each fault (cause, onset, gray, found or MISS, rank, delay, the top
cause of its incident) and the run's false incidents by top cause; then the misses, and
per interval the median delay of the loud abrupt faults (in s and samples) and of the
gray ones: the figures of issue 12, on a probe, before a change and after it. The second
replays one run and prints, as the correlator receives them, the symptoms whose entity
id contains a SUBSTR, then the fault and the incidents. For tune probes only: the test
split is scored by `evaluation.split_report`, once (docs/accuracy.md).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from evaluation.split_report import RunScore, _loud_abrupt, score_run


def _score(args: tuple[Path, Path | None]) -> RunScore:
    return score_run(*args)


def fault_lines(runs: list[RunScore]) -> list[str]:
    """A line per fault and per run with false incidents, then the misses and each
    interval's medians."""
    lines, missed = [], []
    for r in sorted(runs, key=lambda r: (r.interval, r.result.scenario)):
        tag = f"{r.result.scenario:28s} {r.interval:>3}s"
        for f in r.result.faults:
            found = "found" if f.detected else "MISS "
            delay = "-" if f.delay_s is None else f"{f.delay_s:.0f}s"
            lines.append(f"{tag} {f.cause:15s} {f.onset[:3]} {'gray' if f.gray else '    '} {found} "
                         f"rank {f.rank or '-'} delay {delay} top {f.top_cause or '-'}")
            if not f.detected:
                missed.append(f"{r.result.scenario} at {r.interval} s: {f.cause} {f.entity}")
        false = {c: n for c, (_, n) in r.result.by_cause.items() if n}
        if r.result.false_incidents:
            lines.append(f"{tag} FALSE {r.result.false_incidents}: "
                         + ", ".join(f"{c} x{n}" for c, n in sorted(false.items())))
    lines += ["", f"misses: {len(missed)}"] + [f"- {m}" for m in missed] + [""]
    for interval in sorted({r.interval for r in runs}):
        group = [f for r in runs if r.interval == interval for f in r.result.faults]
        lines.append(f"{interval} s: {_median(group, _loud_abrupt, interval)} loud abrupt; "
                     f"{_median(group, lambda f: f.gray, None)} gray; "
                     f"false incidents {sum(r.result.false_incidents for r in runs if r.interval == interval)}")
    return lines


def _median(faults: list, only: Callable, interval: int | None) -> str:
    delays = [f.delay_s for f in faults if only(f) and f.detected and f.delay_s is not None]
    n = sum(1 for f in faults if only(f))
    if not delays:
        return f"median - of {n}"
    m = statistics.median(delays)
    samples = f" ({m / interval:.1f} samples)" if interval else ""
    return f"median {m:.1f} s{samples} of {len(delays)} found/{n}"


def trace(run: Path, needles: list[str], out=sys.stdout, histories: Path | None = None) -> None:
    """Replay `run` (with the models of its history in `histories`, if given), printing
    each symptom the correlator receives whose entity id holds one of `needles` (seconds
    from the run's start), then the faults and incidents."""
    from compose import build_engine
    from compose.engine import new_pipeline
    from engine.replay import replay
    from evaluation.scenarios import history_models, scenario_files, scenario_settings

    files = scenario_files(run)
    truth = json.loads(files["truth"].read_text())
    t0 = truth["start"]
    parts = build_engine(scenario_settings(run), models=history_models(histories, run.name) if histories else None)
    latest: dict[str, dict] = {}
    pipe = new_pipeline(parts)
    correlator = pipe.correlate.correlator
    add = correlator.add

    def seen(symptom) -> None:
        if any(n in symptom.entity.id for n in needles):
            end = "-" if symptom.end is None else f"{symptom.end - t0:.0f}"
            metrics = {k: round(v, 3) for k, v in symptom.metrics.items()}
            print(f"{symptom.rule:28s} {symptom.entity.id:30s} start {symptom.start - t0:7.1f} "
                  f"last {symptom.last - t0:7.1f} end {end:>5} {metrics}", file=out)
        add(symptom)

    correlator.add = seen
    replay(pipe, [files["telemetry"]], sink=lambda changes: latest.update((i["id"], i) for i in changes))
    for f in truth["faults"]:
        print(f"fault {f['cause']} {f['entity']['id']} {f['start'] - t0:.0f}..{f['end'] - t0:.0f} s", file=out)
    for inc in latest.values():
        rcs = sorted(inc["root_causes"], key=lambda rc: rc["rank"])
        print(f"incident {inc['opened_at']}: " + ", ".join(f"{rc['cause']} {rc['entity']['id']}" for rc in rcs[:3]),
              file=out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--models", type=Path, metavar="HIST",
                    help="rules + models trained on each run's own clean history in HIST/<run> (sim.history)")
    ap.add_argument("--jobs", type=int, default=2, help="processes (default 2)")
    ap.add_argument("--json", type=Path, metavar="OUT", help="also write every fault's result as JSON")
    ap.add_argument("--run", help="with --symptoms: the run (folder name) to trace")
    ap.add_argument("--symptoms", nargs="+", metavar="SUBSTR", help="trace the symptoms of these entities")
    args = ap.parse_args(argv)
    from evaluation.scenarios import find_scenarios
    if args.symptoms:
        if not args.run or not (args.dir / args.run / "truth.json").exists():
            print(f"error: --symptoms needs --run NAME, a run under {args.dir}", file=sys.stderr)
            return 2
        trace(args.dir / args.run, args.symptoms, histories=args.models)
        return 0
    try:
        runs = find_scenarios([args.dir])  # ValueError: no such folder, or no run in it
        if args.jobs > 1:
            with ProcessPoolExecutor(args.jobs) as pool:
                scores = list(pool.map(_score, [(r, args.models) for r in runs]))
        else:
            scores = [score_run(r, args.models) for r in runs]
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("\n".join(fault_lines(scores)))
    if args.json:
        args.json.write_text(json.dumps([{"run": s.result.scenario, "interval": s.interval,
                                          "false": s.result.false_incidents,
                                          "faults": [vars(f) for f in s.result.faults]} for s in scores], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
