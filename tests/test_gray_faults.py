"""Gray faults against their benign look-alikes (contract section 8), through the whole
in-process pipeline (reorderer, features, the catalogue's level rules, correlation,
credibility), at 1 s and at 10 s sampling.

Each timeline is 600 s of exporters sampling a small fabric (two leaves, two spines,
four GPU hosts, one storage host) with seeded noise; a gray fault starts at 120 s and
ramps for 300 s, as slowly as an ageing part does, staying under every absolute
threshold of the catalogue. Each fault must be found, once, named right; each benign
case beside it (a flat high FEC floor, a PCIe stall blip, a driver reload, a scrub, a
checkpoint, a pause blip, a NIC pausing for tens of microseconds a second) opens nothing.
"""
from __future__ import annotations

import json
import random

import pytest

from engine.pipeline import Pipeline
from engine.topology import Topology
from rules.loader import load_rules

T0 = 1764400000
RULES = load_rules(None)
LINKS = [("leaf1:swp51", "spine1:swp1"), ("leaf1:swp52", "spine2:swp1"),
         ("leaf2:swp51", "spine1:swp2"), ("leaf2:swp52", "spine2:swp2"),
         ("gpu1:eth0", "leaf1:swp1"), ("gpu2:eth0", "leaf1:swp2"),
         ("gpu3:eth0", "leaf2:swp1"), ("gpu4:eth0", "leaf2:swp2"), ("stor1:eth0", "leaf2:swp3")]
TOPO = Topology.from_links(roles={}, links=LINKS)
PORTS = [x for pair in LINKS for x in pair if not x.startswith(("gpu", "stor"))]
NICS = [x for pair in LINKS for x in pair if x.startswith(("gpu", "stor"))]
LENGTH, START, RAMP = 600.0, 120.0, 300.0


def ramp(t: float) -> float:
    """0 before the fault, rising to 1 over RAMP seconds, then 1."""
    return min(1.0, max(0.0, (t - START) / RAMP))


class Exporters:
    """Cumulative counters integrated second by second and sampled every `interval`."""

    def __init__(self, interval: int, seed: int = 7):
        self.interval, self.rng = interval, random.Random(seed)
        self.counters: dict[tuple[str, str], float] = {}
        self.lines: list[tuple[float, str]] = []
        self.down: set[str] = set()  # NICs whose link is down
        self.admin_down: set[str] = set()  # switch ports an operator took down

    def add(self, series: str, name: str, amount: float) -> None:
        key = (series, name)
        self.counters[key] = self.counters.get(key, 0.0) + amount

    def reset(self, series: str) -> None:
        for key in [k for k in self.counters if k[0] == series]:
            self.counters[key] = 0.0

    def emit(self, t: float, measurement: str, series: str, tags: dict, gauges: dict) -> None:
        fields = {n: int(v) for (s, n), v in self.counters.items() if s == series} | gauges
        self.lines.append((t, json.dumps({"name": measurement, "tags": tags, "fields": fields,
                                          "timestamp": int(round((T0 + t) * 1000))})))


