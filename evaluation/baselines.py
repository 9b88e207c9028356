"""Published root-cause baselines, run on the metrics the engine sees: BARO and N-Sigma.

Both rank *metrics* by how far they moved after a given anomaly time, as RCAEval runs
them (Pham, Ha, Zhang, "BARO: Robust Root Cause Analysis for Microservices via
Multivariate Bayesian Online Change Point Detection", FSE 2024; Pham et al., "RCAEval:
A Benchmark for Root Cause Analysis of Microservice Systems with Telemetry Data", WWW
2025 companion; reference code: github.com/phamquiluan/RCAEval, `RCAEval/e2e/baro.py`
and `nsigma` in `RCAEval/e2e/__init__.py`):

- split every metric's series at the anomaly time into a normal and an anomalous part;
- BARO (its RobustScorer): fit scikit-learn's `RobustScaler` (median, interquartile
  range) on the normal part; N-Sigma: `StandardScaler` (mean, standard deviation);
- a metric's score is the largest scaled value in the anomalous part, `max(z)`; metrics
  are ranked by score, highest first.

RCAEval takes the maximum of the *signed* scaled values (only rises count), which is
what `baro` and `nsigma` do here; `absolute=True` (methods `baro_abs`, `nsigma_abs`)
takes `max(|z|)` so falls count too. A constant normal part has a zero IQR / standard
deviation; the scalers then divide by 1, as scikit-learn does. RCAEval is not a
dependency (it pulls in torch and causal-discovery packages); the few lines above are
written here against scikit-learn's own scalers, which RCAEval calls.

What BARO's full pipeline adds (multivariate Bayesian online change-point detection to
*find* the anomaly time) is not used: RCAEval also evaluates BARO's ranking given the
fault injection time, and so do we. Each injected fault's start time is handed to the
baselines (an oracle the engine does not get), so their detection recall, precision
and delay mean nothing and are not reported; they are judged on ranking (top-1, top-3)
and affected jobs only. One incident per fault.

The metrics are "the same metrics" as the engine's: the scenario's telemetry read with
the engine's own parser (`engine.normalize.parse_line`), reordering and de-duplication
(`engine.order.Reorderer`) and feature extractor (`engine.features.FeatureExtractor`,
planned with every known numeric feature of every measurement), bucketed to one sample
per second and per series. The file is streamed once; only samples inside the windows
around the given times are kept (`normal_s` before, `anomal_s` after). Gaps of up to two
samples (clock jitter) are carried forward; longer absence counts as 0, as RCAEval
fills missing values, so a device that stops reporting shows as all its series falling
to 0. Event records (`wjh_drop`) are 0 where there is no event.

A ranked metric is (entity, feature); `cause_of` turns it into a contract root cause
(cause, entity) with an explicit table by feature family (`FAMILIES`). The ranked root
causes keep the first (best) occurrence of each (cause, entity); the topology is used
only there (a port's link and peer), never to rank. `noisy_neighbor` is out of reach: no
metric is per job.
"""
from __future__ import annotations

import math
import re
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from sklearn.preprocessing import RobustScaler, StandardScaler

from engine.features import MEASUREMENTS, FeatureExtractor, known_features, plan
from engine.impact import affected_jobs
from engine.normalize import Parser
from engine.pipeline import EngineConfig, new_reorderer
from engine.replay import open_lines
from engine.topology import Topology
from engine.types import INTERFACE, LINK, STORAGE, SWITCH, Entity, Job, Metric, device_of, rfc3339

NORMAL_S = 300.0  # normal period before the given anomaly time
ANOMAL_S = 60.0  # anomalous period after it
STEP_S = 1.0  # one sample per second and series
CARRY_SAMPLES = 2  # gaps this short are clock jitter: carry the last value forward
SILENT_S = 10.0  # a switch with no record in the last this-many seconds of the window stopped
TOP_K = 10  # root causes per incident

EVENT_MEASUREMENTS = frozenset({"wjh_drop"})
_SUMMED = frozenset({"agg_count"})  # event fields added up within a second (others: max)

# Features that are not metrics: numbers that identify or configure (priorities,
# speeds, flow tuples, codes) and text (states, names, addresses).
_NOT_METRICS = re.compile(r".*_prio|speed|speed_mbps|sport|dport|proto|traffic_class|reason_id|severity")
_TEXT = frozenset({"admin_status", "oper_status", "pfcwd_status", "link", "old_state", "new_state", "down_reason",
                   "message", "reason", "drop_type", "egress_port", "sip", "dip"})


