"""List every false incident of a built suite, to see what the engine calls a fault that
is not one: per run, each incident that matches no injected fault (or is a further
incident of a fault that already has its primary), with its top cause, how long it was
open and the symptoms it held.

    python -m evaluation.false_report SPLIT_DIR [--run NAME ...] [--models HIST]

With `--models HIST`, rules + models trained on each run's own clean history
(evaluation.scenarios.history_models; see evaluation.split_report).
"""
from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from evaluation.scenarios import find_scenarios, history_models, replay_scenario
from evaluation.score import false_incidents, ts


def describe(inc: dict, start: float) -> str:
    """One false incident in a line: when (s from the run's start), how long, the top
    cause and its score, and its symptoms counted by kind and entity."""
    top = min(inc["root_causes"], key=lambda rc: rc["rank"], default=None)
    opened = ts(inc["opened_at"])
    ends = [ts(s["end"]) or ts(s["last"]) for s in inc["symptoms"]]
    lasted = max(ends, default=opened) - opened
    cause = f"{top['cause']} {top['entity']['id']} ({top['score']:.2f})" if top else "no cause"
    kinds = Counter(f"{s['kind']}@{s['entity']['id']}" for s in inc["symptoms"])
    shown = ", ".join(f"{k}" + (f" x{n}" if n > 1 else "") for k, n in kinds.most_common(6))
    more = f" +{len(kinds) - 6} more" if len(kinds) > 6 else ""
    return f"t+{opened - start:.0f}s {lasted:.0f}s {cause}: {shown}{more}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--run", action="append", default=[], help="only this run (folder name); repeatable")
    ap.add_argument("--models", type=Path, metavar="HIST",
                    help="rules + models trained on each run's own clean history in HIST/<run> (sim.history)")
    args = ap.parse_args(argv)
    causes: Counter[str] = Counter()
    for folder in find_scenarios([args.dir]):
        if args.run and folder.name not in args.run:
            continue
        models = history_models(args.models, folder.name) if args.models else None
        truth, incidents, _ = replay_scenario(folder, models=models)
        found = false_incidents(truth, incidents)
        faults = "; ".join(f"{f['cause']} {f['entity']['id']} t+{f['start'] - truth['start']:.0f}s"
                           f"..{f['end'] - truth['start']:.0f}s" for f in truth.get("faults", [])) or "clean"
        print(f"## {folder.name} ({faults}): {len(incidents)} incidents, {len(found)} false")
        for inc, why in found:
            print(f"- {describe(inc, truth['start'])} [{why}]")
            top = min(inc["root_causes"], key=lambda rc: rc["rank"], default=None)
            causes[top["cause"] if top else "-"] += 1
        sys.stdout.flush()
    print("\n## False incidents by top cause")
    for cause, n in causes.most_common():
        print(f"- {cause}: {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
