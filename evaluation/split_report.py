"""The headline accuracy report, docs/accuracy.md: the engine (rules only, as it is)
scored on a built split of realistic scenarios, per cause and sample interval.

    python -m evaluation.split_report SPLIT_DIR --write docs/accuracy.md
    python -m evaluation.split_report SPLIT_DIR --models HIST

With `--models HIST`, rules plus anomaly models trained per run on that run's own clean
history (`python -m sim.history SPLIT_DIR --out HIST` builds the histories; the models are
trained into HIST/<run>/models on first use).

Scoring is `RunScore` objects (one per run: its ScenarioResult and what the realism
layer drew); `cells` and `interval_totals` reduce them; `accuracy_doc` makes the text.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from evaluation.score import (
    HEADERS, FaultResult, ScenarioResult, Summary, _abrupt, _fmt, _gray, _render, _row, cause_precision, misses,
    score_scenario, summarize, table,
)


@dataclass(frozen=True)
class RunScore:
    result: ScenarioResult
    interval: int  # the switches' sample interval, s (truth realism.interval_s)
    shape: str
    intensity: str  # "clean" for a clean run
    records: int


def check_split_run(truth: dict) -> None:
    if not truth.get("realism"):
        raise ValueError(f"{truth.get('scenario')!r} is not a split run (truth has no realism); "
                         "build one with `fabric-rca simulate --suite DIR --split tune|test`")


def run_score(truth: dict, incidents: list[dict], records: int) -> RunScore:
    check_split_run(truth)
    realism = truth["realism"]
    return RunScore(score_scenario(truth, incidents), int(realism["interval_s"]), realism["shape"],
                    "clean" if truth.get("clean") else truth["intensity"], records)


@dataclass(frozen=True)
class Cell:
    """One cause (or every cause: `cause` None) at one interval (or all: None)."""

    cause: str | None
    interval: int | None
    runs: int
    clean_hours: float
    faults: int
    precision: float | None
    false_per_clean_hour: float | None
    recall: float | None
    top1: float | None
    delay_median: float | None
    abrupt_delay: float | None = None  # median delay of the loud abrupt faults (`_loud_abrupt`)


def gray_by_interval(runs: list[RunScore]) -> str:
    """The gray faults' median delay per sample interval (the switches', as in the tables):
    issue 12's gray target is at 1 s sampling, and a median over every interval is mostly
    the coarse ones'."""
    parts = []
    for interval in sorted({r.interval for r in runs}):
        g = summarize(_group(runs, interval), only=_gray)
        if g.faults:
            parts.append(f"{interval} s: {g.faults} faults, recall {_fmt(g.recall)}, median {_fmt(g.delay_median)} s")
    return "Gray failures per sample interval: " + ("; ".join(parts) if parts else "none") + "."


def _loud_abrupt(f: FaultResult) -> bool:
    """An abrupt fault that is not gray: the issue's "<= 5 s at 1 s sampling" is for these;
    gray faults (pfc_storm_low starts at once but stays low) have their own delay target."""
    return _abrupt(f) and not f.gray


def _group(runs: list[RunScore], interval: int | None) -> list[ScenarioResult]:
    return [r.result for r in runs if interval is None or r.interval == interval]


def _cell(cause: str | None, interval: int | None, group: list[ScenarioResult]) -> Cell:
    s: Summary = summarize(group, cause=cause)
    if cause is None:
        precision, fph = s.precision, s.false_per_hour
    else:
        precision, fph = cause_precision(group, cause)
    return Cell(cause, interval, len(group), sum(r.hours for r in group if r.clean), s.faults,
                precision, fph, s.recall, s.top1, s.delay_median,
                summarize(group, cause=cause, only=_loud_abrupt).delay_median)


def intervals_of(runs: list[RunScore]) -> list[int]:
    return sorted({r.interval for r in runs})


def cells(runs: list[RunScore]) -> list[Cell]:
    """Per cause and interval (then that cause over every interval): the cells with a
    fault or an incident of the cause. A cause is a fault's contract cause (gray
    scenarios under theirs) or an incident's top root cause."""
    causes = sorted({f.cause for r in runs for f in r.result.faults}
                    | {c for r in runs for c in r.result.by_cause if c != "-"})
    out = []
    for cause in causes:
        for iv in [*intervals_of(runs), None]:
            group = _group(runs, iv)
            opened = sum(r.by_cause.get(cause, (0, 0))[0] for r in group)
            cell = _cell(cause, iv, group)
            if cell.faults or opened:
                out.append(cell)
    return out


def interval_totals(runs: list[RunScore]) -> list[Cell]:
    """Every cause together, per interval and then over all."""
    return [_cell(None, iv, _group(runs, iv)) for iv in [*intervals_of(runs), None]]


def _cell_row(c: Cell) -> tuple[str, ...]:
    iv = "all" if c.interval is None else str(c.interval)
    return ("all causes" if c.cause is None else c.cause, iv, str(c.faults), _fmt(c.precision),
            _fmt(c.false_per_clean_hour), _fmt(c.recall), _fmt(c.top1), _fmt(c.delay_median))


