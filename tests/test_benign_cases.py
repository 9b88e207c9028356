"""Contract section 8, case by case: each benign case opens no incident by mechanism,
whatever the physics constants, the load and the sample interval.

Each timeline drives the whole in-process pipeline (reorderer, features, the built-in
catalogue, correlation, credibility) with exporters sampling a small fabric every 1, 5,
10 or 30 s: two spines, two leaves (swp51/swp52 uplinks), gpu1..gpu4 and stor1. The
truth is integrated second by second, so a short episode is diluted over a long sample
interval as a real counter is. The constants (FEC floor, load, ECN rate, burst length,
storage latency, ...) are drawn from grids wider than the simulator's tune ranges: a
verdict must not hang on one generator's numbers.
"""
from __future__ import annotations

import json
import random

import pytest

from tests.test_gray_faults import NICS, PORTS, T0, incidents  # the same small fabric and pipeline run

UPLINKS = [p for p in PORTS if p.startswith("leaf") and ":swp5" in p]
INTERVALS = (1, 5, 10, 30)
# Bursts that recur within every 30 s sample. ECN alone is told apart (a port that sent a
# fifth of the sample held no queue through it: `busy_out`, the test below), but not
# what these cases add:
# - collective phases with pause: each 30 s sample holds one 4-6 s phase, so the leaf
#   ports' pause frames and pause time average into a steady 270 frames/s, 1.3 % of the
#   time, every sample alike: the counters of a port relaying a steady low pause. A relay
#   keeps its ingress busy (receiving, or pausing its peer, nearly all the time), a
#   burst does not, but this fabric exports no ingress octets, and an origin (a NIC's
#   low storm pauses 3 % of the time at normal load) is not busy either;
# - the ramp's 1-3 s bursts of marks every 25-40 s on uplinks that read 92 % and 110 %
#   busy (the ramp's load on top of the fabric's 0.2): a port that busy may have held a
#   queue through most of each sample; only a gauge read at an instant (queue occupancy:
#   deep in every sample when it held, in one of ten or fifteen for a 2 s burst) would
#   differ, and this fabric exports none.
EVERY_SAMPLE = pytest.mark.xfail(strict=True, reason="pause, or marks at a busy port, recurring within each 30 s sample read as steady")
SPEED_MBPS = 400_000  # line rate of every port; load is given as a share of it


class Fabric:
    """Counters integrated each second; gauges set per second; `down` NICs report link down,
    `quiet` devices send nothing."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.counters: dict[tuple[str, str], float] = {}
        self.gauges: dict[str, dict] = {}
        self.down: set[str] = set()
        self.quiet: set[str] = set()

    def add(self, series: str, name: str, amount: float) -> None:
        self.counters[(series, name)] = self.counters.get((series, name), 0.0) + amount

    def load(self, series: str, share: float) -> None:
        """A second of traffic at `share` of line rate out of a NIC or switch port."""
        name = "tx_bytes" if series in NICS else "if_out_octets"
        self.add(series, name, share * SPEED_MBPS * 1e6 / 8)

    def reset(self, series: str) -> None:
        for key in [k for k in self.counters if k[0] == series]:
            self.counters[key] = 0.0

    def fields(self, series: str) -> dict:
        return {n: int(v) for (s, n), v in self.counters.items() if s == series}


def telemetry(interval: int, case, *, length: float = 900.0, seed: int = 3, jobs=()) -> list[str]:
    """Lines as the exporters send them: every series sampled every `interval` s (from a
    per-device phase), after `case(fabric, t)` added second t's truth."""
    fab = Fabric(seed)
    phase = {d: fab.rng.randrange(interval) for d in ("leaf1", "leaf2", "spine1", "spine2", "gpu1", "gpu2",
                                                        "gpu3", "gpu4", "stor1")}
    lines = [json.dumps({"name": "job_placement", "tags": {"scheduler": "slurm", "cluster": "c"}, "timestamp": T0 * 1000,
                         "fields": {"job_id": j, "account": j, "user": "u", "job_state": "RUNNING",
                                    "nodes": ",".join(h), "start_time": T0}}) for j, h in jobs]
    for k in range(int(length) + 1):
        t = float(k)
        for port in PORTS:
            fab.add(port, "if_in_fec_correctable_frames", fab.rng.randint(0, 20))
            fab.add(port, "if_out_octets", 0.2 * SPEED_MBPS * 1e6 / 8)
        for nic in NICS:
            fab.add(nic, "tx_bytes", 0.1 * SPEED_MBPS * 1e6 / 8)
        fab.add("stor1", "reads", 400)
        fab.add("stor1", "writes", 400)
        fab.gauges["stor1"] = {"latency": fab.rng.uniform(0.3, 0.8)}
        case(fab, t)
        lat = fab.gauges["stor1"].pop("latency")
        fab.add("stor1", "read_time", 400 * lat * fab.gauges["stor1"].pop("read_factor", 1.0))
        fab.add("stor1", "write_time", 400 * lat)
        for series in PORTS + NICS + ["stor1"]:
            host = series.split(":")[0]
            if (k - phase[host]) % interval or host in fab.quiet:
                continue
            lines.append(_record(fab, series, t))
    return lines


