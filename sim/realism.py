"""The realism layer: rewrites a generated run's telemetry the way real collectors and
real fabrics would deliver it, from parameters drawn per seed from wide ranges.

It works on records, after the tick loop, and knows nothing of the rules or the engine:
per device class it samples every `interval` seconds (1, 5, 10 or 30) with jitter and
missed samples, and it adds the benign phenomena of contract section 8 (blips of every
error counter, ECN/CNP/pause bursts of collective phases, checkpoint writes, storage
scrubbing, a host link bounce with counters restarting from zero, a port admin-down for
maintenance, counter resets, 32/64-bit wraps, a collector gap, clock skew, duplicate and
late records, flat high corrected-FEC floors). `draw_physics` and `draw_events` draw what
the tick loop itself must model: the physics constants (link speed, buffer, MTU, ECN
knee, burst rate, FEC noise, storage latency) and scheduled benign events (job ramp-ups,
idle ports) placed clear of the faults. Nothing it adds is a fault; truth lists every
phenomenon under "realism".

    params = draw(random.Random(seed), split="test", fabric=fabric, duration=600)
    apply(folder, params)   # rewrites folder/telemetry.jsonl.gz, returns counts
"""
from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from .fabric import NIC, Fabric, Physics
from .faults.benign import Scheduled

SEP = (",", ":")
# One unit per record kind (contract: s, ms, us, ns inferred from magnitude).
_UNIT = {"switch_port": 1e3, "switch_queue": 1e3, "nic_port": 1e9, "storage": 1.0,
         "link_event": None, "wjh_drop": 1e3}
_CLASS = {"switch_port": "switch", "switch_queue": "switch", "nic_port": "nic",
          "storage": "storage"}
INTERVALS = {"tune": (1, 5, 10), "test": (1, 5, 10, 30)}
# A split draws from the narrow (tune) or the wide (test) ranges; "tune-wide" is the tune
# split's seeds, fabrics and placements with the test split's ranges (sim/split.py).
RANGES_OF = {"tune": "tune", "test": "test", "tune-wide": "test", "tune-any": "test", "tune-range": "test",
             "tune-retired": "test"}


def wide(split: str) -> bool:
    """Whether `split` draws from the wide ranges."""
    return ranges_of(split) == "test"


def ranges_of(split: str) -> str:
    if split not in RANGES_OF:
        raise ValueError(f"unknown split {split!r}; valid: {', '.join(RANGES_OF)}")
    return RANGES_OF[split]
MIB = 1024 * 1024
# Physics constants per split: link speeds and buffers from a choice, the rest uniform.
SPEEDS_GBPS = {"tune": (200, 400), "test": (100, 200, 400, 800)}
BUFFERS_MIB = {"tune": (16, 32, 64), "test": (16, 32, 64, 128)}
MTUS = {"tune": (2048, 4096), "test": (1024, 2048, 4096)}
RANGES = {  # name: (tune low, tune high), (test low, test high)
    "ecn_knee": ((0.94, 0.97), (0.92, 0.98)),
    "burst_every_s": ((200.0, 600.0), (60.0, 1200.0)),
    "fec_noise": ((10, 50), (5, 200)),
    "latency_lo_ms": ((0.2, 0.4), (0.1, 0.8)),
    "latency_span_ms": ((0.3, 0.6), (0.2, 1.5)),
}


@dataclass
class Phenomenon:
    """One benign thing: `kind`, the series it touches (measurement, host, interface),
    when, and its size."""

    kind: str
    measurement: str
    host: str
    interface: str | None
    start: float
    end: float
    fields: dict[str, float] = field(default_factory=dict)  # field -> amount (or rate)