CELL_HEAD = ("cause", "interval s", "faults", "precision", "false inc./clean h", "recall", "top-1",
             "delay p50 s")
TOTAL_HEAD = ("interval s", "runs", "clean h", "faults", "precision", "false inc./clean h", "recall",
              "top-1", "delay p50 s", "abrupt delay p50 s", "abrupt delay p50, samples")  # abrupt: not gray


def _total_row(c: Cell) -> tuple[str, ...]:
    """An interval's totals; the abrupt delay in seconds and in sample intervals too (the
    issue's target: <= 5 s at 1 s sampling, <= 3 samples at coarser ones)."""
    samples = c.abrupt_delay / c.interval if c.abrupt_delay is not None and c.interval else None
    return ((("all" if c.interval is None else str(c.interval)), str(c.runs), f"{c.clean_hours:.2f}")
            + _cell_row(c)[2:] + (_fmt(c.abrupt_delay), _fmt(samples)))

HONEST = """How the split is kept honest. The test split's seeds (1500000 + k) and the tune split's
(100000 + k) are fixed in `sim/split.py` and never meet, and a build is deterministic
(same seed, same bytes), so anyone can rebuild this page's input and check it. The test
split's ranges are wider and it has what tune lacks: 30 s polling, the three-tier fabric
with superspines, fault placements on odd leaves and hosts, weak intensities, 100 and
800 Gb/s links, 128 MiB buffers, a 1024-byte MTU, a lower ECN knee, longer and steeper
job ramp-ups, up to 5 s of clock skew and 5 % missed samples (`sim/realism.py`). A third
split, tune-wide (seeds 300000 + k), is tuned on too: the tune split's even placements
with the test split's ranges and shapes, on fabrics as big as the test's but of other
sizes, so that tuning sees the noise of wide ranges and big fabrics. A fourth, tune-any
(seeds 500000 + k), is tune-wide with placements anywhere and odd spine counts, on sizes
of its own. A fifth, tune-range (seeds 700000 + k), is tune-any on fabrics whose sizes
are drawn per run from ranges, never one of any split's fixed sizes. A sixth,
tune-retired (seeds 900000 + k), is the first test split, retired to tuning on 2026-12-04
after six published scores: every tuning split scored precision 1.00 where it scored 0.90,
so its false incidents were opened up to be tuned on, and the test split got new seeds
and new fabric sizes. The test split keeps its own seeds and fabric sizes (its rails
fabric too), which no tuning split has. Its seeds moved twice on 2026-12-07: from
1100000 + k, because a false incident it showed for a candidate change (storage pauses of
a few seconds in the realism layer) was looked into and the engine changed because of it
(docs/design.md, "Five buckets"); and from 1300000 + k, because its first score after that
missed faults at 30 s polling, and the engine's 30 s level windows changed once a tune
probe at 30 s showed the same. Every
run is a scenario rewritten by the realism layer (`sim/realism.py`, `sim/deliver.py`,
`sim/shapes.py`) with the benign cases of contract section 8. Thresholds are tuned on
the tune splits only (`fabric-rca simulate --suite DIR --split tune|tune-wide|tune-any|tune-range|tune-retired`,
scored with
`python -m evaluation.split_report DIR` and `python -m evaluation.false_report DIR`);
the test split is built and scored once, at the end, on the merged engine, by
`scripts/accuracy-split`, and nobody changes the engine because of it. Were that to
happen, the test split would have become a tune split: the remedy is new test seeds
(`TEST_SEED`), not another look. The classic suite, which was tuned together with the
rules and so flatters them, is reported apart in [accuracy-classic.md](accuracy-classic.md)."""

READING = """Reading the figures. The interval is the switches' sample interval (NICs and
storage may poll slower: truth `realism.intervals`). Precision of a cause: of the
incidents whose top root cause is that cause, the share that are an injected fault's one
incident (naming the wrong cause for a real fault is counted by top-1, not here); its
false incidents per clean hour count only clean runs. Recall, top-1 and delay are over
the faults of that cause (gray scenarios under their contract cause: fec_creep as
link_degraded, pcie_stall as nic_degraded, storage_drift as storage_slow, pfc_storm_low
as pfc_storm). A cell rests on few runs (the default test split has 3 of each of the 13
scenarios and 1.5 clean hours over 4 intervals): read a cell with its `faults` and the
interval's `clean h`. The abrupt delay of an interval is over its abrupt faults that are
not gray (gray faults are in their own line below), in seconds and in sample intervals.
For the issue's 5 clean hours: `scripts/accuracy-split DIR --clean-hours 5`."""


def _by(runs: list[RunScore], title: str, key) -> list[str]:
    groups: dict = defaultdict(list)
    for r in runs:
        groups[key(r)].append(r.result)
    rows = [_row(str(k), summarize(v)) for k, v in sorted(groups.items(), key=lambda x: str(x[0]))]
    return [f"### By {title}", "", _render((title,) + HEADERS, rows, markdown=True), ""]