def _record(fab: Fabric, series: str, t: float) -> str:
    host, _, iface = series.partition(":")
    fields = fab.fields(series) | fab.gauges.get(series, {})
    if series in PORTS:
        name, tags = "switch_port", {"host": host, "interface": iface}
        fields |= {"oper_status": "down" if fab.gauges.get(series, {}).get("down") else "up",
                   "admin_status": "up", "speed_mbps": SPEED_MBPS}
        fields.pop("down", None)
    elif series in NICS:
        name, tags = "nic_port", {"host": host, "interface": iface}
        fields |= {"link": "down" if series in fab.down else "up", "speed": SPEED_MBPS,
                   "outbound_pci_stalled_rd": round(fab.rng.uniform(0, 2), 2),
                   "outbound_pci_stalled_wr": round(fab.rng.uniform(0, 2), 2)}
    else:
        name, tags = "storage", {"host": host, "kind": "lustre_ost", "name": "ost0"}
        fields |= {"iops_in_progress": 1}
    return json.dumps({"name": name, "tags": tags, "fields": fields, "timestamp": int(round((T0 + t) * 1000))})


# --- healthy but unusual: a high, flat corrected-FEC floor ------------------------------

@pytest.mark.parametrize("interval", INTERVALS)
@pytest.mark.parametrize("floor", [300, 30_000, 3_000_000])
def test_a_flat_high_fec_floor_with_noise_opens_nothing(interval, floor):
    """Every uplink end at its own floor (0.3x to 3x of it from one second to the next,
    symbol errors beside), no uncorrectable frame: the FEC at work, not a fault."""
    def case(fab, t):
        for i, port in enumerate(PORTS):
            level = floor * (1 + i % 3)
            fab.add(port, "if_in_fec_correctable_frames", level * fab.rng.uniform(0.3, 3.0))
            fab.add(port, "if_in_fec_symbol_errors", 4 * level * fab.rng.uniform(0.3, 3.0))
    assert incidents(telemetry(interval, case)) == []


# --- blips: isolated WJH buffer-drop events ---------------------------------------------

def _wjh(lines: list[str], drops: list[tuple[float, str]], egress: str = "swp51") -> list[str]:
    """`lines` with one WJH buffer-drop event (What Just Happened: an event, not a sampled
    counter) at each (second, ingress port) of `drops`, all to leaf1's `egress`."""
    events = [json.dumps({"name": "wjh_drop", "timestamp": int(round((T0 + t) * 1000)),
                          "tags": {"host": "leaf1", "ingress_port": ingress, "drop_type": "Buffer",
                                   "reason_id": "503", "severity": "Warning"},
                          "fields": {"reason": "Tail drop", "agg_count": 11, "egress_port": egress}})
              for t, ingress in drops]
    return sorted(lines + events, key=lambda line: json.loads(line)["timestamp"])


@pytest.mark.parametrize("interval", INTERVALS)
@pytest.mark.parametrize("apart_s", [5, 15, 27])
def test_two_isolated_wjh_buffer_drops_on_one_egress_open_nothing(interval, apart_s):
    """Two single tail-drop events, from two ingress ports to one egress, `apart_s` apart
    (within the rule's 30 s): two blips. Before, the symptom's span from the first event to
    the second counted as that many seconds of drops (27 s > microburst's 10 s): split-wide3
    clean-6 opened microburst so."""
    drops = [(300.0, "swp2"), (300.0 + apart_s, "swp4")]
    assert incidents(_wjh(telemetry(interval, lambda fab, t: None), drops)) == []