@dataclass
class Params:
    intervals: dict[str, int]  # device class -> sample interval, s
    jitter_s: float  # +- per sample, s (whole base samples)
    missed: float  # probability a sample is not sent
    duplicate: float
    late: float  # records delivered up to 3 intervals late
    phenomena: list[Phenomenon]

    def describe(self) -> dict:
        kinds: dict[str, int] = {}
        for p in self.phenomena:
            kinds[p.kind] = kinds.get(p.kind, 0) + 1
        return {"intervals": self.intervals, "interval_s": self.intervals["switch"],
                "jitter_s": self.jitter_s, "missed": self.missed, "duplicate": self.duplicate,
                "late": self.late, "benign_kinds": kinds,
                "phenomena": [asdict(p) for p in self.phenomena]}


# --- drawing ----------------------------------------------------------------------------
def _host_port(f: Fabric, e: int):
    return f.ports[int(f.host_port[e])]


def _blips(rng: random.Random, f: Fabric, t0: float, t1: float, n: int) -> list[Phenomenon]:
    """Single-sample or few-second blips of every counter the rules read."""
    out = []
    hosts = list(range(len(f.endpoints)))
    for _ in range(n):
        e = rng.choice(hosts)
        nic, port = f.endpoints[e].name, _host_port(f, e)
        t = rng.uniform(t0, t1 - 10)
        d = rng.choice((1, 2, 3))
        kind = rng.choice(("crc", "fec_uncorrectable", "pcie_stall", "pause", "out_of_buffer",
                           "tail_drop", "ecn_cnp", "wjh_drop", "in_errors"))
        if kind == "crc":
            out.append(Phenomenon("blip_crc", "nic_port", nic, NIC, t, t + 1,
                                  {"rx_crc_errors_phy": rng.randint(1, 5)}))
        elif kind == "fec_uncorrectable":
            out.append(Phenomenon("blip_fec_uncorrectable", "switch_port", port.device,
                                  port.iface, t, t + 1,
                                  {"if_in_fec_not_correctable_frames": rng.randint(1, 4)}))
        elif kind == "in_errors":
            out.append(Phenomenon("blip_in_errors", "switch_port", port.device, port.iface,
                                  t, t + 1, {"if_in_errors": rng.randint(1, 5)}))
        elif kind == "pcie_stall":
            out.append(Phenomenon("blip_pcie_stall", "nic_port", nic, NIC, t, t + d,
                                  {"outbound_pci_stalled_rd": rng.uniform(1, 5)}))
        elif kind == "pause":
            out.append(Phenomenon("blip_pause", "nic_port", nic, NIC, t, t + 1,
                                  {"tx_prio3_pause": rng.randint(2, 40),
                                   "tx_prio3_pause_duration": rng.randint(5, 200)}))
        elif kind == "out_of_buffer":
            out.append(Phenomenon("blip_out_of_buffer", "nic_port", nic, NIC, t, t + 1,
                                  {"rx_out_of_buffer": rng.randint(1, 50)}))
        elif kind == "tail_drop":
            out.append(Phenomenon("blip_tail_drop", "switch_queue", port.device, port.iface,
                                  t, t + 1, {"dropped_packets": rng.randint(1, 20)}))
        elif kind == "wjh_drop":
            out.append(Phenomenon("blip_wjh_drop", "wjh_drop", port.device, port.iface, t, t,
                                  {"agg_count": rng.randint(1, 20)}))
        else:
            out.append(_ecn_burst(rng, f, [e], t, d, "blip_ecn_cnp"))
    return out


def _more_blips(rng: random.Random, f: Fabric, t0: float, t1: float, n: int) -> list[Phenomenon]:
    """Blips of the counters the rules read that `_blips` leaves out, drawn on a stream of
    their own (every other draw stays as it was): 1-3 s of a storage target slow on reads
    and writes alike (a garbage-collection pause: 5-30x its latency), a few NIC receive
    discards, a few out-discards at a switch port. A target pauses once a run at most."""
    out = []
    hosts = list(range(len(f.endpoints)))
    calm = list(f.storage)  # targets with no pause yet: a pause that recurs is a fault (section 8)
    for _ in range(n):
        t = rng.uniform(t0, t1 - 10)
        kind = rng.choice(("storage_latency", "nic_discards", "out_discards"))
        e = rng.choice(hosts)
        if kind == "storage_latency" and not calm:
            kind = "nic_discards"
        if kind == "storage_latency":
            s = calm.pop(rng.randrange(len(calm)))
            out.append(Phenomenon("blip_storage_latency", "storage", s.name, None, t,
                                  t + rng.choice((1, 2, 3)), {"io_stall": rng.uniform(4, 29)}))
        elif kind == "nic_discards":
            out.append(Phenomenon("blip_nic_discards", "nic_port", f.endpoints[e].name, NIC, t, t + 1,
                                  {"rx_discards_phy": rng.randint(1, 40)}))
        else:
            port = _host_port(f, e)
            out.append(Phenomenon("blip_out_discards", "switch_port", port.device, port.iface,
                                  t, t + 1, {"if_out_discards": rng.randint(1, 20)}))
    return out


