"""Diagnosis quality against a scenario's truth (what the generator injected).

Each incident is assigned to the injected fault it is about (the fault whose cause and
entity it ranks best, among faults it overlaps in time); a fault's primary incident is
the best-ranked one assigned to it. Further incidents for the same fault, and incidents
that match no fault, are false incidents.
"""
from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from contract.times import parse_rfc3339

SLACK_BEFORE_S = 15.0
SLACK_AFTER_S = 60.0


def ts(text: str | None) -> float | None:
    return None if text is None else parse_rfc3339(text)


@dataclass
class FaultResult:
    scenario: str
    cause: str
    entity: str
    detected: bool
    rank: int | None  # rank of the true cause+entity in the primary incident (None: absent)
    delay_s: float | None
    jobs_tp: int
    jobs_fp: int
    jobs_fn: int
    top_cause: str | None = None
    top_entity: str | None = None
    onset: str = "abrupt"  # truth: "abrupt" or "gradual"
    gray: bool = False  # truth: a gray failure (below the usual alarms)


@dataclass
class ScenarioResult:
    scenario: str
    clean: bool
    hours: float
    faults: list[FaultResult] = field(default_factory=list)
    incidents: int = 0
    false_incidents: int = 0
    # top root cause of each incident -> (incidents, false incidents among them)
    by_cause: dict[str, tuple[int, int]] = field(default_factory=dict)


def _rank_of(incident: dict, cause: str, entity: str) -> int | None:
    for rc in incident["root_causes"]:
        if rc["cause"] == cause and rc["entity"]["id"] == entity:
            return rc["rank"]
    return None


def assign(truth: dict, incidents: list[dict]) -> tuple[dict[int, list[tuple[int, float, dict]]], list[dict]]:
    """Each incident to the fault it is about: ({fault index: [(rank, opened, incident)]
    best first}, incidents that overlap no fault). The first of a fault's list is its
    primary incident; the rest, and the unmatched, are false incidents."""
    faults = truth.get("faults", [])
    assigned: dict[int, list[tuple[int, float, dict]]] = {i: [] for i in range(len(faults))}
    unmatched = []
    for inc in incidents:
        opened = ts(inc["opened_at"])
        best = None
        for i, f in enumerate(faults):
            if not f["start"] - SLACK_BEFORE_S <= opened <= f["end"] + SLACK_AFTER_S:
                continue
            rank = _rank_of(inc, f["cause"], f["entity"]["id"]) or 99
            key = (rank, abs(opened - f["start"]))
            if best is None or key < best[0]:
                best = (key, i)
        if best is None:
            unmatched.append(inc)
        else:
            assigned[best[1]].append((best[0][0], opened, inc))
    for mine in assigned.values():
        mine.sort(key=lambda x: (x[0], x[1]))
    return assigned, unmatched


def false_incidents(truth: dict, incidents: list[dict]) -> list[tuple[dict, str]]:
    """(incident, why it is false) for every false incident of a scenario: it overlaps no
    fault in time, or it is a further incident of a fault that already has its primary."""
    assigned, unmatched = assign(truth, incidents)
    faults = truth.get("faults", [])
    out = [(inc, "matches no fault") for inc in unmatched]
    for i, mine in assigned.items():
        f = faults[i]
        out += [(inc, f"extra incident of {f['cause']} {f['entity']['id']}") for _, _, inc in mine[1:]]
    return sorted(out, key=lambda x: (x[0]["opened_at"], x[0]["id"]))


def score_scenario(truth: dict, incidents: list[dict]) -> ScenarioResult:
    faults = truth.get("faults", [])
    result = ScenarioResult(truth["scenario"], bool(truth.get("clean")), truth["duration_s"] / 3600.0,
                            incidents=len(incidents))
    assigned, unmatched = assign(truth, incidents)
    result.false_incidents += len(unmatched)
    primary = {id(mine[0][2]) for mine in assigned.values() if mine}
    for inc in incidents:
        top = min(inc["root_causes"], key=lambda rc: rc["rank"], default=None)
        n, false = result.by_cause.get(top["cause"] if top else "-", (0, 0))
        result.by_cause[top["cause"] if top else "-"] = (n + 1, false + (id(inc) not in primary))
    for i, f in enumerate(faults):
        mine = assigned[i]
        result.false_incidents += max(0, len(mine) - 1)
        truth_jobs = set(f.get("affected_jobs", []))
        if not mine:
            result.faults.append(FaultResult(truth["scenario"], f["cause"], f["entity"]["id"], False, None, None,
                                             0, 0, len(truth_jobs), onset=f.get("onset", "abrupt"),
                                             gray=bool(f.get("gray"))))
            continue
        rank, _, inc = mine[0]
        got = {j["job_id"] for j in inc["affected_jobs"]}
        top = inc["root_causes"][0] if inc["root_causes"] else None
        result.faults.append(FaultResult(
            truth["scenario"], f["cause"], f["entity"]["id"], True, rank if rank != 99 else None,
            ts(inc["detected_at"]) - f["start"] if inc.get("detected_at") else None,
            len(got & truth_jobs), len(got - truth_jobs), len(truth_jobs - got),
            top["cause"] if top else None, top["entity"]["id"] if top else None,
            f.get("onset", "abrupt"), bool(f.get("gray")),
        ))
    return result


