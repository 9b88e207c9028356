"""Which shard owns a device, and how a shard reads the lines of the others' devices.

A replay on several cores (engine/shards.py) runs one `DetectStage` per shard; each reads
every line, orders every record and detects only on its own devices (`Shard`). A record of
another shard's device is needed for its series and time alone, so a common line of line
protocol of such a device is skimmed (`Skimmer`): its fields are checked but not read, and
read whole (`SkimmedFields`) only if the order compares them (docs/design.md, "Replay on
several cores").
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Callable, Mapping

from contract.measurements import JOB_MEASUREMENT
from engine.mapping import MappingSet
from engine.normalize import LP_FIRST, line_head, skim
from engine.types import Metric, Reject

@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count` of a fabric's devices: which devices' records a stage
    detects on when several stages read the same lines (`engine/shards.py`). A device is
    in one shard (`assigned`, else crc32 of its name); records without a host, and job
    records, are in shard 0. A rule's entity always holds the record's `{host}` (rules/loader.py), so
    every symptom comes from one device's records and no two shards raise the same one."""

    index: int
    count: int
    assigned: dict[str, int] = field(default_factory=dict)  # device -> shard (others: crc32)

    def __post_init__(self) -> None:
        if not 0 <= self.index < self.count:
            raise ValueError(f"shard {self.index} of {self.count} does not exist")

    @staticmethod
    def balance(roles: dict[str, str], count: int) -> dict[str, int]:
        """The topology's devices dealt within each role (sorted by name), so that each
        shard has about as many spines, leaves, hosts and storage hosts, and as many
        records, as every other (every shard reads and skims alike: DetectStage)."""
        by_role: dict[str, list[str]] = {}
        for device, role in roles.items():
            by_role.setdefault(role, []).append(device)
        dealt = [0] * count
        out = {}
        for role in sorted(by_role):
            for device in sorted(by_role[role]):
                k = min(range(count), key=lambda i: (dealt[i], i))
                out[device] = k
                dealt[k] += 1
        return out

    def owner(self) -> Callable[[Metric], bool]:
        """The test of a record's device, memoised per device."""
        index, count = self.index, self.count
        memo = {device: k == index for device, k in self.assigned.items()}

        def mine(m: Metric) -> bool:
            host = m.tags.get("host")
            if host is None or m.name == JOB_MEASUREMENT:
                return index == 0
            own = memo.get(host)
            if own is None:
                own = memo[host] = zlib.crc32(host.encode()) % count == index
            return own
        return mine


class SkimmedFields(Mapping):
    """The fields of a skimmed record (`Skimmer.parse`): its line, read whole
    (parsed and mapped as `DetectStage.feed` would) only when they are first asked for.
    Another shard's record is only ordered, and the order reads its fields only to tell
    a duplicate from the other half of a sample or from a record too late: rare, so
    nearly every skimmed line is never read, and the counts are those of a whole read."""

    __slots__ = ("_line", "_read", "_fields")

    def __init__(self, line: bytes, read: Callable[[bytes], dict]):
        self._line, self._read, self._fields = line, read, None

    def _whole(self) -> dict:
        fields = self._fields
        if fields is None:
            fields = self._fields = self._read(self._line)
            self._line = self._read = None
        return fields

    def __getitem__(self, key: str) -> object:
        return self._whole()[key]

    def __iter__(self):
        return iter(self._whole())

    def __len__(self) -> int:
        return len(self._whole())

    def keys(self):
        return self._whole().keys()

    def items(self):
        return self._whole().items()

    def values(self):
        return self._whole().values()

    @property
    def read(self) -> bool:
        """Whether the line was read whole (for tests)."""
        return self._fields is not None


class Skimmer:
    """A shard stage's parse (`parse`, in place of its parser's): a common line of line
    protocol of a contract measurement on another shard's device, or of one a mapping
    converts whichever its fields, is skimmed (engine.normalize.skim: its fields checked
    but not read, about a third of a parse), and not mapped. Its record is only ordered,
    for its series and time; its fields (`SkimmedFields`) are read whole only if the order
    compares them with its series' other records at one time (a duplicate, the other
    half, too late). So what every shard counts of what was read (records, rejects,
    duplicates, halves, mapped records: `stats`) is what a whole read counts."""

    def __init__(self, parse_whole: Callable, *, mine: Callable[[Metric], bool], mappings: MappingSet,
                 known: Mapping[str, object], stats) -> None:
        self._parse_whole = parse_whole  # the stage's parser: every line not skimmed
        self._mine, self._mappings, self._known, self._stats = mine, mappings, known, stats
        self._heads: dict[bytes, tuple | bool] = {}  # head -> (name, tags, series, mapping) skimmed, or False
        self._read = self._whole_fields  # (bound once: every skimmed record holds it)

    def parse(self, line: bytes | str) -> tuple[list[Metric], list[Reject]]:
        i = line.find(b" ") if line.__class__ is bytes else -1
        if i <= 0 or line[0] not in LP_FIRST:  # (not line protocol: JSON, a batch, a str)
            return self._parse_whole(line)
        head = line[:i]
        seen = self._heads.get(head)
        if seen is None:
            seen = self._head(head)
        if seen is not False:
            ts = skim(line)
            if ts is not None:
                if seen[3]:
                    self._stats.mapped[seen[3]] += 1
                return [Metric(seen[0], seen[1], SkimmedFields(line, self._read), ts, seen[2])], []
        return self._parse_whole(line)

    def _whole_fields(self, line: bytes) -> dict:
        """The fields of a skimmed line as a whole read gives them: parsed, then mapped."""
        m = self._parse_whole(line)[0][0]
        if m.name not in self._known:
            m = self._mappings.map(m)[0]
        return m.fields

    def _head(self, head: bytes) -> tuple[str, dict[str, str], str, str] | bool:
        """(name, tags, series, the mapping's name or "") of a head whose lines are
        skimmed, else False; remembered."""
        seen = line_head(head)
        mapping = ""
        if seen is not None and seen[0] not in self._known:  # (its mapping's, if its fields do not choose it)
            seen = self._mappings.series_of(Metric(seen[0], seen[1], {}, 0.0, seen[2]))
            mapping = seen[3] if seen is not None else ""
        if seen is None or seen[0] not in self._known or self._mine(Metric(seen[0], seen[1], {}, 0.0, seen[2])):
            seen = False
        else:
            seen = (seen[0], seen[1], seen[2], mapping)
        if len(self._heads) >= 200_000:  # (as the parser's memo: hostile series cannot grow it)
            self._heads.clear()
        self._heads[head] = seen
        return seen
