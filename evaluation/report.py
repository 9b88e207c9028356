"""A suite's evaluation: every scenario run by every method, the console tables and
docs/accuracy-classic.md. Results are `ScenarioResult` objects (evaluation.score); text is made
from them only at the end."""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from evaluation.baselines import ANOMAL_S, NORMAL_S
from evaluation.baselines import METHODS as BASELINES
from evaluation.scenarios import baseline_scenario, find_scenarios, replay_scenario
from evaluation.score import (
    ScenarioResult, comparison, misses, onset_tables, score_scenario, summarize, table, targets_text,
)

ENGINE_METHODS = ("rules", "models")  # the engine's own diagnosis, replayed as `replay` runs it
DEFAULT_METHODS = ("rules", "baro", "nsigma")


def choose_methods(text: str | None, *, models: bool) -> list[str]:
    """The methods asked for (comma-separated), checked: engine methods first, then
    baselines. ValueError says what is wrong."""
    if text:
        names = list(dict.fromkeys(m.strip() for m in text.split(",") if m.strip()))
    else:
        names = list(DEFAULT_METHODS) + (["models"] if models else [])
    known = [*ENGINE_METHODS, *BASELINES]
    unknown = [m for m in names if m not in known]
    if unknown or not names:
        raise ValueError(f"unknown method(s) {', '.join(unknown) or '(none)'}; known: {', '.join(known)}")
    if "models" in names and not models:
        raise ValueError("method 'models' (rules + anomaly models) needs --models DIR")
    if models and "models" not in names:
        raise ValueError("--models is given but 'models' is not in --methods")
    return sorted(names, key=lambda m: (m not in ENGINE_METHODS, known.index(m)))


def judged(methods: list[str]) -> str:
    """The method the issue's targets apply to: rules + models when run, else rules."""
    return "models" if "models" in methods else next((m for m in methods if m in ENGINE_METHODS), methods[0])


@dataclass
class SuiteRun:
    methods: list[str]
    results: dict[str, list[ScenarioResult]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)  # wall time spent per method

    @property
    def baselines(self) -> list[str]:
        return [m for m in self.methods if m not in ENGINE_METHODS]


def run_suite(dirs: list[Path], *, methods: list[str], rule_files: list[Path] | None = None,
              models_dir: Path | None = None, on_scenario: Callable[[str], None] | None = None) -> SuiteRun:
    """Every scenario under `dirs` through every method; `on_scenario` hears one line of
    progress per scenario."""
    run = SuiteRun(methods, {m: [] for m in methods}, {m: 0.0 for m in methods})
    engine = [m for m in methods if m in ENGINE_METHODS]
    for folder in find_scenarios(dirs):
        notes, records = [], 0
        for method in engine:
            kwargs = {"models_dir": models_dir} if method == "models" else {}
            t = time.perf_counter()
            truth, incidents, stats = replay_scenario(folder, rule_files=rule_files, **kwargs)
            run.seconds[method] += time.perf_counter() - t
            run.results[method].append(score_scenario(truth, incidents))
            records = stats.records
            notes.append(f"{method}: {len(incidents)} incident(s)")
        if run.baselines:
            t = time.perf_counter()
            truth, by_method, read = baseline_scenario(folder, run.baselines)
            records = records or read
            spent = time.perf_counter() - t
            for method in run.baselines:
                run.seconds[method] += spent  # one pass over the telemetry serves every baseline
                run.results[method].append(score_scenario(truth, by_method[method]))
            notes.append(f"{'/'.join(run.baselines)}: {len(truth.get('faults', []))} fault time(s) given")
        if on_scenario is not None:
            on_scenario(f"{folder.name}: {records:,} records; {'; '.join(notes)}")
    return run


def console_text(run: SuiteRun) -> str:
    """What `fabric-rca evaluate` prints: the tables, the misses and the targets."""
    results, methods, oracle = run.results, run.methods, frozenset(run.baselines)
    out: list[str] = []
    if len(methods) == 1:
        (method,) = methods
        out.append(table(results[method], oracle=method in oracle))
        out += ["  miss: " + line for line in misses(results[method])]
    else:
        for title, text in comparison(results, oracle=oracle) + onset_tables(results, oracle=oracle):
            out.append(f"\n{title}\n{text}")
        out.append("")
        for method in methods:
            if method in ENGINE_METHODS:
                out += [f"  miss ({method}): " + line for line in misses(results[method])]
        for method in run.baselines:
            bad = sum(1 for r in results[method] for f in r.faults if f.rank != 1)
            total = sum(len(r.faults) for r in results[method])
            out.append(f"  {method}: {bad} of {total} fault(s) not ranked first (--methods {method} lists them)")
    out.append(f"\ntargets ({judged(methods)}):\n" + targets_text(results[judged(methods)]))
    return "\n".join(out)


METHOD_ABOUT = {
    "rules": "the engine as `fabric-rca replay` runs it, with its rule catalogue (`rules/catalogue/`) and no "
             "anomaly models: it finds the faults itself, in event time.",
    "models": "the engine with its rules and the anomaly models of `--models` (`fabric-rca train`).",
}



