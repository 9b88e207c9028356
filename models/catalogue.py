"""What the anomaly models look at: one class per kind of entity, as data.

Each class reads one measurement; its features are ones where *more* is worse (errors,
pause, stalls, latency, occupancy), so a window is anomalous only when a feature rises
above that entity's normal, never when it falls. Each feature names the symptom it
becomes when it drives an anomaly: the rule symptom of the same physics, so a model
symptom enters correlation and ranking exactly as a rule symptom would (rank.py's
`explain` reads the symptom kind and family, not who raised it).

`floor` is the smallest change that can matter for the feature (in its own unit), so an
entity whose feature never moved in training (MAD 0) does not turn one stray error into
an infinite score. It is deliberately small: each entity's own spread (its MAD) sets the
scale wherever the feature varies. `rel` is the same idea relative to the entity's own
level: its scale is never below `rel` times its median (REL_FLOOR, 5 %), so a feature
that sat flat at a large value in training (a port's steady corrected-FEC floor of 10^5
frames/s, MAD 0) scores a 2 % wobble as 0.4, not 50, while a rise to several times its
level still scores high.

Every feature is scored at two horizons: its 5 s window mean, for faults that arrive at
once, and an exponentially weighted mean over about a minute of windows (`_ewm`), whose
lower noise shows a slow drift long before any single window stands out.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelFeature:
    name: str  # a feature of engine.features (e.g. "if_in_errors_rate", "pci_stall")
    symptom: str  # symptom kind it raises when it drives an anomaly
    family: str
    floor: float
    opens_incident: bool = True  # as the rule of the same symptom
    rel: float = 0.0  # relative spread floor (set to REL_FLOOR by `_f`)
    side: str = ""  # what it witnesses, for a class's `agree` (storage: "read", "write"; "": no side of its own)


@dataclass(frozen=True)
class ModelClass:
    name: str
    measurement: str
    entity_kind: str
    entity: str  # template over tags, as in the rules (the symptom's entity)
    features: tuple[ModelFeature, ...]
    agree: int = 1  # sides whose features must be up at once for a strong window (models.scorer)

    @property
    def feature_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.features)

    @property
    def floors(self) -> tuple[float, ...]:
        """Each feature's least spread (its scale floor): the smoothed mean's least bound."""
        return tuple(f.floor for f in self.features)

    @property
    def model_features(self) -> tuple[str, ...]:
        """The columns a model of this class scores: each feature at both horizons."""
        return self.feature_names + tuple(f"{n}{EWM_SUFFIX}" for n in self.feature_names)


EWM_SUFFIX = "_ewm"
REL_FLOOR = 0.05  # a feature's scale is at least this share of its entity's median
EWM_ALPHA = 1 / 12  # weight of the newest window: about a minute of 5 s windows
EWM_CLIP = 3.0  # a window moves the smoothed mean by at most this many of its usual steps (models.windows.Smoother)
# Spread of the smoothed mean of white noise, as a share of one window's spread: the
# smoothed horizon's floor is the window floor times this, and its scale is never taken
# below the window scale times this (see models.train).
EWM_NOISE = (EWM_ALPHA / (2 - EWM_ALPHA)) ** 0.5


def _f(name, symptom, family, floor, opens=True, rel=REL_FLOOR, side="") -> ModelFeature:
    return ModelFeature(name, symptom, family, float(floor), opens, float(rel), side)


CLASSES: dict[str, ModelClass] = {
    c.name: c
    for c in (
        ModelClass("switch_port", "switch_port", "interface", "{host}:{interface}", (
            _f("if_in_errors_rate", "rx_errors", "errors", 0.5),
            _f("if_in_fec_not_correctable_frames_rate", "rx_errors", "errors", 0.5),
            _f("if_in_fec_correctable_frames_rate", "rx_errors", "errors", 2),
            _f("if_in_fec_symbol_errors_rate", "rx_errors", "errors", 5),
            # A switch port's pause and marks are the workload's (collective phases, a
            # ramp) or relayed from elsewhere (a victim, never a pause origin): evidence.
            _f("pfc_tx_pkts_rate", "pfc_pause_tx", "pfc", 2, opens=False),
            _f("pfc_rx_pkts_rate", "pfc_pause_rx", "pfc", 2, opens=False),
            _f("ecn_marked_packets_rate", "ecn_marking", "congestion", 50, opens=False),
        )),
        ModelClass("queue", "switch_queue", "interface", "{host}:{interface}", (
            # A queue that fills without marking or dropping is a busy link that drops
            # nothing (a job ramping up): healthy, contract section 8. Evidence only.
            _f("curr_occupancy_bytes", "queue_congested", "congestion", 20_000, opens=False),
            _f("dropped_packets_rate", "microburst", "microburst", 1),
        )),
        ModelClass("nic", "nic_port", "interface", "{host}:{interface}", (
            _f("oob_rate", "nic_out_of_buffer", "nic", 5),
            _f("rx_discards_phy_rate", "nic_discards", "nic", 5),
            _f("pci_stall", "nic_pcie_stall", "nic", 0.01),
            _f("retrans_rate", "nic_retransmit", "nic", 0.5, opens=False),
            _f("tx_pause_rate", "pfc_pause_tx", "pfc", 2),
            _f("rx_crc_errors_phy_rate", "rx_errors", "errors", 0.5),
            _f("rx_symbol_err_phy_rate", "rx_errors", "errors", 5),
        )),
        ModelClass("storage", "storage", "storage", "{host}", (
            _f("read_latency_ms", "storage_latency", "storage", 0.01, side="read"),
            _f("write_latency_ms", "storage_latency", "storage", 0.01, side="write"),
            # Not iops_in_progress itself: in-flight I/O is rate x latency (Little's law), so
            # it rises with any burst of load (a checkpoint) without the storage being slow.
            # Divided by the I/O rate it is the latency again, measured another way (the
            # time an I/O spends in flight), with its own noise: a second look at one cause.
            # It is every I/O's time, reads and writes mixed, so slow reads alone raise it
            # too: it witnesses no side of its own.
            _f("inflight_latency_ms", "storage_latency", "storage", 0.01),
        ), agree=2),  # a slow target slows reads and writes; a scrub only the reads
    )
}

BY_MEASUREMENT: dict[str, ModelClass] = {c.measurement: c for c in CLASSES.values()}


def features_needed(measurement: str) -> frozenset[str]:
    c = BY_MEASUREMENT.get(measurement)
    return frozenset(c.feature_names) if c else frozenset()
