"""Contract section 2 as data: the measurements, which fields are cumulative counters (C)
and which gauges or event fields (G, E), how each names its entity, and the features
rules and models may name.

A counter `x` becomes the feature `x_rate` (per second), a gauge or event field keeps its
name, and the derived features below combine them. How a feature is computed lives in
`engine.features`; what it is called, what it reads and what kind of arithmetic it is
live here, so a rule file can be checked without the engine.
"""
from __future__ import annotations

from dataclasses import dataclass

PRIOS = range(8)


@dataclass(frozen=True)
class Measurement:
    name: str
    entity_kind: str
    entity: str  # template over tags (then fields)
    counters: frozenset[str]
    gauges: frozenset[str]


def _m(name, kind, entity, counters, gauges) -> Measurement:
    return Measurement(name, kind, entity, frozenset(counters), frozenset(gauges))


MEASUREMENTS: dict[str, Measurement] = {
    m.name: m
    for m in (
        _m(
            "switch_port", "interface", "{host}:{interface}",
            ["if_in_octets", "if_out_octets", "if_in_ucast_pkts", "if_out_ucast_pkts", "if_in_errors",
             "if_in_discards", "if_out_discards", "if_in_fec_correctable_frames",
             "if_in_fec_not_correctable_frames", "if_in_fec_symbol_errors", "wred_dropped_packets",
             "ecn_marked_packets", "carrier_changes"]
            + [f"pfc_{p}_{d}_{k}" for p in PRIOS for d in ("rx", "tx") for k in ("pkts", "pause_duration_us")],
            ["oper_status", "admin_status", "speed_mbps"],
        ),
        _m(
            "switch_queue", "interface", "{host}:{interface}",
            ["packets", "bytes", "dropped_packets", "dropped_bytes", "wred_ecn_marked_packets",
             "wred_dropped_packets", "pfcwd_deadlock_detected", "pfcwd_deadlock_restored"],
            ["curr_occupancy_bytes", "shared_watermark_bytes", "pfcwd_status"],
        ),
        _m(
            "nic_port", "interface", "{host}:{interface}",
            ["rx_bytes", "tx_bytes", "rx_packets", "tx_packets", "tx_pause_storm_warning_events",
             "tx_pause_storm_error_events", "rx_discards_phy", "tx_discards_phy", "rx_out_of_buffer",
             "rx_crc_errors_phy", "rx_symbol_err_phy", "rx_corrected_bits_phy", "rx_bits_phy",
             "link_down_events_phy", "np_ecn_marked_roce_packets", "np_cnp_sent", "rp_cnp_handled",
             "out_of_buffer", "out_of_sequence", "packet_seq_err", "local_ack_timeout_err"]
            + [f"{d}_prio{p}_{k}" for p in PRIOS for d in ("rx", "tx") for k in ("pause", "pause_duration")],
            ["link", "speed", "outbound_pci_stalled_rd", "outbound_pci_stalled_wr"],
        ),
        _m(
            "storage", "storage", "{host}",
            ["reads", "writes", "read_bytes", "write_bytes", "read_time", "write_time", "io_time"],
            ["iops_in_progress"],
        ),
        _m(
            "link_event", "interface", "{host}:{interface}",
            [], ["old_state", "new_state", "down_reason", "message"],
        ),
        _m(
            "wjh_drop", "interface", "{host}:{egress_port}",
            [], ["reason", "agg_count", "egress_port", "traffic_class", "original_occupancy",
                 "sip", "dip", "proto", "sport", "dport", "drop_type", "reason_id", "severity"],
        ),
    )
}
JOB_MEASUREMENT = "job_placement"

@dataclass(frozen=True)
class DerivedFeature:
    """A feature computed from others: `kind` names the arithmetic over `inputs`
    (sum, max, argmax of positive inputs, util = rate * 8 / (speed * scale), per_op =
    first / second, ratio_sum = sum of the first half / sum of the second half,
    little = 1000 * first / sum of the rest, busy = the share of the interval an egress
    sent (util of the first two) or was paused (the rest: pause microseconds per second),
    at most 1, and 1 when the speed is unknown: a queue holds only while its port sends
    at line rate or is paused, so this bounds the share of the interval it can have
    been congested)."""

    name: str
    inputs: tuple[str, ...]
    kind: str
    scale: float = 1.0