def _ecn_burst(rng, f: Fabric, eps: list[int], t: float, d: float, kind: str,
               pause: bool = False) -> Phenomenon:
    """ECN marks and CNPs on the first NIC of `eps` (others get theirs from repeats)."""
    e = eps[0]
    rate = rng.uniform(200, 5000)
    fields = {"np_ecn_marked_roce_packets": rate, "np_cnp_sent": rate * 0.8,
              "rp_cnp_handled": rate * 0.8}
    if pause:
        fields |= {"rx_prio3_pause": rng.uniform(10, 300),
                   "rx_prio3_pause_duration": rng.uniform(50, 2000)}
    return Phenomenon(kind, "nic_port", f.endpoints[e].name, NIC, t, t + d, fields)


def _collectives(rng, f: Fabric, t0, t1, n: int) -> list[Phenomenon]:
    """All-to-all / all-reduce incast phases: a few seconds of ECN, CNPs and pause on
    a group of hosts and their leaf ports' ECN marks, no loss."""
    out = []
    hosts = [e.index for e in f.hosts]
    for _ in range(n):
        group = rng.sample(hosts, min(len(hosts), rng.randint(2, 8)))
        t, d = rng.uniform(t0, t1 - 10), rng.uniform(2, 6)
        kind = rng.choice(("all_to_all", "allreduce_incast"))
        for e in group:
            out.append(_ecn_burst(rng, f, [e], t, d, kind, pause=True))
            port = _host_port(f, e)
            out.append(Phenomenon(kind, "switch_port", port.device, port.iface, t, t + d,
                                  {"ecn_marked_packets": rng.uniform(200, 5000),
                                   "pfc_3_tx_pkts": rng.uniform(10, 300)}))
    return out


def _spared(items: list, first, a: float, b: float, clear: tuple[tuple[str, float, float], ...],
            names: Callable[[object], tuple[str, ...]]):
    """The item an operation that silences telemetry over [a, b] (a collector gap, a host
    link bounce, a port's maintenance) falls on: `first`, or, when that would silence a
    fault's own device or interface during the fault (`clear`: name, from, to; `names`:
    an item's), the next item in order that would not. A fault the telemetry never shows
    tests no engine, and a link down restarts the levels a gray fault is measured
    against. No draw is made, so the run's other draws stay as they were."""
    def hides(item) -> bool:
        own = names(item)
        return any(n in own and a < hi and b > lo for n, lo, hi in clear)
    k = items.index(first)
    for item in items[k:] + items[:k]:
        if not hides(item):
            return item
    return first


