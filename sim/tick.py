"""Per-interval state: the conditions faults set and the deltas and gauges they produce.

One Tick covers the interval (t - dt, t] and ends with a sample at t. Faults first set
conditions (rate factors, link and switch state), traffic and physics derive the
normal deltas from them, then faults add their own symptoms.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np

from .fabric import Fabric, Physics

# Counter fields that can move (switch_port's other pfc priorities stay at 0).
SP_FIELDS = (
    "if_in_octets", "if_out_octets", "if_in_ucast_pkts", "if_out_ucast_pkts",
    "if_in_errors", "if_in_discards", "if_out_discards",
    "if_in_fec_correctable_frames", "if_in_fec_not_correctable_frames",
    "if_in_fec_symbol_errors",
    "pfc_3_rx_pkts", "pfc_3_tx_pkts", "pfc_3_rx_pause_duration_us",
    "pfc_3_tx_pause_duration_us",
    "wred_dropped_packets", "ecn_marked_packets", "carrier_changes",
)
SQ_FIELDS = (
    "packets", "bytes", "dropped_packets", "dropped_bytes", "wred_ecn_marked_packets",
    "wred_dropped_packets", "pfcwd_deadlock_detected", "pfcwd_deadlock_restored",
)
NIC_FIELDS = (
    "rx_bytes", "tx_bytes", "rx_packets", "tx_packets",
    "rx_prio3_pause", "tx_prio3_pause", "rx_prio3_pause_duration", "tx_prio3_pause_duration",
    "tx_pause_storm_warning_events", "tx_pause_storm_error_events",
    "rx_discards_phy", "tx_discards_phy", "rx_out_of_buffer", "rx_crc_errors_phy",
    "rx_symbol_err_phy", "rx_corrected_bits_phy", "rx_bits_phy", "link_down_events_phy",
    "np_ecn_marked_roce_packets", "np_cnp_sent", "rp_cnp_handled", "out_of_buffer",
    "out_of_sequence", "packet_seq_err", "local_ack_timeout_err",
)
ST_FIELDS = ("reads", "writes", "read_bytes", "write_bytes", "read_time", "write_time", "io_time")

SP = {f: i for i, f in enumerate(SP_FIELDS)}
SQ = {f: i for i, f in enumerate(SQ_FIELDS)}
NICF = {f: i for i, f in enumerate(NIC_FIELDS)}
ST = {f: i for i, f in enumerate(ST_FIELDS)}


@dataclass
class Tick:
    fabric: Fabric
    i: int
    t: float  # sample time, epoch s
    dt: float
    rng: random.Random
    nrng: np.random.Generator
    phys: Physics = field(default_factory=Physics)
    # conditions
    tx_factor: np.ndarray = field(init=False)
    rx_factor: np.ndarray = field(init=False)
    link_frac: np.ndarray = field(init=False)  # fraction of the interval a host link is up
    link_state: np.ndarray = field(init=False)  # host link up at the sample
    uplink_state: np.ndarray = field(init=False)  # [leaf, spine]
    spine_up: np.ndarray = field(init=False)
    leaf_up: np.ndarray = field(init=False)
    stor_latency_ms: np.ndarray = field(init=False)
    stor_inflight_mult: np.ndarray = field(init=False)
    # outputs
    sp: np.ndarray = field(init=False)
    sq: np.ndarray = field(init=False)
    nic: np.ndarray = field(init=False)
    st: np.ndarray = field(init=False)
    occ: np.ndarray = field(init=False)
    wm: np.ndarray = field(init=False)
    stormed: np.ndarray = field(init=False)
    pci_rd: np.ndarray = field(init=False)
    pci_wr: np.ndarray = field(init=False)
    iops: np.ndarray = field(init=False)
    events: list[dict] = field(default_factory=list)
    silent: set[str] = field(default_factory=set)  # switches that send no records
    resets: set[int] = field(default_factory=set)  # switch ports whose counters reset to 0

    def __post_init__(self) -> None:
        s = self.fabric.spec
        n_e, n_sp, n_st = len(self.fabric.endpoints), len(self.fabric.ports), s.storage_hosts
        self.tx_factor = np.ones(n_e)
        self.rx_factor = np.ones(n_e)
        self.link_frac = np.ones(n_e)
        self.link_state = np.ones(n_e, dtype=bool)
        self.uplink_state = np.ones((s.leaves, s.spines), dtype=bool)
        self.spine_up = np.ones(s.spines, dtype=bool)
        self.leaf_up = np.ones(s.leaves, dtype=bool)
        self.stor_latency_ms = self.nrng.uniform(*self.phys.storage_latency_ms, n_st)
        self.stor_inflight_mult = np.ones(n_st)
        self.sp = np.zeros((n_sp, len(SP_FIELDS)))
        self.sq = np.zeros((n_sp, len(SQ_FIELDS)))
        self.nic = np.zeros((n_e, len(NIC_FIELDS)))
        self.st = np.zeros((n_st, len(ST_FIELDS)))
        self.occ = np.zeros(n_sp)
        self.wm = np.zeros(n_sp)
        self.stormed = np.zeros(n_sp, dtype=bool)
        self.pci_rd = np.zeros(n_e)
        self.pci_wr = np.zeros(n_e)
        self.iops = np.zeros(n_st)

    @property
    def t0(self) -> float:
        return self.t - self.dt

    # --- derived link state ----------------------------------------------------------
    def alive(self) -> np.ndarray:
        """[leaf, spine] uplinks that carry traffic in this interval."""
        return self.uplink_state & self.spine_up[None, :] & self.leaf_up[:, None]

    def port_up(self) -> np.ndarray:
        f = self.fabric
        up = np.empty(len(f.ports), dtype=bool)
        host_ok = self.link_state & self.leaf_up[f.leaf_of]
        up[f.host_port] = host_ok
        alive = self.alive()
        up[f.up_port] = alive
        up[f.down_port] = alive.T
        return up

    def nic_up(self) -> np.ndarray:
        return self.link_state & self.leaf_up[self.fabric.leaf_of]

    # --- symptom helpers ---------------------------------------------------------------
    def sp_add(self, port: int, name: str, value: float) -> None:
        self.sp[port, SP[name]] += value

    def sq_add(self, port: int, name: str, value: float) -> None:
        self.sq[port, SQ[name]] += value

    def nic_add(self, endpoint: int, name: str, value: float) -> None:
        self.nic[endpoint, NICF[name]] += value

    def within(self, start: float, end: float) -> float:
        """Fraction of this interval inside [start, end)."""
        lo, hi = max(self.t0, start), min(self.t, end)
        return max(0.0, hi - lo) / self.dt