# ------------------------------------------------------------------------- methods


def _scores(normal: np.ndarray, anomal: np.ndarray, scaler, absolute: bool) -> np.ndarray:
    """Per column: the largest value of the anomalous rows scaled by `scaler` fitted on
    the normal rows (2-D arrays, one column per metric, same columns)."""
    if normal.shape[1] == 0:
        return np.zeros(0)
    z = scaler.fit(normal).transform(anomal)
    return np.abs(z).max(axis=0) if absolute else z.max(axis=0)


def baro_scores(normal: np.ndarray, anomal: np.ndarray, *, absolute: bool = False) -> np.ndarray:
    """BARO's RobustScorer: (x - median) / IQR of the normal period, max over the anomalous one."""
    return _scores(normal, anomal, RobustScaler(), absolute)


def nsigma_scores(normal: np.ndarray, anomal: np.ndarray, *, absolute: bool = False) -> np.ndarray:
    """N-Sigma: (x - mean) / std of the normal period, max over the anomalous one."""
    return _scores(normal, anomal, StandardScaler(), absolute)


@dataclass(frozen=True)
class Method:
    name: str
    scorer: object  # (normal, anomal, *, absolute) -> scores
    absolute: bool
    about: str


METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("baro", baro_scores, False,
               "BARO's RobustScorer (Pham et al., FSE 2024), as RCAEval runs it: median/IQR of the normal "
               "period, a metric's score is its largest scaled value after the given time"),
        Method("nsigma", nsigma_scores, False,
               "N-Sigma (RCAEval, WWW 2025): mean/standard deviation of the normal period, largest "
               "scaled value after the given time"),
        Method("baro_abs", baro_scores, True, "BARO with max |z|: falls count as much as rises"),
        Method("nsigma_abs", nsigma_scores, True, "N-Sigma with max |z|: falls count as much as rises"),
    )
}


# --------------------------------------------------------------- metric -> cause

@dataclass(frozen=True, slots=True)
class Column:
    """One metric: a feature of one series, named by the entity it describes."""

    measurement: str
    entity: str  # the measurement's entity id (interface, storage host)
    feature: str
    qualifier: str = ""  # tags that split an entity into several series (queue, volume, ...)

    @property
    def device(self) -> str:
        return device_of(self.entity)

    def name(self) -> str:
        q = f"[{self.qualifier}]" if self.qualifier else ""
        return f"{self.entity}{q} {self.feature}"


# (measurement, feature pattern, cause, target): target "self" is the metric's own
# interface, "peer" the interface at the other end of its link (the one that sent what
# the counter saw: pause frames received, traffic received), "link" its link, "host"
# the storage host. First match wins; a feature matching nothing is not a cause.
FAMILIES: tuple[tuple[str, str, str, str], ...] = (
    # switch ports
    ("switch_port", r"if_in_errors_rate|if_in_fec_.*", "link_degraded", "link"),
    ("switch_port", r"carrier_changes_rate", "link_flap", "link"),
    ("switch_port", r"pfc_\d_tx_.*|pfc_tx_.*", "pfc_storm", "self"),  # this port sends pause
    ("switch_port", r"pfc_\d_rx_.*|pfc_rx_.*", "pfc_storm", "peer"),  # the peer sends pause
    ("switch_port", r"ecn_marked_packets_rate|wred_dropped_packets_rate|if_out_.*|util_out|busy_out", "congestion", "self"),
    ("switch_port", r"if_in_discards_rate", "congestion", "self"),
    ("switch_port", r"if_in_(octets|ucast_pkts)_rate|util_in", "congestion", "peer"),  # the peer's egress
    # switch queues
    ("switch_queue", r"shared_watermark_bytes", "microburst", "self"),
    ("switch_queue", r"pfcwd_deadlock_.*", "pfc_storm", "peer"),  # the watchdog saw a storm from the peer
    ("switch_queue", r"curr_occupancy_bytes|packets_rate|bytes_rate|dropped_.*|wred_.*", "congestion", "self"),
    # NIC ports
    ("nic_port", r"tx_prio\d_pause.*|tx_pause_.*", "pfc_storm", "self"),  # this NIC sends pause
    ("nic_port", r"rx_prio\d_pause.*|rx_pause_.*", "pfc_storm", "peer"),  # its switch port sends pause
    ("nic_port", r"rx_crc_errors_phy_rate|rx_symbol_err_phy_rate|rx_corrected_bits_phy_rate", "link_degraded", "link"),
    ("nic_port", r"link_down_events_phy_rate", "link_flap", "link"),
    ("nic_port", r"rx_discards_phy_rate|tx_discards_phy_rate|rx_out_of_buffer_rate|out_of_buffer_rate|oob_rate"
                 r"|outbound_pci_stalled_.*|pci_stall|out_of_sequence_rate|packet_seq_err_rate"
                 r"|local_ack_timeout_err_rate|retrans_rate", "nic_degraded", "self"),
    ("nic_port", r"np_ecn_marked_roce_packets_rate|np_cnp_sent_rate", "congestion", "peer"),  # marked on the way in
    ("nic_port", r"rx_bytes_rate|rx_packets_rate|rx_bits_phy_rate|util_rx", "congestion", "peer"),
    ("nic_port", r"rp_cnp_handled_rate|tx_bytes_rate|tx_packets_rate|util_tx", "congestion", "self"),
    # storage and What Just Happened buffer drops
    ("storage", r".*", "storage_slow", "host"),
    ("wjh_drop", r"agg_count|original_occupancy", "microburst", "self"),
)
_FAMILIES = [(m, re.compile(p), c, t) for m, p, c, t in FAMILIES]
_KINDS = {"link": LINK, "self": INTERFACE, "peer": INTERFACE, "host": STORAGE}