def telemetry(interval: int, *, fec=None, pci=None, storage=None, pause=None) -> list[str]:
    """The fabric's telemetry; each keyword is a function (exporters, t) adding that
    second's fault or benign increments, or returning gauges to set (pci)."""
    ex = Exporters(interval)
    rng = ex.rng
    for k in range(int(LENGTH) + 1):
        t = float(k)
        for port in PORTS:
            ex.add(port, "if_in_fec_correctable_frames", rng.randint(0, 20))
            ex.add(port, "if_in_fec_symbol_errors", rng.randint(0, 50))
            ex.add(port, "if_in_octets", 1e9)
        for nic in NICS:
            ex.add(nic, "tx_bytes", 1e9)
        ex.add("stor1", "reads", 400)
        ex.add("stor1", "writes", 400)
        lat = rng.uniform(0.3, 0.8)
        ex.add("stor1", "read_time", 400 * lat)
        ex.add("stor1", "write_time", 400 * lat)
        stalls = {nic: {"outbound_pci_stalled_rd": rng.uniform(0, 2), "outbound_pci_stalled_wr": rng.uniform(0, 2)}
                  for nic in NICS}
        for fn in (fec, storage, pause):
            if fn is not None:
                fn(ex, t)
        if pci is not None:
            for nic, extra in pci(ex, t).items():
                for g in stalls[nic]:
                    stalls[nic][g] += extra
        if k % interval:
            continue
        for port in PORTS:
            host, iface = port.split(":")
            state = "down" if port in ex.admin_down else "up"
            ex.emit(t, "switch_port", port, {"host": host, "interface": iface},
                    {"oper_status": state, "admin_status": state})
        for nic in NICS:
            host, iface = nic.split(":")
            up = "down" if nic in ex.down else "up"
            ex.emit(t, "nic_port", nic, {"host": host, "interface": iface},
                    {"link": up} | {g: round(v, 2) for g, v in stalls[nic].items()})
        ex.emit(t, "storage", "stor1", {"host": "stor1", "kind": "lustre_ost", "name": "ost0"}, {"iops_in_progress": 1})
    return [line for _, line in sorted(ex.lines, key=lambda x: x[0])]


def incidents(lines: list[str], topology: Topology = TOPO) -> list[tuple[str, str]]:
    """(top cause, entity) of every incident the pipeline published."""
    pipe = Pipeline(rules=RULES, topology=topology)
    seen: dict[str, tuple[str, str]] = {}

    def take():
        for inc in pipe.changes():
            top = min(inc["root_causes"], key=lambda rc: rc["rank"])
            seen.setdefault(inc["id"], (top["cause"], top["entity"]["id"]))
    for line in lines:
        pipe.feed(line)
        take()
    pipe.finish()
    take()
    return sorted(seen.values())


INTERVALS = (1, 10)


def fec_creep(ex: Exporters, t: float) -> None:
    for end in ("leaf1:swp51", "spine1:swp1"):  # both ends of the ageing link
        ex.add(end, "if_in_fec_correctable_frames", 250 * ramp(t))
        ex.add(end, "if_in_fec_symbol_errors", 500 * ramp(t))


def fec_floor(ex: Exporters, t: float) -> None:
    ex.add("leaf2:swp52", "if_in_fec_correctable_frames", 50_000)  # high but flat, no frame lost
    ex.add("leaf2:swp52", "if_in_fec_symbol_errors", 200_000)


@pytest.mark.parametrize("interval", INTERVALS)
def test_rising_corrected_fec_is_a_degraded_link_and_a_flat_floor_is_not(interval):
    assert incidents(telemetry(interval, fec=lambda ex, t: (fec_creep(ex, t), fec_floor(ex, t)))) == [
        ("link_degraded", "leaf1:swp51--spine1:swp1")]


@pytest.mark.parametrize("interval", INTERVALS)
def test_a_flat_high_fec_floor_alone_opens_nothing(interval):
    assert incidents(telemetry(interval, fec=fec_floor)) == []


def optic_creep(floor: float, rise: float = 4.5):
    """The ageing link's optic corrects `floor` frames/s (0.3x to 1.7x of it from one
    second to the next) for two minutes, then its rate climbs by `rise` times that over
    five minutes: a creep as long as the rule's five-minute past, so a median of that past
    rises with it."""
    def creep(ex: Exporters, t: float) -> None:
        for end in ("leaf1:swp51", "spine1:swp1"):
            ex.add(end, "if_in_fec_correctable_frames", floor * (ex.rng.uniform(0.3, 1.7) + rise * ramp(t)))
    return creep


