"""The ports the core is handed, as Protocols: what the detect stage needs of an anomaly
scorer. The implementation (`models.scorer.ModelScorer`, built by the composition root
from trained models) lives outside `engine/`, which never imports `models/`."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Callable, Protocol

from engine.maintenance import Window
from engine.types import Symptom


class AnomalyScorer(Protocol):
    """Scores the features of the records the detector reads and raises symptoms, ticked
    with the rules on event time. One instance per detect stage: it holds run-time state."""

    def features_needed(self, measurement: str) -> frozenset[str]:
        """The features it reads of a record of `measurement` (empty: none)."""

    def vector_names(self, measurement: str) -> tuple[str, ...]:
        """The order of the features `observe` takes for `measurement`."""

    def adder(self, series: str) -> Callable[[tuple], None] | None:
        """A seen series' bound accumulator (a fast path for `observe`), or None."""

    def observe(self, measurement: str, series: str, tags: dict, ts: float, vec: tuple) -> None: ...

    def advance(self, now: float) -> None: ...

    def drain(self) -> list[Symptom]: ...

    def live(self) -> Sequence[Symptom]:
        """Its symptoms active now: refreshed to the correlator as the rules' are, so
        their persistence (contract section 8) is seen while they last."""

    def finish(self) -> None: ...

    def opens_incident(self, rule: str) -> bool:
        """Whether a symptom of this scorer's `rule` may open an incident."""

    def checkpoint(self) -> bytes:
        """Its run-time state, encoded (the trained models are not in it)."""

    def resume(self, data: bytes) -> None:
        """Continue from `checkpoint()`'s bytes; ValueError (nothing changed) if they do
        not fit."""


class MaintenanceSource(Protocol):
    """The maintenance windows in force, as data (`api.maintenance.StoreWindows` reads them
    from the store, refreshed in its own thread; the correlator never waits on a database)."""

    def windows(self) -> Sequence[Window]: ...