def family_of(measurement: str, feature: str) -> tuple[str, str] | None:
    """(cause, target) of a feature, or None when it names no cause."""
    for m, pattern, cause, target in _FAMILIES:
        if m == measurement and pattern.fullmatch(feature):
            return cause, target
    return None


def cause_of(col: Column, topology: Topology | None, silent: frozenset[str] = frozenset()) -> tuple[str, Entity] | None:
    """The contract root cause a ranked metric points at, or None.

    A metric of a switch that stopped reporting in the window (`silent`) points at that
    switch being down; otherwise the feature's family decides (`FAMILIES`)."""
    if col.device in silent and topology is not None and topology.is_switch(col.device):
        return "device_down", Entity(SWITCH, col.device)
    fam = family_of(col.measurement, col.feature)
    if fam is None:
        return None
    cause, target = fam
    if target == "host":
        return cause, Entity(STORAGE, col.entity)
    if target == "self":
        return cause, Entity(INTERFACE, col.entity)
    if topology is None:
        return None
    other = topology.link_of(col.entity) if target == "link" else topology.peer(col.entity)
    return (cause, Entity(_KINDS[target], other)) if other else None


# ------------------------------------------------------------------ the windows

def metric_features(measurement: str) -> frozenset[str]:
    """Every known feature of a measurement that may be a number and is a metric (a
    counter's rate, not also its increase `x_delta`: the same reading twice)."""
    return frozenset(f for f in known_features(measurement)
                     if f not in _TEXT and not _NOT_METRICS.fullmatch(f) and not f.endswith("_delta"))


@dataclass
class Frame:
    """The metrics around one anomaly time: rows are seconds, columns metrics."""

    t0: float
    columns: list[Column]
    normal: np.ndarray  # (rows before t0, columns)
    anomal: np.ndarray  # (rows from t0, columns)
    silent: frozenset[str]  # switches that stopped reporting in the window


@dataclass
class _Window:
    t0: float
    lo: float
    hi: float
    rows: int
    split: int
    cells: dict[str, dict[str, array]] = field(default_factory=dict)  # series -> feature -> values
    first_ts: float = math.inf
    seen_before: set[str] = field(default_factory=set)  # devices that reported before t0
    last_seen: dict[str, float] = field(default_factory=dict)


_TEMPLATE_NAMES = {m.name: tuple(re.findall(r"\{(\w+)\}", m.entity)) for m in MEASUREMENTS.values()}
_NUMBERS = frozenset((int, float))
_ZERO, _NAN = array("d", [0.0]), array("d", [math.nan])