def _operations(rng, f: Fabric, t0, t1, split: str,
                clear: tuple[tuple[str, float, float], ...] = ()) -> list[Phenomenon]:
    out: list[Phenomenon] = []
    span = t1 - t0
    hosts = [e.index for e in f.hosts]

    def when(lo=0.1, hi=0.8) -> float:
        return t0 + span * rng.uniform(lo, hi)

    def link(h: int) -> tuple[str, ...]:  # a host link's names: its host, its switch port
        port = _host_port(f, h)
        return f.endpoints[h].name, f"{port.device}:{port.iface}"

    e = rng.choice(hosts)
    t = when()
    end = t + rng.uniform(3, 20)
    out.append(Phenomenon("host_link_bounce", "nic_port", f.endpoints[_spared(hosts, e, t, end, clear, link)].name,
                          NIC, t, end))
    if rng.random() < 0.7:
        e2 = rng.choice([h for h in hosts if h != e])
        t = when()
        end = t + rng.uniform(60, min(600, span * 0.3))
        port = _host_port(f, _spared(hosts, e2, t, end, clear, link))
        out.append(Phenomenon("admin_down", "switch_port", port.device, port.iface, t, end))
    for _ in range(rng.randint(1, 3)):
        p = rng.choice(f.ports)
        t = when()
        out.append(Phenomenon("counter_reset", "switch_port", p.device, p.iface, t, t))
    p = rng.choice(f.ports)
    t = when()
    out.append(Phenomenon("wrap32", "switch_port", p.device, p.iface, t, t,
                          {"if_out_ucast_pkts": 32}))
    e = rng.choice(hosts)
    t = when()
    out.append(Phenomenon("wrap64", "nic_port", f.endpoints[e].name, NIC, t, t,
                          {"rx_bytes": 64}))
    if rng.random() < 0.6:
        sw, t = rng.choice(f.switches), when()
        end = t + rng.uniform(20, 180)
        out.append(Phenomenon("collector_gap", "*", _spared(f.switches, sw, t, end, clear, lambda x: (x,)), None, t, end))
    if rng.random() < 0.6:
        dev = rng.choice(f.switches + [x.name for x in f.hosts])
        lim = 5.0 if wide(split) else 3.0
        out.append(Phenomenon("clock_skew", "*", dev, None, t0, t1,
                              {"skew_s": round(rng.uniform(-lim, lim), 3)}))
    for _ in range(rng.randint(0, 2)):
        p = rng.choice(f.ports)
        out.append(Phenomenon("fec_floor", "switch_port", p.device, p.iface, t0, t1,
                              {"if_in_fec_correctable_frames": rng.uniform(1e3, 2e5),
                               "if_in_fec_symbol_errors": rng.uniform(1e3, 5e5)}))
    return out


def _workload(rng, f: Fabric, t0, t1) -> list[Phenomenon]:
    out = []
    for s in f.storage:
        if rng.random() < 0.7:
            t = rng.uniform(t0, t1 - 60)
            out.append(Phenomenon("checkpoint", "storage", s.name, None, t,
                                  t + rng.uniform(20, 60), {"writes": rng.uniform(0.2, 0.6)}))
        if rng.random() < 0.5:
            t = rng.uniform(t0, max(t0 + 1, t1 - 300))
            out.append(Phenomenon("scrubbing", "storage", s.name, None, t,
                                  t + rng.uniform(120, 900), {"read_time": rng.uniform(0.1, 0.6)}))
    return out


def draw_physics(rng: random.Random, split: str) -> tuple[int, Physics]:
    """(link speed in Gb/s, physics constants) for one run, wider ranges in test."""
    k = 1 if wide(split) else 0
    split = ranges_of(split)

    def u(name: str) -> float:
        return rng.uniform(*RANGES[name][k])

    lo = round(u("latency_lo_ms"), 3)
    physics = Physics(buffer_bytes=rng.choice(BUFFERS_MIB[split]) * MIB, mtu_bytes=rng.choice(MTUS[split]),
                      ecn_knee=round(u("ecn_knee"), 3), burst_every_s=round(u("burst_every_s")),
                      fec_noise=rng.randint(*RANGES["fec_noise"][k]),
                      storage_latency_ms=(lo, round(lo + u("latency_span_ms"), 3)))
    return rng.choice(SPEEDS_GBPS[split]), physics


def _gaps(busy: list[tuple[float, float]], duration: float) -> list[tuple[float, float]]:
    """Stretches of [10, duration - 10] s into the run outside the busy windows."""
    out, t = [], 10.0
    for a, b in sorted(busy):
        if a > t:
            out.append((t, a))
        t = max(t, b)
    if duration - 10 > t:
        out.append((t, duration - 10))
    return out


