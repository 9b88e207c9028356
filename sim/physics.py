"""Normal behaviour derived from routed load: bytes, packets, queues, bursts, FEC noise,
storage operations. Faults add their symptoms on top of this."""
from __future__ import annotations

import numpy as np

from .tick import NICF, SP, SQ, ST, Tick
from .traffic import Loads

STORAGE_OP_BYTES = 256 * 1024
NORMAL_LATENCY_MS = 0.5


def baseline(tick: Tick, loads: Loads) -> None:
    _switch(tick, loads)
    _nics(tick, loads)
    _storage(tick, loads)


def _switch(tick: Tick, loads: Loads) -> None:
    f, dt, rng, phys = tick.fabric, tick.dt, tick.nrng, tick.phys
    n, buffer = len(f.ports), phys.buffer_bytes
    up = tick.port_up()
    out_b, in_b = loads.port_out * dt, loads.port_in * dt
    out_p, in_p = out_b / phys.mtu_bytes, in_b / phys.mtu_bytes
    sp, sq = tick.sp, tick.sq
    sp[:, SP["if_in_octets"]] = in_b
    sp[:, SP["if_out_octets"]] = out_b
    sp[:, SP["if_in_ucast_pkts"]] = in_p
    sp[:, SP["if_out_ucast_pkts"]] = out_p
    corr = rng.integers(0, phys.fec_noise + 1, n) * up
    sp[:, SP["if_in_fec_correctable_frames"]] = corr * dt
    sp[:, SP["if_in_fec_symbol_errors"]] = (2 * corr + rng.integers(0, 11, n) * up) * dt
    util = loads.port_out / f.spec.line_bytes
    # A queue only builds where arrivals exceed line rate (faults model that); near line
    # rate a few marks, none below the knee (95 % by default).
    hot = np.clip((util - phys.ecn_knee) / 0.05, 0.0, None)
    ecn = out_p * 0.0002 * hot
    sp[:, SP["ecn_marked_packets"]] = ecn
    sq[:, SQ["packets"]] = out_p
    sq[:, SQ["bytes"]] = out_b
    sq[:, SQ["wred_ecn_marked_packets"]] = ecn
    occ = (1024 + 200e3 * (util / 0.7) ** 3 * rng.uniform(0.5, 1.5, n)) * up
    tick.occ = np.minimum(occ, 0.25 * buffer)
    wm = tick.occ * rng.uniform(1.05, 1.6, n)
    burst = (rng.random(n) < dt / phys.burst_every_s) & up
    tick.wm = np.where(burst, rng.uniform(0.2, 0.4, n) * buffer, wm)


def _nics(tick: Tick, loads: Loads) -> None:
    dt, rng, nic = tick.dt, tick.nrng, tick.nic
    n = len(tick.fabric.endpoints)
    up = tick.nic_up()
    rx_b, tx_b = loads.nic_rx * dt, loads.nic_tx * dt
    nic[:, NICF["rx_bytes"]] = rx_b
    nic[:, NICF["tx_bytes"]] = tx_b
    nic[:, NICF["rx_packets"]] = rx_b / tick.phys.mtu_bytes
    nic[:, NICF["tx_packets"]] = tx_b / tick.phys.mtu_bytes
    nic[:, NICF["rx_bits_phy"]] = rx_b * 8
    nic[:, NICF["rx_corrected_bits_phy"]] = rng.integers(0, tick.phys.fec_noise + 1, n) * up * dt
    tick.pci_rd = rng.uniform(0.0, 2.0, n)
    tick.pci_wr = rng.uniform(0.0, 2.0, n)


def _storage(tick: Tick, loads: Loads) -> None:
    """Storage reads leave the storage host (its NIC tx), writes arrive (its NIC rx)."""
    stor = [e.index for e in tick.fabric.storage]
    if not stor:
        return
    dt, st = tick.dt, tick.st
    read_b, write_b = loads.nic_tx[stor] * dt, loads.nic_rx[stor] * dt
    reads, writes = read_b / STORAGE_OP_BYTES, write_b / STORAGE_OP_BYTES
    lat = tick.stor_latency_ms
    st[:, ST["reads"]] = reads
    st[:, ST["writes"]] = writes
    st[:, ST["read_bytes"]] = read_b
    st[:, ST["write_bytes"]] = write_b
    st[:, ST["read_time"]] = reads * lat
    st[:, ST["write_time"]] = writes * lat
    inflight = (reads + writes) / dt * NORMAL_LATENCY_MS / 1000 * tick.stor_inflight_mult
    inflight *= tick.nrng.uniform(0.8, 1.2, len(stor))
    tick.iops = np.rint(np.maximum(inflight, 1.0))
    st[:, ST["io_time"]] = 1000 * dt * (1 - np.exp(-tick.iops / 20))