def _f(name: str, kind: str, inputs, scale: float = 1.0) -> DerivedFeature:
    return DerivedFeature(name, tuple(inputs), kind, scale)


def _rates(names):
    return [f"{n}_rate" for n in names]


_sp_tx = _rates([f"pfc_{p}_tx_pkts" for p in PRIOS])
_sp_rx = _rates([f"pfc_{p}_rx_pkts" for p in PRIOS])
_sp_txd = _rates([f"pfc_{p}_tx_pause_duration_us" for p in PRIOS])
_sp_rxd = _rates([f"pfc_{p}_rx_pause_duration_us" for p in PRIOS])
_nic_tx = _rates([f"tx_prio{p}_pause" for p in PRIOS])
_nic_rx = _rates([f"rx_prio{p}_pause" for p in PRIOS])
_nic_txd = _rates([f"tx_prio{p}_pause_duration" for p in PRIOS])
_oob = _rates(["rx_out_of_buffer", "out_of_buffer"])
_retx = _rates(["out_of_sequence", "packet_seq_err", "local_ack_timeout_err"])

DERIVED_FEATURES: dict[str, dict[str, DerivedFeature]] = {
    meas: {d.name: d for d in feats}
    for meas, feats in {
        "switch_port": (
            _f("pfc_tx_pkts_rate", "sum", _sp_tx),
            _f("pfc_rx_pkts_rate", "sum", _sp_rx),
            _f("pfc_tx_pause_us_rate", "sum", _sp_txd),
            _f("pfc_rx_pause_us_rate", "sum", _sp_rxd),
            _f("pfc_tx_prio", "argmax", _sp_tx),
            _f("pfc_rx_prio", "argmax", _sp_rx),
            _f("util_out", "util", ["if_out_octets_rate", "speed_mbps"], 1e6),
            _f("util_in", "util", ["if_in_octets_rate", "speed_mbps"], 1e6),
            _f("busy_out", "busy", ["if_out_octets_rate", "speed_mbps", *_sp_rxd], 1e6),
        ),
        "nic_port": (
            _f("tx_pause_rate", "sum", _nic_tx),
            _f("rx_pause_rate", "sum", _nic_rx),
            _f("tx_pause_us_rate", "sum", _nic_txd),
            _f("tx_pause_prio", "argmax", _nic_tx),
            _f("rx_pause_prio", "argmax", _nic_rx),
            _f("util_tx", "util", ["tx_bytes_rate", "speed"], 1e6),
            _f("util_rx", "util", ["rx_bytes_rate", "speed"], 1e6),
            _f("oob_rate", "sum", _oob),
            _f("retrans_rate", "sum", _retx),
            _f("pci_stall", "max", ["outbound_pci_stalled_rd", "outbound_pci_stalled_wr"]),
        ),
        "storage": (
            _f("read_latency_ms", "per_op", ["read_time_rate", "reads_rate"]),
            _f("write_latency_ms", "per_op", ["write_time_rate", "writes_rate"]),
            _f("latency_ms", "ratio_sum", ["read_time_rate", "write_time_rate", "reads_rate", "writes_rate"]),
            _f("ops_rate", "sum", ["reads_rate", "writes_rate"]),
            # Little's law: mean time an I/O spends in flight = I/O in flight / I/O rate
            _f("inflight_latency_ms", "little", ["iops_in_progress", "reads_rate", "writes_rate"]),
        ),
    }.items()
}


def known_features(measurement: str) -> frozenset[str]:
    """Every feature a rule or model may name for `measurement`: a counter `x` as its rate
    `x_rate` (per second) and its increase `x_delta` (since the previous sample)."""
    m = MEASUREMENTS[measurement]
    return frozenset(
        {f"{c}_rate" for c in m.counters} | {f"{c}_delta" for c in m.counters} | set(m.gauges)
        | set(DERIVED_FEATURES.get(measurement, {}))
    )
