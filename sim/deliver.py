"""Applies realism Params to a generated run's 1 s telemetry: the benign phenomena on
each series' values, then per-device sampling (interval, jitter, missed samples), clock
skew, collector gaps, duplicate and late delivery. See realism.py for the parameters."""
from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

from .events import host_link_event, switch_link_event, wjh_buffer_drop
from .fabric import NIC, Fabric
from .realism import _CLASS, _UNIT, SEP, Params, Phenomenon

RATE_KINDS = {"blip_ecn_cnp", "all_to_all", "allreduce_incast", "fec_floor"}
SCALE_KINDS = {"checkpoint", "scrubbing", "blip_storage_latency"}  # extra = factor * the base delta
GAUGES = {"outbound_pci_stalled_rd", "outbound_pci_stalled_wr"}
_SCALED = {"writes": ("writes", "write_bytes", "write_time"), "read_time": ("read_time", "io_time"),
           "io_stall": ("read_time", "write_time", "io_time")}


def _read(path: Path) -> list[dict]:
    out = []
    with gzip.open(path, "rt") as fh:
        for line in fh:
            rec = json.loads(line)
            out.extend(rec["metrics"] if "metrics" in rec else [rec])
    return out


def _t(rec: dict) -> float:
    unit = _UNIT.get(rec["name"])
    ts = rec["timestamp"]
    if unit is None:
        unit = 1e9 if ts > 1e17 else 1e3
    return ts / unit


def _key(rec: dict) -> tuple:
    return (rec["name"], rec["tags"]["host"], rec["tags"].get("interface"))


def _counters(rec: dict) -> list[str]:
    return [k for k, v in rec["fields"].items()
            if isinstance(v, int) and not k.startswith("speed") and k not in
            ("iops_in_progress", "curr_occupancy_bytes", "shared_watermark_bytes")]


def _before(series: list[dict], t: float) -> dict | None:
    prev = None
    for rec in series:
        if _t(rec) >= t:
            break
        prev = rec
    return prev


def _add_values(series: list[dict], p: Phenomenon) -> None:
    """Blips, bursts, floors, checkpoints and scrubbing: extra counter increments,
    accumulated so they persist in the cumulative values; gauges set in the window."""
    extra = {f: 0.0 for f in p.fields}
    prev_t, prev = None, None
    for rec in series:
        t = _t(rec)
        fields = rec["fields"]
        if p.kind in SCALE_KINDS and prev is not None and p.start <= t <= p.end:
            for name in _SCALED[next(iter(p.fields))]:
                if name in fields:
                    base = fields[name] - prev.get(name, fields[name])
                    extra[name] = extra.get(name, 0.0) + max(base, 0) * p.fields[next(iter(p.fields))]
        elif prev_t is not None:
            overlap = max(0.0, min(t, p.end) - max(prev_t, p.start))
            for name, amount in p.fields.items():
                if name in GAUGES:
                    if p.start <= t <= p.end + 1:
                        fields[name] = round(amount, 2)
                elif p.kind in RATE_KINDS:
                    extra[name] += amount * overlap
                elif prev_t < p.start <= t:
                    extra[name] += amount
        prev_t, prev = t, dict(fields)
        for name, value in extra.items():
            if name in fields and name not in GAUGES:
                fields[name] = int(fields[name] + round(value))


def _wrap(series: list[dict], p: Phenomenon) -> None:
    (name, bits), = p.fields.items()
    at = next((r for r in series if _t(r) >= p.start), None)
    if at is None or name not in at["fields"]:
        return
    mod = 1 << int(bits)
    off = mod - at["fields"][name]
    for rec in series:
        rec["fields"][name] = (rec["fields"][name] + off) % mod


