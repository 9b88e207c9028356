"""Rules alone against rules + models on one built split, in one pass: the headline
figures of both (per interval, per cause) and every false incident the models add, with
the model symptoms in it (entity, feature, robust score) and what that entity's clean
history looked like for the feature (its median and scale).

    python -m evaluation.model_report SPLIT_DIR --models HIST [--run NAME ...]

HIST holds each run's clean history (`python -m sim.history SPLIT_DIR --out HIST`); its
models are trained on first use (evaluation.scenarios.history_models). An incident is one
the models add when it is false with models and no false incident of the rules-only
replay has the same top cause and entity.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from evaluation.scenarios import find_scenarios, history_models, replay_scenario
from evaluation.score import _fmt, _render, false_incidents, summarize, ts, _gray
from evaluation.split_report import CELL_HEAD, RunScore, _cell_row, cells, interval_totals, run_score


def _top(inc: dict) -> tuple[str, str]:
    rc = min(inc["root_causes"], key=lambda r: r["rank"], default=None)
    return (rc["cause"], rc["entity"]["id"]) if rc else ("-", "-")


def spread(models, sym: dict) -> str:
    """The history of the model symptom's driving feature: `feature z=.. (median .., scale ..)`."""
    _, cls, _kind = sym["rule"].split(":")[:3]
    model = models.classes.get(cls)
    feats = {k[:-2]: v for k, v in sym["metrics"].items() if k.endswith("_z") and k != "anomaly_z"}
    if model is None or not feats:
        return f"z={sym['metrics'].get('anomaly_z')}"
    name, z = max(feats.items(), key=lambda x: x[1])
    j = model.features.index(name)
    ent = sym["entity"]["id"]
    rows = [i for k, i in model.keys.items() if k.split("/", 1)[0] == ent]
    med, scale = (model.med[rows[0], j], model.scale[rows[0], j]) if rows else (model.pooled_med[j],
                                                                                 model.pooled_scale[j])
    value = sym["metrics"].get(name)
    return (f"{name}={_fmt(value)} z={z} (history median {med:.4g}, scale {scale:.4g}"
            + ("" if rows else ", pooled") + ")")


def added(truth: dict, rules: list[dict], with_models: list[dict], models) -> list[str]:
    """One line per false incident the models add, and one per model symptom in it."""
    before = {_top(inc) for inc, _ in false_incidents(truth, rules)}
    out = []
    for inc, why in false_incidents(truth, with_models):
        if _top(inc) in before:
            continue
        cause, ent = _top(inc)
        mine = [s for s in inc["symptoms"] if s["rule"].startswith("model:")]
        out.append(f"- t+{ts(inc['opened_at']) - truth['start']:.0f}s {cause} {ent} [{why}]; "
                   f"{len(inc['symptoms'])} symptoms, {len(mine)} of models")
        for s in mine[:6]:
            span = (ts(s["end"]) or ts(s["last"])) - ts(s["start"])
            out.append(f"    - {s['rule']} @{s['entity']['id']} {span:.0f}s: {spread(models, s)}")
    return out


def _figures(title: str, runs: list[RunScore]) -> list[str]:
    results = [r.result for r in runs]
    gray = summarize(results, only=_gray)
    head = ("interval s", "runs", "faults", "precision", "false inc./clean h", "recall", "top-1", "delay p50 s")
    rows = [(("all" if c.interval is None else str(c.interval)), str(c.runs)) + _cell_row(c)[2:]
            for c in interval_totals(runs)]
    return [f"## {title}", "", _render(head, rows, markdown=True), "",
            f"gray: {gray.faults} faults, recall {_fmt(gray.recall)}, delay p50 {_fmt(gray.delay_median)} s", "",
            _render(CELL_HEAD, [_cell_row(c) for c in cells(runs)], markdown=True), ""]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--models", type=Path, metavar="HIST", required=True)
    ap.add_argument("--run", action="append", default=[], help="only this run (folder name); repeatable")
    args = ap.parse_args(argv)
    plain, modelled, lines = [], [], []
    for folder in find_scenarios([args.dir]):
        if args.run and folder.name not in args.run:
            continue
        if not (args.models / folder.name / "truth.json").exists():
            print(f"  {folder.name}: no history yet, skipped", file=sys.stderr)
            continue
        models = history_models(args.models, folder.name)
        truth, rules, st = replay_scenario(folder)
        _, with_models, _ = replay_scenario(folder, models=models)
        plain.append(run_score(truth, rules, st.records))
        modelled.append(run_score(truth, with_models, st.records))
        mine = added(truth, rules, with_models, models)
        n = sum(1 for m in mine if m.startswith("-"))
        print(f"  {folder.name}: {len(rules)} -> {len(with_models)} incidents, {n} false added by models",
              file=sys.stderr, flush=True)
        lines += [f"### {folder.name}"] + mine if mine else []
    if not plain:
        print("error: no runs with a history", file=sys.stderr)
        return 2
    print("\n".join(_figures("rules only", plain) + _figures("rules + models", modelled)
                    + ["## False incidents the models add", ""] + (lines or ["- none"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
