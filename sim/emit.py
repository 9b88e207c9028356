"""Counters and records: cumulative counters from per-tick deltas, rendered as Telegraf
JSON lines, written gzip-compressed (optionally with late, duplicate and batched lines).

Periodic records are rendered from per-series %-templates; the output is byte-identical
to json.dumps(record, separators=(",", ":")) and many times faster.
"""
from __future__ import annotations

import gzip
import json
import random
from collections.abc import Callable
from typing import IO

import numpy as np

from .fabric import NIC, Fabric
from .events import ms
from .tick import NIC_FIELDS, SP_FIELDS, SQ_FIELDS, ST_FIELDS, Tick

SEP = (",", ":")

# Initial counter values: (low, high), by the first substring of the field name that
# matches, "large-ish" for volumes and small for errors.
_INIT = (
    ("not_correctable", (0, 500)), ("fec_symbol", (1e4, 1e7)), ("correctable", (1e4, 1e7)),
    ("corrected_bits", (1e4, 1e7)), ("dropped_bytes", (0, 4e7)), ("dropped", (0, 1e4)),
    ("discards", (0, 1e4)), ("storm", (0, 3)), ("errors", (0, 1e3)), ("_err", (0, 1e3)),
    ("out_of", (0, 1e4)),
    ("deadlock", (0, 4)), ("carrier", (1, 12)), ("link_down", (1, 12)),
    ("duration", (0, 1e8)), ("pfc", (0, 1e6)), ("ecn", (0, 1e7)), ("cnp", (0, 1e7)),
    ("bits", (1e12, 1e14)), ("octets", (1e11, 1e13)), ("bytes", (1e11, 1e13)),
    ("pkts", (1e7, 3e9)), ("packets", (1e7, 3e9)), ("pause", (0, 1e6)),
    ("reads", (1e6, 1e8)), ("writes", (1e6, 1e8)), ("time", (1e6, 1e8)),
)


def _init_range(name: str) -> tuple[float, float]:
    for key, bounds in _INIT:
        if key in name:
            return bounds
    return (0, 1e3)


class Counters:
    """Cumulative integer counters of every series, advanced by a tick's deltas. The
    fractions rounding leaves behind are carried over, so small rates keep their mean."""

    def __init__(self, fabric: Fabric, nrng: np.random.Generator) -> None:
        def init(rows: int, fields: tuple[str, ...]) -> np.ndarray:
            cols = [nrng.uniform(*_init_range(f), rows) for f in fields]
            return np.rint(np.stack(cols, axis=1)).astype(np.int64)

        self.sp = init(len(fabric.ports), SP_FIELDS)
        self.sq = init(len(fabric.ports), SQ_FIELDS)
        self.nic = init(len(fabric.endpoints), NIC_FIELDS)
        self.st = init(fabric.spec.storage_hosts, ST_FIELDS)
        self.carry = [np.zeros(c.shape) for c in (self.sp, self.sq, self.nic, self.st)]

    def advance(self, tick: Tick) -> None:
        for port in sorted(tick.resets):
            self.sp[port] = 0
            self.sq[port] = 0
        pairs = ((self.sp, tick.sp), (self.sq, tick.sq), (self.nic, tick.nic), (self.st, tick.st))
        for (cum, delta), carry in zip(pairs, self.carry):
            total = np.clip(delta, 0.0, None) + carry
            step = np.rint(total)  # >= 0: the carry never goes below -0.5
            carry[...] = total - step
            cum += step.astype(np.int64)


def _template(name: str, tags: dict, fields: list[tuple[str, str]]) -> str:
    """A %-template of one record; fields are (key, placeholder or literal JSON)."""
    head = f'{{"name":{json.dumps(name)},"tags":{json.dumps(tags, separators=SEP)},"fields":{{'
    body = ",".join(f"{json.dumps(k)}:{v}" for k, v in fields)
    return head.replace("%", "%%") + body + '},"timestamp":%d}'


def _switch_port_fields(speed_mbps: int) -> list[tuple[str, str]]:
    out = [(f, "%d") for f in SP_FIELDS[:10]]
    for p in range(8):
        for kind in ("rx_pkts", "tx_pkts", "rx_pause_duration_us", "tx_pause_duration_us"):
            out.append((f"pfc_{p}_{kind}", "%d" if p == 3 else "0"))
    out += [(f, "%d") for f in SP_FIELDS[14:]]
    return out + [("oper_status", '"%s"'), ("admin_status", '"up"'),
                  ("speed_mbps", str(speed_mbps))]