def draw_events(rng: random.Random, *, split: str, busy: list[tuple[float, float]],
                duration: float) -> tuple[Scheduled, ...]:
    """Job ramp-ups (clean runs: 1-2; fault runs: one in half of them) and an idle port
    (in a third of the runs), each in a gap of at least its length outside `busy` (the
    faults' windows widened, seconds into the run), so they never overlap a fault."""
    wider = wide(split)
    wanted: list[Scheduled] = []
    for _ in range(rng.randint(1, 2) if not busy else int(rng.random() < 0.5)):
        rise = rng.uniform(10, 180) if wider else rng.uniform(20, 120)
        hold = rng.uniform(30, 600) if wider else rng.uniform(60, 300)
        wanted.append(Scheduled("job_ramp_up", 0.0, rise + hold, rng.randrange(1000), rise_s=round(rise, 1),
                                peak=round(rng.uniform(0.6, 0.9) if wider else rng.uniform(0.65, 0.85), 3)))
    if rng.random() < 1 / 3:
        wanted.append(Scheduled("idle_port", 0.0, rng.uniform(60, 300), rng.randrange(1000)))
    out: list[Scheduled] = []
    for ev in wanted:
        gaps = [(a, b) for a, b in _gaps(busy, duration) if b - a >= min(ev.length, 60 + ev.rise_s)]
        if not gaps:
            continue
        a, b = rng.choice(gaps)
        length = min(ev.length, b - a)
        at = round(rng.uniform(a, b - length), 1)
        out.append(Scheduled(ev.kind, at, round(length, 1), ev.pick, ev.rise_s, ev.peak))
        busy = busy + [(at, at + length)]
    return tuple(out)


def _scaled(n: int, scale: float) -> int:
    return n if scale == 1.0 else max(0, round(n * scale))


def draw(rng: random.Random, *, split: str, fabric: Fabric, start: float,
         duration: float, intervals: tuple[int, ...] | None = None,
         more: random.Random | None = None, clear: tuple[tuple[str, float, float], ...] = (),
         blip_scale: float = 1.0) -> Params:
    """Realism parameters for one run: intervals per device class, delivery mess and
    benign phenomena, from ranges that are wider in the test split. `intervals` replaces
    the split's interval choices (a probe of a tune split: `simulate --intervals`).
    `more`, a stream of its own, draws the blips `_more_blips` adds. `clear` lists the
    faults' devices and interfaces with the time each must stay observed (name, from, to:
    event time), which a collector gap, a host link bounce and a port's maintenance then
    spare (`_spared`). `blip_scale` multiplies how many blips a run draws (a probe of a
    tune split: `simulate --blips`)."""
    choices = intervals or INTERVALS[ranges_of(split)]
    main = rng.choice(choices)
    intervals = {"switch": main, "nic": main if rng.random() < 0.6 else rng.choice(choices),
                 "storage": max(main, rng.choice(choices))}
    wider = wide(split)
    t0, t1 = start + 5, start + duration - 5
    per_hour = duration / 3600
    blips = _scaled(max(2, round(rng.uniform(6, 30 if wider else 15) * per_hour * 4)), blip_scale)
    phenomena = (_blips(rng, fabric, t0, t1, blips)
                 + _collectives(rng, fabric, t0, t1, max(1, round(rng.uniform(2, 8) * per_hour * 4)))
                 + _operations(rng, fabric, t0, t1, split, clear) + _workload(rng, fabric, t0, t1))
    if more is not None:
        phenomena += _more_blips(more, fabric, t0, t1,
                                 _scaled(max(1, round(more.uniform(2, 8) * per_hour * 4)), blip_scale))
    return Params(intervals, jitter_s=rng.choice((0, 1, 1, 2)) if main >= 5 else 0,
                  missed=rng.uniform(0, 0.05 if wider else 0.02),
                  duplicate=rng.uniform(0, 0.01), late=rng.uniform(0, 0.01 if wider else 0.005),
                  phenomena=phenomena)