@pytest.mark.parametrize("interval", (1, 10, 30))
@pytest.mark.parametrize("floor", [60, 3000])
def test_corrected_fec_creeping_from_its_own_floor_over_minutes_is_a_degraded_link(interval, floor):
    # Against the median of the five minutes before, the recent minute of a five-minute
    # creep never reaches four times (split-wide3 fec_creep-3 at 1 s: a floor of 70 rising
    # by 270, missed); against the level before the creep began (the lower quartile of
    # eight minutes, as the storage drift reads its past) it is five times.
    fec = lambda ex, t: (optic_creep(floor)(ex, t), fec_floor(ex, t))  # noqa: E731
    assert incidents(telemetry(interval, fec=fec)) == [("link_degraded", "leaf1:swp51--spine1:swp1")]


@pytest.mark.parametrize("interval", (1, 10, 30))
@pytest.mark.parametrize("floor", [85, 3000])
def test_a_weak_creep_to_under_three_times_a_noisy_floor_is_a_degraded_link(interval, floor):
    # A weak creep of 157 frames/s over a floor of 85 (tune-range probe fec_creep-12 at
    # 1 s, fec_creep-13 at 2 s: 2.85x and 4x the floor's mean at their peaks) never reached
    # four times the floor's lower quartile and was missed; the floor's ten-second means
    # move a few percent, so a rise to 2.5 times is the optic, not its noise.
    fec = lambda ex, t: (optic_creep(floor, rise=1.85)(ex, t), fec_floor(ex, t))  # noqa: E731
    assert incidents(telemetry(interval, fec=fec)) == [("link_degraded", "leaf1:swp51--spine1:swp1")]


@pytest.mark.parametrize("interval", (1, 10, 30))
def test_a_noisy_fec_floor_that_does_not_rise_opens_nothing(interval):
    # The same optic without its creep: 0.3x to 1.7x of 85 frames/s from one second to
    # the next for ten minutes.
    assert incidents(telemetry(interval, fec=optic_creep(85, rise=0.0))) == []


def maintenance(ex: Exporters, t: float) -> None:
    """leaf1:swp1, whose healthy optic corrects ~110 frames/s, is taken admin-down from
    150 s to 400 s: no codewords, its counters stand still, then it comes back."""
    port = "leaf1:swp1"
    if 150 <= t < 400:
        ex.admin_down.add(port)
        for name in ("if_in_fec_correctable_frames", "if_in_fec_symbol_errors"):
            ex.counters[(port, name)] = ex.counters.setdefault((port, f"pinned_{name}"), ex.counters[(port, name)])
    else:
        ex.admin_down.discard(port)
        ex.add(port, "if_in_fec_correctable_frames", 100)
        ex.add(port, "if_in_fec_symbol_errors", 200)


@pytest.mark.parametrize("interval", (1, 5, 10))
def test_a_port_back_from_maintenance_is_judged_against_a_past_it_was_up_in(interval):
    # While down its corrected-FEC median is zero; against that past the healthy noise it
    # shows once back up was a rise of hundreds of times (tune-wide: link_degraded on
    # three ports back from admin-down). The windows restart while the link is down.
    assert incidents(telemetry(interval, fec=maintenance)) == []


def pcie_stall(ex: Exporters, t: float) -> dict[str, float]:
    out = {"gpu1:eth0": 2.0 * ramp(t)}  # the failing riser: two points more, slowly
    if 300 <= t < 303:
        out["gpu2:eth0"] = 4.0  # a 3 s stall of a few percent: a blip
    return out


def reload(nic: str):
    """`nic`'s driver reloads at 250 s: its link is down 5 s and its counters restart from zero."""
    def case(ex: Exporters, t: float) -> None:
        if t == 250:
            ex.down.add(nic)
        if t == 255:
            ex.down.discard(nic)
            ex.reset(nic)
    return case


driver_reload = reload("gpu4:eth0")  # a NIC beside the fault


@pytest.mark.parametrize("interval", INTERVALS)
def test_a_pcie_stall_creeping_up_is_a_degraded_nic_and_a_blip_or_a_driver_reload_is_not(interval):
    assert incidents(telemetry(interval, pci=pcie_stall, pause=driver_reload)) == [("nic_degraded", "gpu1:eth0")]