@dataclass
class Summary:
    faults: int
    recall: float | None
    top1: float | None
    top3: float | None
    precision: float | None
    false_per_hour: float | None
    job_precision: float | None
    job_recall: float | None
    job_f1: float | None
    delay_median: float | None
    delay_p90: float | None


def _ratio(a: int, b: int) -> float | None:
    return a / b if b else None


def summarize(results: list[ScenarioResult], *, cause: str | None = None,
              only: Callable[[FaultResult], bool] | None = None) -> Summary:
    """Per cause (or overall), over the faults `only` keeps (default all)."""
    faults = [f for r in results for f in r.faults
              if (cause is None or f.cause == cause) and (only is None or only(f))]
    detected = [f for f in faults if f.detected]
    tp = sum(f.jobs_tp for f in faults)
    fp = sum(f.jobs_fp for f in faults)
    fn = sum(f.jobs_fn for f in faults)
    jp, jr = _ratio(tp, tp + fp), _ratio(tp, tp + fn)
    if tp + fp + fn == 0:
        jp = jr = 1.0 if faults else None
    f1 = 2 * jp * jr / (jp + jr) if jp is not None and jr is not None and (jp + jr) else (0.0 if faults else None)
    delays = sorted(f.delay_s for f in detected if f.delay_s is not None)
    if cause is None and only is None:
        incidents = sum(r.incidents for r in results)
        false = sum(r.false_incidents for r in results)
        clean = [r for r in results if r.clean]
        clean_hours = sum(r.hours for r in clean)
        precision = _ratio(incidents - false, incidents) if incidents else (1.0 if results else None)
        fph = sum(r.false_incidents for r in clean) / clean_hours if clean_hours else None
    else:
        precision = fph = None
    return Summary(
        faults=len(faults),
        recall=_ratio(len(detected), len(faults)),
        top1=_ratio(sum(1 for f in faults if f.rank == 1), len(faults)),
        top3=_ratio(sum(1 for f in faults if f.rank is not None and f.rank <= 3), len(faults)),
        precision=precision,
        false_per_hour=fph,
        job_precision=jp, job_recall=jr, job_f1=f1,
        delay_median=statistics.median(delays) if delays else None,
        delay_p90=delays[min(len(delays) - 1, int(0.9 * len(delays)))] if delays else None,
    )


def cause_precision(results: list[ScenarioResult], cause: str) -> tuple[float | None, float | None]:
    """(precision, false incidents per clean hour) of the incidents whose top root cause
    is `cause`: the share that are a fault's one incident (whatever its cause: naming the
    wrong cause is top-1's business), and how many a clean hour opens. None: no incident
    of that cause / no clean run."""
    n = sum(r.by_cause.get(cause, (0, 0))[0] for r in results)
    false = sum(r.by_cause.get(cause, (0, 0))[1] for r in results)
    clean_h = sum(r.hours for r in results if r.clean)
    on_clean = sum(r.by_cause.get(cause, (0, 0))[1] for r in results if r.clean)
    return _ratio(n - false, n), (on_clean / clean_h if clean_h else None)


COLUMNS = ("faults", "recall", "top1", "top3", "precision", "false_per_hour", "job_precision", "job_recall",
           "job_f1", "delay_median", "delay_p90")
HEADERS = ("faults", "recall", "top-1", "top-3", "inc. precision", "false inc./h (clean)", "job P", "job R",
           "job F1", "delay p50 s", "delay p90 s")


# Columns that mean nothing for a method handed the fault times (an oracle): it opens
# exactly one incident per fault, at the fault's start.
ORACLE_BLANK = frozenset({"recall", "precision", "false_per_hour", "delay_median", "delay_p90"})


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, int):
        return str(v)
    return f"{v:.2f}" if abs(v) < 100 else f"{v:.0f}"


def _row(name: str, s: Summary, *, oracle: bool = False) -> tuple[str, ...]:
    return (name,) + tuple("-" if oracle and c in ORACLE_BLANK else _fmt(getattr(s, c)) for c in COLUMNS)