class Renderer:
    """Turns the counters and a tick's gauges into JSON lines, one per series."""

    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric
        mbps = fabric.spec.speed_gbps * 1000
        sp_fields = _switch_port_fields(mbps)
        sq_fields = [(f, "%d") for f in SQ_FIELDS] + [
            ("curr_occupancy_bytes", "%d"), ("shared_watermark_bytes", "%d"),
            ("pfcwd_status", '"%s"')]
        nic_fields = [(f, "%d") for f in NIC_FIELDS] + [
            ("link", '"%s"'), ("speed", str(mbps)), ("outbound_pci_stalled_rd", "%s"),
            ("outbound_pci_stalled_wr", "%s")]
        st_fields = [(f, "%d") for f in ST_FIELDS] + [("iops_in_progress", "%d")]
        self.sp_t, self.sq_t = [], []
        for p in fabric.ports:
            tags = {"host": p.device, "interface": p.iface}
            self.sp_t.append(_template("switch_port", tags, sp_fields))
            self.sq_t.append(_template("switch_queue", dict(tags, queue="3", queue_type="UC"),
                                       sq_fields))
        self.nic_t = [_template("nic_port", {"host": e.name, "interface": NIC,
                                             "device": "mlx5_0", "port": "1"}, nic_fields)
                      for e in fabric.endpoints]
        self.st_t = [_template("storage", {"host": e.name, "kind": "nvmf", "name": "nvme0"},
                               st_fields) for e in fabric.storage]
        self.sw_jitter = np.zeros(len(fabric.ports), dtype=np.int64)  # ms
        self.nic_jitter = np.zeros(len(fabric.endpoints), dtype=np.int64)  # ns
        self.by_device: dict[str, list[int]] = {}
        for p in fabric.ports:
            self.by_device.setdefault(p.device, []).append(p.index)

    def stamp(self, tick: Tick) -> None:
        """Draw this tick's timestamp jitter (<= 50 ms) and stretch each series' deltas
        to the time between its own samples, so rates read from timestamps stay true."""
        f, rng, dt = self.fabric, tick.nrng, tick.dt
        sw = rng.integers(0, 51, len(f.ports))
        nic = rng.integers(0, 50_000_000, len(f.endpoints))
        if tick.i > 0:
            stretch = 1 + (sw - self.sw_jitter) / 1000 / dt
            tick.sp *= stretch[:, None]
            tick.sq *= stretch[:, None]
            tick.nic *= (1 + (nic - self.nic_jitter) / 1e9 / dt)[:, None]
        self.sw_jitter, self.nic_jitter = sw, nic

    def render(self, tick: Tick, c: Counters) -> list[str]:
        f = self.fabric
        base_ms = ms(tick.t)
        lines: list[str] = []
        up = tick.port_up()
        sp, sq = c.sp.tolist(), c.sq.tolist()
        occ = np.rint(tick.occ).astype(np.int64).tolist()
        wm = np.rint(np.maximum(tick.wm, tick.occ)).astype(np.int64).tolist()
        jitter = self.sw_jitter.tolist()
        for device in f.switches:
            if device in tick.silent:
                continue
            for i in self.by_device[device]:
                ts = base_ms + jitter[i]
                state = "up" if up[i] else "down"
                lines.append(self.sp_t[i] % (*sp[i], state, ts))
                wd = "stormed" if tick.stormed[i] else "operational"
                lines.append(self.sq_t[i] % (*sq[i], occ[i], wm[i], wd, ts))
        nic, nic_up = c.nic.tolist(), tick.nic_up()
        rd, wr = np.round(tick.pci_rd, 2).tolist(), np.round(tick.pci_wr, 2).tolist()
        ns = self.nic_jitter.tolist()
        for e in range(len(f.endpoints)):
            state = "up" if nic_up[e] else "down"
            ts = base_ms * 1_000_000 + ns[e]
            lines.append(self.nic_t[e] % (*nic[e], state, rd[e], wr[e], ts))
        st, iops, sec = c.st.tolist(), tick.iops.astype(np.int64).tolist(), int(round(tick.t))
        for k in range(len(st)):
            lines.append(self.st_t[k] % (*st[k], iops[k], sec))
        lines.extend(json.dumps(ev, separators=SEP) for ev in tick.events)
        return lines


class Writer:
    """Writes lines to a deterministic gzip stream. With messy=True about 0.5 % of the
    records arrive 1-3 intervals late, 0.2 % twice, and a few lines hold batches."""

    LATE, DUP, BATCH = 0.005, 0.002, 0.05

    def __init__(self, raw: IO[bytes], *, messy: bool, rng: random.Random,
                 progress: Callable[[int], None] | None = None) -> None:
        self.gz = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=1)
        self.messy, self.rng, self.progress = messy, rng, progress
        self.held: list[tuple[int, str]] = []
        self.records = self.late = self.duplicates = self.batches = 0
        self._next_progress = 10_000

    def write(self, tick_index: int, lines: list[str]) -> None:
        extra = 0
        if self.messy:
            lines, extra = self._mess(tick_index, lines)
        self.records += len(lines) + extra
        if lines:
            self.gz.write(("\n".join(lines) + "\n").encode())
        if self.progress and self.records >= self._next_progress:
            self.progress(self.records)
            self._next_progress = (self.records // 10_000 + 1) * 10_000

    def _mess(self, i: int, lines: list[str]) -> tuple[list[str], int]:
        """The lines to write now, and how many more records their batches hold."""
        out: list[str] = []
        rng = self.rng
        for line in lines:
            x = rng.random()
            if x < self.LATE:
                self.held.append((i + rng.randint(1, 3), line))
                self.late += 1
                continue
            out.append(line)
            if x > 1 - self.DUP:
                out.append(line)
                self.duplicates += 1
        due = [line for when, line in self.held if when <= i]
        self.held = [(when, line) for when, line in self.held if when > i]
        out.extend(due)
        if len(out) > 8 and rng.random() < self.BATCH:
            k, n = rng.randrange(len(out) - 5), rng.randint(2, 5)
            out[k:k + n] = ['{"metrics":[' + ",".join(out[k:k + n]) + "]}"]
            self.batches += 1
            return out, n - 1
        return out, 0

    def close(self) -> None:
        if self.held:
            self.write(1 << 62, [])
        self.gz.close()