@pytest.mark.parametrize("interval", INTERVALS)
def test_a_creeping_pcie_stall_is_found_though_its_nic_bounced_its_link_midway(interval):
    """A bounce of a few seconds is a blip to a median: the level the stall left stays its
    baseline (restarting the windows on it made the raised level the baseline:
    tune-retired pcie_stall-1, never found). A port down for minutes still starts again
    (the maintenance test above). gpu1 is the NIC whose stall creeps up."""
    assert incidents(telemetry(interval, pci=pcie_stall, pause=reload("gpu1:eth0"))) == [("nic_degraded", "gpu1:eth0")]


@pytest.mark.parametrize("interval", INTERVALS)
def test_a_stall_blip_and_a_driver_reload_alone_open_nothing(interval):
    blip = lambda ex, t: {"gpu2:eth0": 4.0} if 300 <= t < 303 else {}  # noqa: E731
    assert incidents(telemetry(interval, pci=blip, pause=driver_reload)) == []


def drift(ex: Exporters, t: float) -> None:
    """stor1's latency drifts to 3x its own level (the base adds 1x)."""
    lat = 0.55 * 2 * ramp(t)
    ex.add("stor1", "read_time", 400 * lat)
    ex.add("stor1", "write_time", 400 * lat)


def scrub_and_checkpoint(ex: Exporters, t: float) -> None:
    """A scrub from 150 s to 550 s slows reads by half (latency well under 2x); a
    checkpoint from 200 s to 260 s adds 60 % writes at the usual latency."""
    if 150 <= t < 550:
        ex.add("stor1", "read_time", 400 * 0.55 * 0.5)
    if 200 <= t < 260:
        ex.add("stor1", "writes", 240)
        ex.add("stor1", "write_time", 240 * 0.55)


@pytest.mark.parametrize("interval", INTERVALS)
def test_storage_latency_drifting_up_is_slow_storage(interval):
    assert incidents(telemetry(interval, storage=drift)) == [("storage_slow", "stor1")]


@pytest.mark.parametrize("interval", INTERVALS)
def test_a_scrub_and_a_checkpoint_open_nothing(interval):
    assert incidents(telemetry(interval, storage=scrub_and_checkpoint)) == []


def low_storm(ex: Exporters, t: float) -> None:
    if t >= START:  # a weak storm starts at once and stays low: 1 % of the time paused
        ex.add("gpu3:eth0", "tx_prio3_pause", ex.rng.uniform(7, 16))
        ex.add("gpu3:eth0", "tx_prio3_pause_duration", 10_000 * ex.rng.uniform(0.9, 1.05))


def little_pause(ex: Exporters, t: float) -> None:
    """gpu1 eases its own buffer (2 frames/s of 40 us) all along; gpu2 sends 40 frames once."""
    ex.add("gpu1:eth0", "tx_prio3_pause", 2)
    ex.add("gpu1:eth0", "tx_prio3_pause_duration", 80)
    if t == 333:
        ex.add("gpu2:eth0", "tx_prio3_pause", 40)
        ex.add("gpu2:eth0", "tx_prio3_pause_duration", 200)


@pytest.mark.parametrize("interval", INTERVALS)
def test_a_low_pause_storm_that_persists_is_a_pfc_storm(interval):
    both = lambda ex, t: (low_storm(ex, t), little_pause(ex, t))  # noqa: E731
    assert incidents(telemetry(interval, pause=both)) == [("pfc_storm", "gpu3:eth0")]


@pytest.mark.parametrize("interval", INTERVALS)
def test_a_little_pause_and_a_pause_blip_open_nothing(interval):
    assert incidents(telemetry(interval, pause=little_pause)) == []