@pytest.mark.parametrize("interval", INTERVALS)
def test_wjh_buffer_drops_again_and_again_are_a_microburst(interval):
    """The same egress dropping every 8 s for two minutes: repeated, a microburst."""
    drops = [(300.0 + 8 * k, "swp2") for k in range(15)]
    assert incidents(_wjh(telemetry(interval, lambda fab, t: None), drops)) == [("microburst", "leaf1:swp51")]


# --- normal workload ------------------------------------------------------------------

def _phase(fab: Fabric, ports, nics, ecn: float, pause: float) -> None:
    """One second of an all-to-all phase: ECN marks at the ports, CNPs from the receiving
    NICs, pause from the switch ports to the senders."""
    for p in ports:
        fab.add(p, "ecn_marked_packets", ecn)
        fab.add(p, "pfc_3_tx_pkts", pause)
        fab.add(p, "pfc_3_tx_pause_duration_us", min(1e6, pause * 50))
    for n in nics:
        fab.add(n, "np_cnp_sent", ecn / 4)
        fab.add(n, "rp_cnp_handled", ecn / 4)
        fab.add(n, "rx_prio3_pause", pause)


@pytest.mark.parametrize("interval", INTERVALS)
@pytest.mark.parametrize("every, length_s, ecn", [(60, 3, 5e4), (60, 6, 1e6), (30, 4, 2e5), (45, 6, 5e5)])
def test_collective_phases_every_minute_open_nothing(request, interval, every, length_s, ecn):
    """All-to-all phases of a few seconds, over and over for 15 minutes, at the host ports
    and uplinks of both leaves: ECN, CNPs and relayed pause, no loss."""
    # Phases within every 30 s sample: the leaf ports' pause reads as steady, but it holds
    # the senders a few ms per s, no storm (engine/credible.py, paused long); marks at a
    # busy port read as steady still open congestion when the phases are long and loud.
    if interval == 30 and (every, length_s) == (45, 6):
        request.applymarker(EVERY_SAMPLE)
    ports = [p for p in PORTS if p.startswith("leaf")]

    def case(fab, t):
        if t >= 60 and (t - 60) % every < length_s:
            _phase(fab, ports, NICS[:4], ecn, 2_000)
            for n in NICS[:4]:
                fab.load(n, 0.7)
    assert incidents(telemetry(interval, case)) == []


@pytest.mark.parametrize("interval", INTERVALS)
@pytest.mark.parametrize("every, length_s, ecn", [(30, 4, 2e5), (45, 6, 5e5)])
def test_ecn_bursts_within_every_sample_at_a_port_that_is_mostly_idle_open_nothing(interval, every, length_s, ecn):
    """Phases of ECN and CNPs without pause every 30-45 s: at 30 s polling each sample
    holds one and the marks average into a steady rate, but the ports sent a fifth of
    each sample: a queue holds only while its port sends at line rate (or is paused), so
    none held through it (`busy_out`)."""
    ports = [p for p in PORTS if p.startswith("leaf")]

    def case(fab, t):
        if t >= 60 and (t - 60) % every < length_s:
            _phase(fab, ports, NICS[:4], ecn, 0)
    assert incidents(telemetry(interval, case)) == []


@pytest.mark.parametrize("interval", INTERVALS)
def test_a_port_congested_at_line_rate_is_found_at_every_interval(interval):
    """The counterpart: gpu1's leaf port sends at line rate and marks for three minutes
    (an incast), its receiver sends CNPs."""
    def case(fab, t):
        if 300 <= t < 480:
            fab.load("leaf1:swp1", 0.8)  # with the fabric's 0.2: line rate
            fab.add("leaf1:swp1", "ecn_marked_packets", 2e4)
            fab.add("gpu1:eth0", "np_cnp_sent", 2e4)
    assert incidents(telemetry(interval, case)) == [("congestion", "leaf1:swp1")]


