"""Process settings every fabric-rca command runs with (`cli.main.main` applies them).

Garbage collection. CPython collects its youngest generation after every 700 net new
container objects and the whole heap every few hundred thousand. The engine allocates
a few such objects per record (a metric, its tags and fields, a series key tuple) and
keeps many alive (counter memory, held records, open windows), so at the defaults a
worker spent about a tenth of its time in the collector, most of it walking the whole
heap (py-spy and gc.callbacks on bench/kafka_throughput.py's topic: 0.8 s of 6-7 s).
The engine makes next to no reference cycles: its state is plain trees of dicts,
tuples and dataclasses, freed by reference counting. Collecting after 50,000 net new
objects instead keeps the collector for the rare cycle (an exception's traceback, an
asyncio task) at about a tenth of its cost, and the memory it may hold meanwhile at a
few MB.
"""
from __future__ import annotations

import gc

GC_THRESHOLDS = (50_000, 20, 20)


def tune_gc() -> None:
    gc.set_threshold(*GC_THRESHOLDS)