def _rebase(series: list[dict], start: float, end: float, *, restart: bool) -> None:
    """Counters frozen in [start, end]; after end they continue from the frozen value
    (restart=False) or from zero (restart=True)."""
    frozen, after = _before(series, start), _before(series, end + 1e-6)
    if frozen is None or after is None:
        return
    names = _counters(frozen)
    base = {n: after["fields"][n] if restart else after["fields"][n] - frozen["fields"][n] for n in names}
    last: dict[str, int] = {}  # each counter's value before this rebase, in the record before
    for rec in series:
        t, f = _t(rec), rec["fields"]
        if start <= t <= end:
            f.update({n: frozen["fields"][n] for n in names})
        elif t > end:
            # Up to the counter's own next restart (a reset of the base run, or a later
            # operation's): from there on it counts from zero already.
            for n in names:
                if n not in base or n not in f:
                    continue
                was, last[n] = last.get(n), f[n]
                if was is not None and f[n] < was:
                    del base[n]
                    continue
                f[n] = max(0, f[n] - base[n])


def _status(series: list[dict], start: float, end: float, **fields) -> None:
    for rec in series:
        if start <= _t(rec) <= end:
            rec["fields"].update(fields)


def _operate(f: Fabric, by: dict, p: Phenomenon, events: list[dict]) -> None:
    if p.kind == "host_link_bounce":
        e = f.by_name[p.host]
        port = f.ports[int(f.host_port[e.index])]
        nic = by.get(("nic_port", p.host, NIC), [])
        _rebase(nic, p.start, p.end, restart=True)
        _status(nic, p.start, p.end, link="down")
        for rec in nic:
            if _t(rec) > p.end and "link_down_events_phy" in rec["fields"]:
                rec["fields"]["link_down_events_phy"] = 1
        sp = by.get(("switch_port", port.device, port.iface), [])
        _rebase(sp, p.start, p.end, restart=False)
        _status(sp, p.start, p.end, oper_status="down")
        mbps = f.spec.speed_gbps * 1000
        events += [host_link_event(p.host, NIC, p.start, up=False, speed_mbps=mbps),
                   host_link_event(p.host, NIC, p.end, up=True, speed_mbps=mbps),
                   switch_link_event(port.device, port.iface, p.start, up=False,
                                     reason="link down by peer"),
                   switch_link_event(port.device, port.iface, p.end, up=True, reason="")]
    elif p.kind == "admin_down":
        sp = by.get(("switch_port", p.host, p.interface), [])
        _rebase(sp, p.start, p.end, restart=False)
        _status(sp, p.start, p.end, oper_status="down", admin_status="down")
        port = f.ports[f.port_index[f"{p.host}:{p.interface}"]]
        if port.endpoint >= 0:
            nic = by.get(("nic_port", f.endpoints[port.endpoint].name, NIC), [])
            _rebase(nic, p.start, p.end, restart=False)
            _status(nic, p.start, p.end, link="down")
        events += [switch_link_event(p.host, p.interface, p.start, up=False, reason="admin down"),
                   switch_link_event(p.host, p.interface, p.end, up=True, reason="")]
    elif p.kind == "counter_reset":
        for name in ("switch_port", "switch_queue"):
            _rebase(by.get((name, p.host, p.interface), []), p.start, p.start, restart=True)


OPERATIONS = ("host_link_bounce", "admin_down", "counter_reset")


def _in_time_order(phenomena: list[Phenomenon]) -> list[Phenomenon]:
    """The operations (bounces, admin downs, counter resets) in event-time order, each
    where one of them stood in the list; everything else as listed. An operation rebases
    the counters after it on their values as they are then, so a later one must come
    second: two resets of one port taken latest first subtracted the first reset's base
    from counters the second had already restarted, and every counter of the port read 0
    from the second reset on (s49 link_flap-17, microburst-17). `_rebase` stopping at a
    counter's own restart covers that case too, but not a maintenance window taken after
    a reset inside it: its freeze would overwrite the restart and its base undo it."""
    ops = iter(sorted((p for p in phenomena if p.kind in OPERATIONS), key=lambda p: p.start))
    return [next(ops) if p.kind in OPERATIONS else p for p in phenomena]