def _render(head: tuple[str, ...], body: list[tuple[str, ...]], *, markdown: bool) -> str:
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(r) + " |" for r in body]
        return "\n".join(lines)
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
    return "\n".join("  ".join(x[i].rjust(widths[i]) if i else x[i].ljust(widths[i]) for i in range(len(head)))
                     for x in [head, *body])


def causes_of(results: list[ScenarioResult]) -> list[str]:
    return sorted({f.cause for r in results for f in r.faults})


def table(results: list[ScenarioResult], *, markdown: bool = False, oracle: bool = False) -> str:
    """One method: a row per cause and an overall row. `oracle`: the method was given
    the fault times, so detection columns are shown as "-"."""
    rows = [(c, summarize(results, cause=c)) for c in causes_of(results)] + [("overall", summarize(results))]
    return _render(("cause",) + HEADERS, [_row(name, s, oracle=oracle) for name, s in rows], markdown=markdown)


def comparison(by_method: dict[str, list[ScenarioResult]], *, oracle: frozenset[str] = frozenset(),
               markdown: bool = False) -> list[tuple[str, str]]:
    """Several methods on the same scenarios: (title, table) per cause, then overall;
    each table has a row per method. Methods in `oracle` show "-" for detection columns."""
    causes = sorted({c for results in by_method.values() for c in causes_of(results)})
    out = []
    for cause in [*causes, None]:
        body = [_row(m, summarize(results, cause=cause), oracle=m in oracle) for m, results in by_method.items()]
        out.append((cause or "overall", _render(("method",) + HEADERS, body, markdown=markdown)))
    return out


def misses(results: list[ScenarioResult]) -> list[str]:
    """One line per fault not ranked first, for a person to look into."""
    out = []
    for r in results:
        for f in r.faults:
            if f.rank != 1:
                got = f"{f.top_cause} {f.top_entity}" if f.top_cause else ("no cause" if f.detected else "not detected")
                out.append(f"{r.scenario}: {f.cause} {f.entity}: rank {f.rank or '-'}; top-1 was {got}")
        if r.false_incidents:
            out.append(f"{r.scenario}: {r.false_incidents} false incident(s)")
    return out


# Issue 4's bar for rules + models on the full suite: (label, measure, comparison, bound).
TARGETS = (
    ("top-1", "top1", ">=", 0.95),
    ("top-3", "top3", ">=", 0.99),
    ("detection recall", "recall", ">=", 0.97),
    ("incident precision", "precision", ">=", 0.95),
    ("false incidents per hour of clean telemetry", "false_per_hour", "<=", 0.0),
    ("affected-job F1", "job_f1", ">=", 0.95),
    ("median detection delay, abrupt faults (s)", "delay_abrupt", "<=", 5.0),
    ("median detection delay, gradual faults (s)", "delay_gradual", "<=", 60.0),
)


def _abrupt(f: FaultResult) -> bool:
    return f.onset != "gradual"


def _gradual(f: FaultResult) -> bool:
    return f.onset == "gradual"


def _gray(f: FaultResult) -> bool:
    return f.gray


def check_targets(results: list[ScenarioResult]) -> list[tuple[str, float | None, str, float, bool]]:
    """(label, value, comparison, bound, met) for each target."""
    s = summarize(results)
    values = {c: getattr(s, c) for c in COLUMNS}
    values["delay_abrupt"] = summarize(results, only=_abrupt).delay_median
    values["delay_gradual"] = summarize(results, only=_gradual).delay_median
    out = []
    for label, key, op, bound in TARGETS:
        v = values[key]
        met = v is not None and (v >= bound if op == ">=" else v <= bound)
        out.append((label, v, op, bound, met))
    return out


def onset_tables(by_method: dict[str, list[ScenarioResult]], *, oracle: frozenset[str] = frozenset(),
                 markdown: bool = False) -> list[tuple[str, str]]:
    """Gray failures, abrupt and gradual faults: (title, table) with a row per method."""
    out = []
    for title, only in (("gray failures", _gray), ("abrupt faults", _abrupt), ("gradual faults", _gradual)):
        body = [_row(m, summarize(results, only=only), oracle=m in oracle) for m, results in by_method.items()]
        if any(summarize(results, only=only).faults for results in by_method.values()):
            out.append((title, _render(("method",) + HEADERS, body, markdown=markdown)))
    return out


def targets_text(results: list[ScenarioResult], *, markdown: bool = False) -> str:
    lines = []
    for label, v, op, bound, met in check_targets(results):
        mark = "met" if met else "**MISS**" if markdown else "MISS"
        lines.append(f"{'- ' if markdown else '  '}{label}: {_fmt(v)} (target {op} {_fmt(bound)}): {mark}")
    return "\n".join(lines)