# --- the level rule kind: its file form and its checkpoint ------------------------------
def _rule_file(tmp_path, body: str):
    path = tmp_path / "r.yaml"
    path.write_text("version: 1\nrules:\n  - id: r\n    symptom: s\n    family: f\n    measurement: storage\n" + body)
    return path


@pytest.mark.parametrize("body, message", [
    ("    level: {feature: latency_ms, ratio: 2}\n    when: {all: ['latency_ms > 1']}\n", "has no 'when'"),
    ("    level: {feature: latency_ms}\n", "at least one of above, ratio, rise"),
    ("    level: {feature: latency, ratio: 2}\n", "unknown feature 'latency'"),
    ("    level: {feature: latency_ms, ratio: 2, window_s: 5}\n", "level.window_s"),
    ("    level: {feature: latency_ms, ratio: 2, quantile: 2}\n", "within 0..1"),
])
def test_a_bad_level_rule_is_refused_with_its_field(tmp_path, body, message):
    from rules.loader import RuleError
    with pytest.raises(RuleError, match=message):
        load_rules([_rule_file(tmp_path, body)])


def test_a_level_rule_loads_with_its_windows(tmp_path):
    rules = load_rules([_rule_file(tmp_path, "    level: {feature: latency_ms, recent_s: 30, ratio: 2, quantile: 0.25}\n")])
    level = rules.rules[0].level
    assert (level.feature, level.recent_s, level.baseline_s, level.ratio, level.quantile) == ("latency_ms", 30, 300, 2, 0.25)


def test_a_restored_detector_judges_the_level_as_the_one_that_ran_on():
    """The windows of a level rule are in the detect checkpoint: a worker restored
    halfway through a drift raises the same symptom as one that never stopped."""
    import msgspec

    from engine.detect import Detector, DetectorState
    from engine.features import FeatureState
    from engine.types import Metric

    def metrics():
        reads = rtime = 0.0
        for k in range(0, 601, 10):
            reads += 4000
            rtime += 4000 * 0.5 * (1 + 2 * ramp(k))
            tags = {"host": "stor1", "kind": "disk", "name": "sda"}
            yield Metric("storage", tags, {"reads": int(reads), "read_time": int(rtime)}, T0 + k, "storage|stor1|sda")

    def started(det, ms):
        out = []
        for m in ms:
            det.process(m)
            det.advance(m.ts)
            out += [(s.rule, s.start) for s in det.drain() if s.end is None]
        return out

    def detector():
        return Detector(RULES, interval_of=lambda series: 10.0)
    ms = list(metrics())
    whole = started(detector(), ms)
    first = detector()
    before = started(first, ms[:30])
    state = msgspec.json.decode(msgspec.json.encode(first.snapshot()), type=DetectorState)
    assert state.levels  # the windows are in the checkpoint
    second = detector()
    second.restore(state)
    # and the counters' memory (a worker restores both): without it the first record after
    # the restore has no rate, and the restored windows run one sample behind
    features = msgspec.json.decode(msgspec.json.encode(first.extractor.snapshot()), type=FeatureState)
    second.extractor.restore(features)
    assert before + started(second, ms[30:]) == whole
    assert [r for r, _ in whole] == ["storage_latency_rising"]


def short_slow(ex: Exporters, t: float) -> None:
    """stor1 at about 13 ms an I/O for 75 s (149-224 s): loud, abrupt, short."""
    if 149 <= t < 224:
        ex.add("stor1", "read_time", 400 * 12.5)
        ex.add("stor1", "write_time", 400 * 12.5)


@pytest.mark.parametrize("interval", (1, 10, 30))
def test_a_storage_target_slow_for_75_s_is_found_even_polled_every_30_s(interval):
    # At 30 s the median of a level's window turns two samples after the first slow one;
    # counting the buckets already off since then (engine.baseline.level_seeds) is what
    # keeps the rule's for_s from waiting three samples more, past the fault's end.
    assert incidents(telemetry(interval, storage=short_slow)) == [("storage_slow", "stor1")]
