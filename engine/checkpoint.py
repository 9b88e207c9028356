"""Stage checkpoints as typed, versioned, untrusted data.

A checkpoint is `zlib(msgpack([header, state]))`: the header names the format, its
version and the stage kind; the state is the stage's typed state value (msgspec
Structs of plain data, `DetectCheckpoint` or `CorrelateCheckpoint`). Checkpoints are
read back from a Kafka topic anyone with write access could fill, so `decode` treats
them as untrusted: it bounds the sizes before inflating, never unpickles, validates
every field against its type, and refuses anything else with a `CheckpointError`.

A version bump (a changed state layout) means new workers refuse older checkpoints
and rebuild their state from input (docs/design.md, "Checkpoints").
"""
from __future__ import annotations

import zlib
from typing import Any

import msgspec

from engine.correlate import CorrelatorState
from engine.detect import DetectorState
from engine.events import EventWire
from engine.features import FeatureState
from engine.order import ReorderState
from engine.types import Reject

FORMAT = "fabric-rca-checkpoint"
CHECKPOINT_VERSION = 2
MAX_CHECKPOINT_BYTES = 256 * 1024 * 1024  # compressed and inflated alike
_CHUNK = 1024 * 1024
_PICKLE_PROTOCOLS = range(2, 6)  # b"\x80" then the protocol number (what version 1 pickled)


class CheckpointError(ValueError):
    """A checkpoint this worker does not read; the message says which and why."""


class Header(msgspec.Struct, frozen=True):
    format: str
    version: int
    kind: str


class StatsState(msgspec.Struct, frozen=True):
    records: int
    lines: int
    rejects: dict[str, int]
    ignored_measurements: dict[str, int]
    ignored_fields: int
    duplicates: int
    counter_resets: int
    symptoms: int
    incidents_opened: int
    incidents_resolved: int
    watermark: float | None
    non_numeric_fields: int = 0
    merged: int = 0
    conflicting_fields: int = 0
    late: int = 0
    late_halves: int = 0
    clock_suspects: dict[str, tuple[int, float]] = {}


class DetectCheckpoint(msgspec.Struct, frozen=True, omit_defaults=True):
    """Stage 1's state. Rules, roles, config and trained models are not in it: they come
    from the worker's own files."""

    stats: StatsState
    reorder: ReorderState
    unknown_fields: dict[str, tuple[int, int]]
    next_tick: float | None
    events: list[EventWire]
    rejected: list[Reject]
    detector: DetectorState
    features: FeatureState
    scorer: bytes | None  # the anomaly scorer's own encoding of its run-time state; None without models
    told: dict[str, float] = msgspec.field(default_factory=dict)  # active symptom key -> the last sign sent


class CorrelateCheckpoint(msgspec.Struct, frozen=True):
    pending: list[EventWire]
    ticks: dict[str, float]
    times: list[float]
    applied_to: float
    duplicates: int
    late: int
    correlator: CorrelatorState


KINDS: dict[str, type] = {"detect": DetectCheckpoint, "correlate": CorrelateCheckpoint}
_ENCODER = msgspec.msgpack.Encoder()


def encode(state: DetectCheckpoint | CorrelateCheckpoint) -> bytes:
    return compress(pack(state))


def pack(state: DetectCheckpoint | CorrelateCheckpoint) -> bytes:
    """The checkpoint before `compress`. It reads the stage's live state, so it runs at
    once; `compress` (zlib lets other threads run meanwhile) may run in another thread:
    the worker's snapshots spend more time compressing than packing."""
    kind = next((k for k, t in KINDS.items() if isinstance(state, t)), None)
    if kind is None:
        raise TypeError(f"not a stage checkpoint: {type(state).__name__}")
    return _ENCODER.encode((Header(FORMAT, CHECKPOINT_VERSION, kind), state))


def compress(packed: bytes) -> bytes:
    return zlib.compress(packed, 1)  # state is repetitive (series keys, feature names)


def decode(data: bytes, kind: str, *, limit: int | None = None) -> Any:
    """The state of a checkpoint of `kind`, or CheckpointError saying why not. `limit`
    bounds the compressed and the inflated size (default MAX_CHECKPOINT_BYTES)."""
    if kind not in KINDS:
        raise CheckpointError(f"unknown checkpoint kind {kind!r} (known: {', '.join(KINDS)})")
    body = inflate(data, limit=limit)
    if body[:1] == b"\x80" and body[1:2] and body[1] in _PICKLE_PROTOCOLS:
        raise CheckpointError(f"checkpoint format 1 (pickle, fabric-rca <= 0.1) is not read by this worker "
                              f"(format {CHECKPOINT_VERSION}): rebuilding from input")
    try:
        header, raw = msgspec.msgpack.decode(body, type=tuple[Header, msgspec.Raw])
    except msgspec.DecodeError as exc:
        raise CheckpointError(f"not a fabric-rca checkpoint (no header): {exc}") from None
    if header.format != FORMAT:
        raise CheckpointError(f"not a fabric-rca checkpoint: format {header.format!r}, expected {FORMAT!r}")
    if header.version != CHECKPOINT_VERSION:
        raise CheckpointError(f"checkpoint format {header.version} is not read by this worker "
                              f"(format {CHECKPOINT_VERSION}): rebuilding from input")
    if header.kind != kind:
        raise CheckpointError(f"checkpoint of a {header.kind!r} stage, not of a {kind!r} stage")
    try:
        return msgspec.msgpack.decode(raw, type=KINDS[kind])
    except msgspec.DecodeError as exc:  # (ValidationError is one)
        raise CheckpointError(f"{kind} checkpoint format {CHECKPOINT_VERSION} does not validate: {exc}") from None


def inflate(data: bytes, *, limit: int | None = None) -> bytes:
    """zlib-inflate `data`, refusing input or output over `limit` bytes before it is all
    in memory (a small bomb inflates to gigabytes) and truncated or trailing data."""
    limit = MAX_CHECKPOINT_BYTES if limit is None else limit
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise CheckpointError(f"checkpoint is a {type(data).__name__}, not bytes")
    if len(data) > limit:
        raise CheckpointError(f"checkpoint of {len(data)} bytes is over the limit of {limit} bytes")
    if not data:
        raise CheckpointError("empty checkpoint")
    d = zlib.decompressobj()
    out, size, rest = [], 0, bytes(data)
    try:
        while True:  # (input may be used up with output still to come: call again with none)
            chunk = d.decompress(rest, _CHUNK)
            size += len(chunk)
            if size > limit:
                raise CheckpointError(f"checkpoint inflates to over the limit of {limit} bytes")
            out.append(chunk)
            rest = d.unconsumed_tail
            if d.eof or not (chunk or rest):
                break
    except zlib.error as exc:
        raise CheckpointError(f"not a fabric-rca checkpoint (not zlib data): {exc}") from None
    if not d.eof:
        raise CheckpointError(f"checkpoint is truncated ({len(data)} bytes, the compressed stream does not end)")
    if d.unused_data:
        raise CheckpointError(f"checkpoint has {len(d.unused_data)} bytes after its end")
    return b"".join(out)