def accuracy_doc(run: SuiteRun, *, command: str) -> str:
    """docs/accuracy-classic.md for a suite run; `command` is the line that made it."""
    results, methods, seconds = run.results, run.methods, run.seconds
    baselines = [m for m in methods if m in BASELINES]
    first = next(iter(results.values()))
    lines = [
        "# Diagnosis accuracy on the classic suite",
        "",
        f"Generated by `{command}` on scenarios from `fabric-rca simulate --suite`; "
        "`scripts/accuracy` rebuilds the suite and this page in one command. "
        "Expectations come from each scenario's `truth.json` (what the generator injected), not from any method. "
        "The suite was tuned together with the rules, so it flatters them: the headline figures are the held-out "
        "test split's, in [accuracy.md](accuracy.md).",
        "",
        "## Methods",
        "",
    ]
    for m in methods:
        about = METHOD_ABOUT.get(m) or BASELINES[m].about + "."
        lines.append(f"- `{m}`: {about}")
    if baselines:
        lines += [
            "",
            f"The baselines ({', '.join(f'`{m}`' for m in baselines)}) are published metric-ranking methods "
            "(`evaluation/baselines.py`; BARO: Pham, Ha, Zhang, FSE 2024; N-Sigma as in RCAEval, WWW 2025), "
            "re-implemented in a few lines on scikit-learn's scalers as RCAEval's reference code does. "
            "They are fed the same metrics as the engine: every numeric feature of every series, built by the "
            "engine's own parser and feature extractor from the scenario's telemetry, one sample per second.",
            "",
            "**They are handed the answer to \"when\"**: as in RCAEval, each method gets the anomaly time (here "
            f"each injected fault's start, from `truth.json`), compares the {NORMAL_S:.0f} s before it with the "
            f"{ANOMAL_S:.0f} s after it, and opens exactly one incident per fault. The engine gets no such hint. "
            "Their detection recall, incident precision, false incidents and detection delay therefore mean "
            "nothing and are shown as \"-\"; judge them on top-1/top-3 and affected jobs (computed by the "
            "engine's impact code from their top-1 cause).",
            "",
            "A ranked metric (entity, feature) becomes a contract root cause by a fixed table of feature "
            "families (`FAMILIES` in `evaluation/baselines.py`): CRC/FEC/symbol errors -> `link_degraded` on the "
            "port's link; carrier / link-down counters -> `link_flap` on the link; PFC pause sent -> "
            "`pfc_storm` on the sender (pause received: on the peer); queue occupancy, ECN, WRED, drops and "
            "traffic -> `congestion` on the egress port; watermark peaks and What Just Happened buffer drops "
            "-> `microburst`; NIC out-of-buffer, discards, PCIe stalls, retransmissions -> `nic_degraded`; "
            "storage latency and I/O -> `storage_slow`; any metric of a switch that stopped reporting -> "
            "`device_down`. `noisy_neighbor` is out of their reach: no metric is per job. Missing samples "
            "count as 0 (RCAEval's fillna); `baro` and `nsigma` score only rises (max z, as RCAEval does), so "
            "the fall of a switch that stops earns nothing; `--methods baro_abs,nsigma_abs` (max |z|) scores "
            "falls too. When faults overlap, an incident counts for the fault whose cause it ranks best, so a "
            "baseline incident that names the other fault leaves its own fault \"not detected\".",
        ]
    lines += [
        "",
        "## Results",
        "",
        "Columns: detection recall; top-1/top-3 root-cause accuracy (cause and entity); incident precision "
        "(incidents that are the one incident of an injected fault / all incidents); false incidents per hour "
        "of clean telemetry; affected-job precision/recall/F1; detection delay (`detected_at` minus fault start, "
        "event time).",
        "",
    ]
    for title, text in comparison(results, oracle=frozenset(baselines), markdown=True):
        lines += [f"### {title}", "", text, ""]
    lines += ["## Gray failures, abrupt and gradual faults", "",
              "The same columns over the faults the truth marks gray (below the usual alarms), abrupt or "
              "gradual (a slow ramp from nothing: its delay counts from the first moment of the ramp).", ""]
    for title, text in onset_tables(results, oracle=frozenset(baselines), markdown=True):
        lines += [f"### {title}", "", text, ""]
    target = judged(methods)
    lines += ["## Targets", "", f"Issue 4's bar, for `{target}` on the whole suite:", "",
              targets_text(results[target], markdown=True), ""]
    if "models" in results and "rules" in results:
        gray = {m: summarize(results[m], only=lambda f: f.gray) for m in ("rules", "models")}
        clean = {m: sum(r.false_incidents for r in results[m]) for m in ("rules", "models")}
        lines += [f"Gray-failure recall: rules {gray['rules'].recall or 0:.2f}, rules + models "
                  f"{gray['models'].recall or 0:.2f}; false incidents on the whole suite: rules {clean['rules']}, "
                  f"rules + models {clean['models']}.", ""]
    lines += [
        "Scenarios: " + ", ".join(f"`{r.scenario}`" for r in first) + ".",
        "",
        "Time (this machine, all scenarios): " + ", ".join(f"`{m}` {seconds[m]:.1f} s" for m in methods)
        + (" (the baselines share one read of the telemetry)." if len(baselines) > 1 else "."),
        "",
        "## Misses",
        "",
    ]
    for m in methods:
        bad = misses(results[m])
        lines += [f"`{m}`:" + (" none." if not bad else ""), ""]
        if bad:
            lines += [f"- {x}" for x in bad] + [""]
    return "\n".join(lines).rstrip() + "\n"