def _transform(f: Fabric, by: dict, params: Params, events: list[dict]) -> None:
    for p in _in_time_order(params.phenomena):
        if p.kind in OPERATIONS:
            _operate(f, by, p, events)
        elif p.kind.startswith("wrap"):
            _wrap(by.get((p.measurement, p.host, p.interface), []), p)
        elif p.kind == "blip_wjh_drop":
            port = f.ports[f.port_index[f"{p.host}:{p.interface}"]]
            egress = f.ports[int(f.up_port[port.leaf, 0])].iface if port.leaf >= 0 else "swp1"
            events.append(wjh_buffer_drop(p.host, ingress=p.interface, egress=egress, t=p.start,
                                          drops=int(p.fields["agg_count"]), occupancy=12_000_000,
                                          sip="10.1.0.10", dip="10.2.0.10", sport=49152))
        elif p.measurement == "storage":
            _add_values(by.get(("storage", p.host, None), []), p)
        elif p.measurement in ("nic_port", "switch_port", "switch_queue"):
            _add_values(by.get((p.measurement, p.host, p.interface), []), p)


def _sampled(by: dict, params: Params, rng: random.Random) -> list[dict]:
    """The records each device's exporter sends: every interval (+- jitter) from a
    per-device phase, some samples missed."""
    out: list[dict] = []
    plans: dict[tuple[str, str], set[int]] = {}
    for key in sorted(by, key=lambda k: (k[0], k[1], k[2] or "")):
        series = by[key]
        cls = _CLASS[key[0]]
        step = params.intervals[cls]
        plan_key = (key[1], cls)
        if plan_key not in plans:
            keep, k, j = set(), rng.randrange(step), int(params.jitter_s)
            while k < len(series) + step:
                if rng.random() >= params.missed:
                    keep.add(k)
                k += max(1, step + (rng.randint(-j, j) if j else 0))
            plans[plan_key] = keep
        out.extend(rec for i, rec in enumerate(series) if i in plans[plan_key])
    return out


def _skew_and_gap(recs: list[dict], params: Params) -> list[dict]:
    skew = {p.host: p.fields["skew_s"] for p in params.phenomena if p.kind == "clock_skew"}
    gaps = [(p.host, p.start, p.end) for p in params.phenomena if p.kind == "collector_gap"]
    out = []
    for rec in recs:
        t, host = _t(rec), rec["tags"]["host"]
        if any(h == host and a <= t <= b for h, a, b in gaps):
            continue
        order = t
        if host in skew:
            unit = rec["timestamp"] / t
            rec = dict(rec, timestamp=int(round((t + skew[host]) * unit)))
        out.append((order, rec))
    return out


def apply(folder: Path, fabric: Fabric, params: Params, *, seed: int) -> dict:
    """Rewrite folder/telemetry.jsonl.gz with the realism params; return counts."""
    path = Path(folder) / "telemetry.jsonl.gz"
    recs = _read(path)
    rng = random.Random(f"{seed}:deliver")
    by: dict[tuple, list[dict]] = {}
    events = []
    for rec in recs:
        (by.setdefault(_key(rec), []) if rec["name"] in _CLASS else events).append(rec)
    for key, series in by.items():  # the base run may hold its own late and duplicate records
        seen, clean = set(), []
        for rec in sorted(series, key=_t):
            sig = json.dumps(rec, sort_keys=True)
            if sig not in seen:
                seen.add(sig)
                clean.append(rec)
        by[key] = clean
    _transform(fabric, by, params, events)
    ordered = _skew_and_gap(_sampled(by, params, rng) + events, params)
    step = {c: s for c, s in params.intervals.items()}
    timed, dups, late = [], 0, 0
    for order, rec in ordered:
        interval = step.get(_CLASS.get(rec["name"], "switch"), 1)
        x = rng.random()
        if x < params.late:
            order += rng.uniform(0.5, 3.0) * interval
            late += 1
        timed.append((order, rec))
        if x > 1 - params.duplicate:
            timed.append((order + rng.uniform(0, interval), rec))
            dups += 1
    timed.sort(key=lambda x: x[0])
    with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0,
                                                  compresslevel=1) as gz:
        gz.write("".join(json.dumps(r, separators=SEP) + "\n" for _, r in timed).encode())
    return {"records": len(timed), "late_records": late, "duplicate_records": dups}