@pytest.mark.parametrize("interval", INTERVALS)
@pytest.mark.parametrize("every, burst_s", [(120, 5), (300, 8), (600, 5)])
def test_checkpoint_bursts_open_nothing(interval, every, burst_s):
    """Checkpoints: the GPUs write to stor1 for a few seconds every few minutes; its port
    marks ECN, its NIC sends CNPs and some pause, its operations double at the usual
    latency."""
    def case(fab, t):
        if t >= 30 and (t - 30) % every < burst_s:
            _phase(fab, ["leaf2:swp3"], ["stor1:eth0"], 3e5, 500)
            fab.add("stor1:eth0", "tx_prio3_pause", 200)
            fab.add("stor1:eth0", "tx_prio3_pause_duration", 20_000)
            fab.add("stor1", "writes", 400)
            fab.add("stor1", "write_time", 400 * 0.6)
            for n in NICS[:4]:
                fab.load(n, 0.6)
    assert incidents(telemetry(interval, case)) == []


@pytest.mark.parametrize("interval", INTERVALS)
@pytest.mark.parametrize("peak, rise_s, burst_every", [(0.6, 20, 40), (0.8, 120, 90), (0.75, 180, 25)])
def test_a_job_ramping_to_high_unsaturated_load_opens_nothing(request, interval, peak, rise_s, burst_every):
    """job-a on gpu1 and gpu2 ramps to 60-80 % of line rate and holds it; both leaf1
    uplinks carry the sum near capacity (oversubscribed), drop nothing and mark ECN for
    1-3 s now and then; job-b on gpu3, gpu4 is a tenant of the same uplinks."""
    if interval == 30 and burst_every < 2 * interval:
        request.applymarker(EVERY_SAMPLE)

    def case(fab, t):
        share = peak * min(1.0, max(0.0, (t - 100) / rise_s)) if t >= 100 else 0.0
        for n in ("gpu1:eth0", "gpu2:eth0"):
            fab.load(n, share)
        for up in ("leaf1:swp51", "leaf1:swp52"):
            fab.load(up, min(0.97, share * 1.2))
            if share >= peak * 0.9 and int(t) % burst_every < 1 + int(t) % 3:
                fab.add(up, "ecn_marked_packets", 5e4)
                fab.add(up, "pfc_3_rx_pkts", 100)
    jobs = [("job-a", ["gpu1", "gpu2"]), ("job-b", ["gpu3", "gpu4"])]
    assert incidents(telemetry(interval, case, jobs=jobs)) == []


@pytest.mark.parametrize("interval", INTERVALS)
@pytest.mark.parametrize("base_ms", [0.3, 1.0, 2.0])
def test_storage_scrubbing_under_2x_latency_opens_nothing(interval, base_ms):
    """A scrub raises read latency by 1.9x for ten minutes, throughput unchanged, at any
    base latency of the target."""
    def case(fab, t):
        fab.gauges["stor1"]["latency"] = base_ms * fab.rng.uniform(0.8, 1.2)
        if 200 <= t < 800:
            fab.gauges["stor1"]["read_factor"] = 1.9
    assert incidents(telemetry(interval, case)) == []


# --- operations -----------------------------------------------------------------------

@pytest.mark.parametrize("interval", INTERVALS)
@pytest.mark.parametrize("down_s", [1, 5, 20])
def test_one_down_and_up_of_a_host_link_opens_nothing(interval, down_s):
    """A reboot or driver reload: gpu3's link goes down once for `down_s`, both ends see
    it (the port's carrier changes twice), and the NIC's counters restart from zero."""
    def case(fab, t):
        if t == 300:
            fab.down.add("gpu3:eth0")
            fab.add("gpu3:eth0", "link_down_events_phy", 1)
            fab.add("leaf2:swp1", "carrier_changes", 1)
        if 300 <= t < 300 + down_s:
            fab.gauges["leaf2:swp1"] = {"down": True}
        if t == 300 + down_s:
            fab.down.discard("gpu3:eth0")
            fab.reset("gpu3:eth0")
            fab.add("leaf2:swp1", "carrier_changes", 1)
            fab.gauges.pop("leaf2:swp1", None)
    assert incidents(telemetry(interval, case)) == []


@pytest.mark.parametrize("interval", INTERVALS)
@pytest.mark.parametrize("gap_s", [60, 300])
def test_a_collector_gap_opens_nothing(interval, gap_s):
    """leaf2's telemetry stops for a minute or five while every peer sees its links up."""
    def case(fab, t):
        if 300 <= t < 300 + gap_s:
            fab.quiet.add("leaf2")
        else:
            fab.quiet.discard("leaf2")
    assert incidents(telemetry(interval, case)) == []