def accuracy_doc(runs: list[RunScore], *, split: str, seconds: float,
                 build_seconds: float | None = None, models: bool = False) -> str:
    """docs/accuracy.md from the runs of one split."""
    results = [r.result for r in runs]
    method = "rules + models (each run's own 600 s clean history)" if models else "rules only"
    clean_h = sum(r.hours for r in results if r.clean)
    name = "held-out test split" if split == "test" else f"{split} split (NOT the held-out test split)"
    made = ("Generated by `fabric-rca simulate --suite DIR --split test`, each run's clean history by "
            "`python -m sim.history DIR --out HIST`, then `python -m evaluation.split_report DIR --models HIST "
            "--write docs/accuracy-models.md`" if models else
            "Generated by `scripts/accuracy-split` (build: `fabric-rca simulate --suite DIR --split test`, then "
            "`python -m evaluation.split_report DIR --write docs/accuracy.md`)")
    lines = [f"# Diagnosis accuracy on the {name}" + (", rules and models" if models else ""), "",
             made + ". Do not edit by hand.", "",
             HONEST, "", READING, "",
             f"{len(runs)} runs, {sum(len(r.faults) for r in results)} faults, {clean_h:.2f} clean hours, "
             f"{sum(r.records for r in runs):,} records; evaluation took {seconds:.0f} s"
             + (f", building {build_seconds:.0f} s" if build_seconds else "") + ".", "",
             f"Engine: {method}.", "",
             "## Per sample interval, every cause", "",
             _render(TOTAL_HEAD, [_total_row(c) for c in interval_totals(runs)], markdown=True), "",
             "## Per cause and sample interval", "",
             _render(CELL_HEAD, [_cell_row(c) for c in cells(runs)], markdown=True), "",
             f"## Other breakdowns ({method})", "", "### Per cause, every interval", "",
             table(results, markdown=True), ""]
    gray = summarize(results, only=_gray)
    lines += [f"Gray failures: {gray.faults} faults, recall {_fmt(gray.recall)}, median delay "
              f"{_fmt(gray.delay_median)} s (p90 {_fmt(gray.delay_p90)} s)."]
    lines += [gray_by_interval(runs), ""]
    lines += _by(runs, "fabric shape", lambda r: r.shape)
    lines += _by(runs, "intensity", lambda r: r.intensity)
    clean = defaultdict(int)
    for r in results:
        for cause, (_, false) in (r.by_cause.items() if r.clean else ()):
            clean[cause] += false
    lines += ["## False incidents on the clean runs, by top root cause", "",
              "Every incident on a clean run is false; each run has only benign phenomena (truth `realism`).", ""]
    lines += [f"- {c}: {n}" for c, n in sorted(clean.items(), key=lambda x: -x[1]) if n] or ["- none"]
    lines += ["", "## Misses", ""] + ([f"- {m}" for m in misses(results)] or ["- none"])
    return "\n".join(lines) + "\n"


def score_run(run: Path, histories: Path | None = None) -> RunScore:
    """Replay and score one run (with models trained on its history in `histories`/<run>
    when given)."""
    from evaluation.scenarios import history_models, replay_scenario
    models = history_models(histories, run.name) if histories else None
    truth, incidents, stats = replay_scenario(run, models=models)
    return run_score(truth, incidents, stats.records)


def score_split(folder: Path, *, on_run=None, histories: Path | None = None) -> tuple[list[RunScore], str]:
    """Replay and score every run under `folder` (`score_run`): (runs, the split's name)."""
    from evaluation.scenarios import find_scenarios
    runs, splits = [], set()
    for run in find_scenarios([folder]):
        truth = json.loads((run / "truth.json").read_text())
        check_split_run(truth)  # before the replay's cost
        runs.append(score_run(run, histories))
        splits.add(truth.get("split", "?"))
        if on_run:
            on_run(run.name, runs[-1].result.incidents)
    if len(splits) > 1:
        raise ValueError(f"{folder} mixes splits {sorted(splits)}; score one split at a time")
    return runs, next(iter(splits), "?")


def main() -> int:
    ap = argparse.ArgumentParser(description="score a built split; write docs/accuracy.md")
    ap.add_argument("dir", type=Path)
    ap.add_argument("--write", type=Path)
    ap.add_argument("--build-seconds", type=float)
    ap.add_argument("--models", type=Path, metavar="HIST",
                    help="rules + models trained on each run's own clean history in HIST/<run> (sim.history)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    try:
        runs, split = score_split(args.dir, histories=args.models,
                                  on_run=lambda name, n: print(f"  {name}: {n} incident(s)", file=sys.stderr, flush=True))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not runs:
        print(f"error: no runs (truth.json) under {args.dir}", file=sys.stderr)
        return 2
    text = accuracy_doc(runs, split=split, seconds=time.perf_counter() - t0, build_seconds=args.build_seconds,
                        models=args.models is not None)
    if args.write:
        args.write.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