def _identity(metric: Metric) -> tuple[str, str] | None:
    """(entity id, qualifier) of a record: its measurement's entity template over its
    tags, then its fields; the qualifier is the other tags that split the entity into
    several series (queue, volume, NIC device)."""
    names = _TEMPLATE_NAMES[metric.name]
    values = {}
    for n in names:
        v = metric.tags.get(n, metric.fields.get(n))
        if v is None:
            return None
        values[n] = v
    entity = MEASUREMENTS[metric.name].entity.format(**values)
    if metric.name in EVENT_MEASUREMENTS:  # every event on an egress port adds to one series
        return entity, ""
    rest = sorted((k, v) for k, v in metric.tags.items() if k != "host" and k not in names)
    return entity, ",".join(f"{k}={v}" for k, v in rest)


def collect(telemetry: list[Path], times: list[float], *, normal_s: float = NORMAL_S,
            anomal_s: float = ANOMAL_S, step_s: float = STEP_S,
            config: EngineConfig = EngineConfig()) -> tuple[list[Frame], int]:
    """Stream the telemetry once, in the engine's order (`config`'s lateness and skew);
    one Frame per anomaly time (in the order given) and the number of records read."""
    wanted = {m: metric_features(m) for m in MEASUREMENTS}
    wanted = {m: f for m, f in wanted.items() if f}
    extractor = FeatureExtractor({m: plan(m, f) for m, f in wanted.items()})
    n_normal, n_anomal = round(normal_s / step_s), round(anomal_s / step_s)
    windows = [_Window(t, t - n_normal * step_s, t + n_anomal * step_s, n_normal + n_anomal, n_normal)
               for t in times]
    if not windows:
        return [], 0
    margin = 5.0 * step_s  # counters need a previous sample before a window starts
    reorder = new_reorderer(config)
    idents: dict[str, tuple[str, str, str] | None] = {}  # series -> (measurement, entity, qualifier)
    records = 0

    def take(metrics: list[Metric]) -> None:
        for m in metrics:
            keep = wanted.get(m.name)
            if keep is None:
                continue
            ts = m.ts
            mine = [w for w in windows if w.lo - margin <= ts < w.hi]
            if not mine:
                continue
            feats = extractor.extract(m)
            host = m.tags["host"]
            for w in mine:
                if ts < w.t0:
                    w.seen_before.add(host)
                if ts > w.last_seen.get(host, -math.inf):
                    w.last_seen[host] = ts
                if ts < w.first_ts:
                    w.first_ts = ts
            if not feats:
                continue
            event = m.name in EVENT_MEASUREMENTS
            series = m.series
            if event:  # events name their entity in a field: key them by it
                ident = _identity(m)
                if ident is None:
                    continue
                series = f"{m.name}|{ident[0]}"
                idents[series] = (m.name, *ident)
            elif series not in idents:
                ident = _identity(m)
                idents[series] = None if ident is None else (m.name, *ident)
            if idents[series] is None:
                continue
            for w in mine:
                row = int((ts - w.lo) // step_s)
                if not 0 <= row < w.rows:
                    continue
                cells = w.cells.get(series)
                if cells is None:
                    cells = w.cells[series] = {}
                for f, v in feats.items():
                    if v.__class__ not in _NUMBERS or f not in keep:
                        continue
                    cell = cells.get(f)
                    if cell is None:
                        if not v:  # a metric that stays 0 can never score: keep no column for it
                            continue
                        cell = cells[f] = _ZERO * row + _NAN * (w.rows - row)  # earlier: 0 or absent, same thing
                    old = cell[row]
                    if event and old == old:  # several events in one second
                        cell[row] = old + v if f in _SUMMED else max(old, v)
                    else:
                        cell[row] = v

    parse = Parser().parse_line
    for line in _chain(telemetry):
        metrics, rejects = parse(line)
        records += len(metrics)
        take(reorder.push(metrics, rejects))
    take(reorder.flush())
    frames = []
    for w in windows:  # one at a time, letting each window's samples go once framed
        frames.append(_frame(w, idents, step_s))
        w.cells.clear()
    return frames, records


def _chain(paths: Iterable[Path]):
    for p in paths:
        yield from open_lines(p)


def fill(matrix: np.ndarray, *, carry: np.ndarray) -> np.ndarray:
    """Missing values (NaN): carried forward over gaps of up to CARRY_SAMPLES rows in
    the columns where `carry` is true (sampling jitter), then 0 (RCAEval's fillna(0))."""
    out = matrix.copy()
    rows = np.arange(len(out), dtype=np.int32)[:, None]
    missing = np.isnan(out)
    last = np.maximum.accumulate(np.where(missing, np.int32(-1), rows), axis=0)  # row of the last value seen
    use = missing & (last >= 0) & (rows - last <= CARRY_SAMPLES) & carry[None, :]
    r, c = np.nonzero(use)
    out[r, c] = out[last[r, c], c]
    out[np.isnan(out)] = 0.0
    return out


def _frame(w: _Window, idents: dict, step_s: float) -> Frame:
    found = []
    for series, cells in w.cells.items():
        measurement, entity, qualifier = idents[series]
        for f, values in cells.items():
            found.append((Column(measurement, entity, f, qualifier), values))
    found.sort(key=lambda x: (x[0].entity, x[0].measurement, x[0].qualifier, x[0].feature))
    columns = [c for c, _ in found]
    # Rows before the telemetry starts are not "0": drop them, and the first two seconds
    # of it (a counter has no rate until its second sample).
    start = 0
    if w.first_ts > w.lo:
        start = min(w.split - 1, max(0, math.floor((w.first_ts - w.lo) / step_s) + 2))
    if columns:
        raw = np.column_stack([np.frombuffer(v, dtype=float) for _, v in found])
        matrix = fill(raw, carry=np.array([c.measurement not in EVENT_MEASUREMENTS for c in columns]))
    else:
        matrix = np.zeros((w.rows, 0))
    silent = frozenset(d for d in w.seen_before if w.last_seen.get(d, -math.inf) < w.hi - SILENT_S)
    return Frame(w.t0, columns, matrix[start:w.split], matrix[w.split:], silent)


# -------------------------------------------------------------------- diagnosis

def rank(frame: Frame, method: Method) -> list[tuple[Column, float]]:
    """Metrics by score, highest first (ties in column order); metrics that did not
    rise above their normal level (score <= 0) are not ranked."""
    if not frame.columns or len(frame.normal) == 0 or len(frame.anomal) == 0:
        return []
    scores = method.scorer(frame.normal, frame.anomal, absolute=method.absolute)
    order = sorted(range(len(frame.columns)), key=lambda i: -scores[i])
    return [(frame.columns[i], float(scores[i])) for i in order if scores[i] > 0]


def root_causes(ranked: list[tuple[Column, float]], topology: Topology | None,
                silent: frozenset[str] = frozenset(), *, top_k: int = TOP_K) -> list[dict]:
    """Contract root causes from ranked metrics: the first (best) metric of each
    distinct (cause, entity), scores scaled to [0, 1] by the best one."""
    out: list[dict] = []
    seen: set[tuple[str, str]] = set()
    best = ranked[0][1] if ranked else 1.0
    for col, score in ranked:
        found = cause_of(col, topology, silent)
        if found is None:
            continue
        cause, entity = found
        if (cause, entity.id) in seen:
            continue
        seen.add((cause, entity.id))
        out.append({"rank": len(out) + 1, "cause": cause, "entity": entity.to_dict(),
                    "score": round(min(1.0, score / best), 4) if best > 0 else 0.0,
                    "evidence": [{"metric": col.name(), "score": round(score, 3)}]})
        if len(out) == top_k:
            break
    return out


def incident(frame: Frame, method: Method, *, topology: Topology | None, jobs: list[Job],
             number: int) -> dict:
    """A contract-shaped incident for one anomaly time. `detected_at` is None: the time
    was given, not found."""
    causes = root_causes(rank(frame, method), topology, frame.silent)
    affected = []
    if causes and topology is not None:
        top = causes[0]
        affected = [a.to_dict() for a in affected_jobs(
            cause=top["cause"], entity=Entity(**top["entity"]), jobs=jobs, topology=topology)]
    opened = rfc3339(frame.t0)
    title = f"{method.name}: {causes[0]['cause']} on {causes[0]['entity']['id']}" if causes else f"{method.name}: no cause"
    return {
        "id": f"{method.name}-{number}", "status": "resolved", "severity": "minor",
        "opened_at": opened, "updated_at": opened, "resolved_at": None, "detected_at": None,
        "title": title, "root_causes": causes, "affected_jobs": affected, "symptoms": [],
    }

