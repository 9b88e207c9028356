"""Put records back in event-time order behind a watermark taken from the fleet; drop
duplicates, merge halves, quarantine records from the future.

Contract section 1: records arrive late and out of order by up to 3 of their series'
sample intervals (1-60 s, inferred per series), and one device may lag the others by as
much. The reorderer:

- keeps the **fleet's time** `fleet`: the lower median of the devices' newest event times
  (a device votes with its newest accepted record, or with its newest quarantined one
  while it sends nothing acceptable). One device, or one record, cannot move it; a fabric
  whose clocks all jump moves it once more than half the devices have jumped. Devices
  not heard for `stale_checks` release checks stop voting (a switch that died).
- weighs that vote by history: only **established** devices vote, those whose newest
  accepted time has advanced `history_samples` times over at least `history_s` of event
  time (a few samples at their interval). A burst of never-seen hosts, however many, all
  stamped with one time, cannot move or freeze the time of the devices with a history;
  while fewer than `quorum_devices` are established (a fabric starting, every device
  new) all of them vote, so that one device alone never sets the time.
- releases, in time order (a stable sort of arrivals), the records up to the release
  watermark `fleet - lateness_s`: fast series are never held for slow series' lateness.
- accepts a record behind the watermark while it is within its own series' bound,
  clamp(lateness_intervals x interval, lateness_s, max_lateness_s) behind the fleet
  ("late": released with the next release, ahead of the in-order batch; records after
  that bound are rejected `too_late`).
- quarantines a record more than max(lateness_intervals x interval, min_ahead_s) +
  skew_s ahead of the fleet: rejected `future_timestamp`, counted per device
  (`clock_suspects`), never moving the watermark.
- before the fleet is known (warm-up: fewer than `quorum_devices` devices, and no
  device with `lateness_s` of consistent history) everything is held; no single record
  sets the time.
- a record whose series and time were taken already is a duplicate when its fields add
  nothing new; otherwise it is the other half of that sample and is merged into it
  (union of fields; on a conflict the later arrival wins, counted `conflicting_fields`).

Held records are kept sorted; new arrivals wait in arrival order and are sorted only
when records are released (nearly in order: about linear for Python's sort). Per-series
intervals and per-device times are updated from the arrivals at each release check, not
per record. All state is plain data (floats, strs, lists, dicts) for checkpoints.
"""
from __future__ import annotations

from bisect import bisect_right
from itertools import islice
from dataclasses import dataclass, field
from operator import attrgetter

import msgspec

from engine.types import Metric, Reject

_ts = attrgetter("ts")
INF = float("inf")
GAPS = 5  # gaps per interval estimate (their median)


class HeldRecord(msgspec.Struct, frozen=True, array_like=True):
    """A record held for release, as checkpoint data."""

    name: str
    tags: dict[str, str]
    fields: dict[str, bool | int | float | str]
    ts: float
    series: str

    @classmethod
    def of(cls, m: Metric) -> "HeldRecord":
        """`m` as checkpoint data, sharing its tags and fields (a later half merges into
        them): a stage's state is encoded at once (`engine.checkpoint.pack`), and copying
        every held record's dicts was half the time of building a detect stage's state."""
        return cls(m.name, m.tags, m.fields, m.ts, m.series)

    def metric(self) -> Metric:
        return Metric(self.name, dict(self.tags), dict(self.fields), self.ts, self.series)


class ReorderState(msgspec.Struct, frozen=True):
    """The reorderer's state (a checkpoint): its settings come from the worker's config."""

    watermark: float
    fleet: float
    duplicates: int
    merged: int
    conflicting_fields: int
    late: int
    late_halves: int
    clock_suspects: dict[str, tuple[int, float]]  # device -> (records quarantined, most seconds ahead)
    held: list[HeldRecord]
    new: list[HeldRecord]
    late_records: list[HeldRecord]
    scanned: int
    newest: float
    high: float
    warm_at: int
    next_check: float
    checks: int
    # device -> (newest accepted time, check last heard, first accepted time, times the newest advanced)
    devices: dict[str, tuple[float, int, float, int]]
    claims: dict[str, float]
    series: dict[str, list[float]]  # series -> [newest time, interval, gaps...]
    max_interval: float
    seen: list[HeldRecord]  # every (series, time) taken since the horizon, with its fields; oldest first
    prune_at: float
    horizon: float


@dataclass
class Reorderer:
    lateness_s: float = 5.0  # release delay, and the least lateness any series is allowed
    release_step_s: float = 0.25  # release at most this often in event time (batching)
    lateness_intervals: float = 3.0  # a series may be this many of its intervals late (0: lateness_s only)
    max_lateness_s: float = 180.0
    min_ahead_s: float = 10.0  # a record may lead the fleet by max(intervals, this) ...
    skew_s: float = 30.0  # ... plus this clock-skew allowance before it is quarantined
    quorum_devices: int = 3  # devices to hear before the fleet's time is trusted
    stale_checks: int = 120  # release checks (about stale_checks x release_step_s of event time)
    default_interval_s: float = 60.0  # a series' interval before it is known (generous both ways)
    history_samples: int = 3  # a device votes once its newest time advanced this often ...
    history_s: float = 10.0  # ... over at least this much event time (established)
    watermark: float = float("-inf")
    fleet: float = float("-inf")
    duplicates: int = 0
    merged: int = 0
    conflicting_fields: int = 0
    late: int = 0  # records taken behind the release watermark, within their series' bound
    late_halves: int = 0  # halves arriving after their sample was released (released alone)
    stats: object = None  # when given (a pipeline Stats), counts go into it too
    # When a list: (host, series) of each series whose interval was estimated anew (a
    # replay's reading stage hands the estimates to the shards that detect: engine/shards.py).
    estimated: list | None = None
    # device -> [count, seconds ahead of the fleet at most]
    clock_suspects: dict = field(default_factory=dict)
    _held: list = field(default_factory=list)  # sorted by time, stable
    _new: list = field(default_factory=list)  # arrived since the last release, in arrival order
    _late: list = field(default_factory=list)  # taken behind the watermark, not yet released
    _scanned: int = 0  # records of `_new` already counted into `_devices` / `_series`
    _newest: float = float("-inf")
    _high: float = float("inf")  # fleet + min_ahead_s + skew_s: above it, a record is looked at closer
    _warm_at: int = 0  # warm-up: arrivals before the next attempt
    _next_check: float = float("-inf")
    _checks: int = 0
    # host -> [newest accepted time, check last heard, first accepted time, times the newest advanced]
    _devices: dict = field(default_factory=dict)
    _claims: dict = field(default_factory=dict)  # host -> newest quarantined time (while nothing accepted)
    _series: dict = field(default_factory=dict)  # series -> [newest time, interval (0: unknown), gaps...]
    _max_interval: float = 0.0
    # (series, ts) -> the record taken (for merging halves); older than `_horizon` forgotten.
    _seen: dict = field(default_factory=dict)
    _prune_at: float = float("-inf")
    _horizon: float = float("-inf")

    def push(self, metrics: list[Metric], rejects: list[Reject]) -> list[Metric]:
        """Add records; return those now behind the watermark, in time order."""
        seen, new = self._seen, self._new
        newest, low, high = self._newest, self.watermark, self._high
        for m in metrics:
            ts = m.ts
            if ts <= low or ts > high:  # (rare) behind the watermark, or ahead of the fleet
                self._odd(m, rejects)
                continue
            first = seen.setdefault((m.series, ts), m)
            if first is not m:
                self._same_sample(first, m)
                continue
            new.append(m)
            if ts > newest:
                newest = ts
        if newest > self._newest:
            self._newest = newest
        if self._newest >= self._next_check:
            return self._check(rejects)
        return []

    # --- the rare records ----------------------------------------------------------------
    def _odd(self, m: Metric, rejects: list[Reject]) -> None:
        ts, fleet = m.ts, self.fleet
        if fleet == -INF:  # warm-up: only ts > inf or ts <= -inf get here
            rejects.append(Reject("bad_timestamp", f"event time {ts!r} is not finite", m.series))
            return
        interval = self._interval(m.series)
        if ts > fleet:
            ahead = max(self.lateness_intervals * interval, self.min_ahead_s) + self.skew_s
            if ts - fleet > ahead:
                self._refresh()  # the fleet as of now, not of the last release check
            if ts - self.fleet > ahead:
                self._quarantine(m, rejects)
                return
            first = self._seen.setdefault((m.series, ts), m)
            if first is not m:
                self._same_sample(first, m)
                return
            self._new.append(m)
            if ts > self._newest:
                self._newest = ts
            return
        bound = self._bound(interval)
        key = (m.series, ts)
        first = self._seen.get(key) if ts >= self._horizon else None
        if ts < fleet - bound:
            if first is not None and m.fields.items() <= first.fields.items():
                self._duplicate()
            else:
                rejects.append(Reject("too_late", f"event time {ts:.3f} is {fleet - ts:.3f} s behind the fleet's "
                                      f"time (the bound of this series: {bound:.0f} s)", m.series))
            return
        if first is not None:
            if any(x is first for x in self._late) or m.fields.items() <= first.fields.items():
                self._same_sample(first, m)
                return
            self._count("late_halves")  # the other half of a sample already released: released alone
        self._seen[key] = m
        self._late.append(m)
        self._count("late")
        self._learn(m)  # (a lagging series learns its interval from its late records too)

    def _learn(self, m: Metric) -> None:
        host = m.tags.get("host", "")  # (a job placement has no host: it votes as "")
        d = self._devices.get(host)
        if d is None:
            self._devices[host] = [m.ts, self._checks, m.ts, 0]
        else:
            if m.ts > d[0]:
                d[0] = m.ts
                d[3] += 1
            d[1] = self._checks
        s = self._series.get(m.series)
        if s is None:
            self._series[m.series] = [m.ts, 0.0]
        elif m.ts > s[0]:
            s.append(m.ts - s[0])
            s[0] = m.ts
            if len(s) > 2 + GAPS - 1 or not s[1]:
                self._estimate(s, host, m.series)

    def _quarantine(self, m: Metric, rejects: list[Reject]) -> None:
        host = m.tags.get("host", "")
        self._scan()  # earlier arrivals first: they must not clear this claim
        ahead = m.ts - self.fleet
        rejects.append(Reject("future_timestamp", f"event time {m.ts:.3f} is {ahead:.0f} s ahead of the fleet's "
                              f"time {self.fleet:.3f}: device {host}'s clock?", m.series))
        if m.ts > self._claims.get(host, -INF):
            self._claims[host] = m.ts
        for book in (self.clock_suspects, getattr(self.stats, "clock_suspects", None)):
            if book is not None:
                entry = book.setdefault(host, [0, 0.0])
                entry[0] += 1
                entry[1] = max(entry[1], round(ahead, 3))
        self._next_check = -INF  # a fleet whose clocks jumped: see whether enough devices agree

    def _same_sample(self, first: Metric, m: Metric) -> None:
        """A second record of a series and time: a duplicate, or the other half."""
        fields, more = first.fields, m.fields
        if more.items() <= fields.items():
            self._duplicate()
            return
        conflicts = sum(1 for k, v in more.items() if k in fields and fields[k] != v)
        first.fields = {**fields, **more}  # (a new dict: the parser's may be shared by nobody, but be safe)
        self._count("merged")
        if conflicts:
            self._count("conflicting_fields", conflicts)

    def _duplicate(self) -> None:
        self.duplicates += 1
        if self.stats is not None:
            self.stats.duplicates += 1

    def _count(self, name: str, n: int = 1) -> None:
        setattr(self, name, getattr(self, name) + n)
        if self.stats is not None and hasattr(self.stats, name):
            setattr(self.stats, name, getattr(self.stats, name) + n)

    # --- intervals and the fleet's time -------------------------------------------------
    def interval(self, series: str) -> float | None:
        """The series' sample interval as estimated from its arrivals (the median of its
        recent gaps, 1-60 s), or None before its second record. A record released for
        detection was counted into its series' estimate before its release."""
        s = self._series.get(series)
        return s[1] if s is not None and s[1] > 0 else None

    def _interval(self, series: str) -> float:
        s = self._series.get(series)
        return s[1] if s is not None and s[1] > 0 else self.default_interval_s

    def _bound(self, interval: float) -> float:
        return min(max(self.lateness_intervals * interval, self.lateness_s), max(self.max_lateness_s, self.lateness_s))

    def _scan(self) -> None:
        """Count the arrivals since the last check into device times and series intervals."""
        new, devices, series, claims = self._new, self._devices, self._series, self._claims
        check = self._checks
        for m in islice(new, self._scanned, None):
            ts = m.ts
            host = m.tags.get("host", "")
            d = devices.get(host)
            if d is None:
                devices[host] = [ts, check, ts, 0]
            else:
                if ts > d[0]:
                    d[0] = ts
                    d[3] += 1
                d[1] = check
            if claims and host in claims:
                del claims[host]
            s = series.get(m.series)
            if s is None:
                series[m.series] = [ts, 0.0]
            elif ts > s[0]:
                s.append(ts - s[0])
                s[0] = ts
                if len(s) > 2 + GAPS - 1 or not s[1]:
                    self._estimate(s, host, m.series)
        self._scanned = len(new)

    def _estimate(self, s: list, host: str, series: str) -> None:
        """`series`' interval anew from its gaps (`s`, its entry in `_series`); noted in
        `estimated` when that is a list."""
        gaps = sorted(s[2:])
        s[1] = min(max(gaps[len(gaps) // 2], 1.0), 60.0)
        del s[2:]
        if s[1] > self._max_interval:
            self._max_interval = s[1]
        if self.estimated is not None:
            self.estimated.append((host, series))

    def _fleet_time(self) -> float:
        """The lower median of the voting devices' newest times: the established devices'
        (heard lately, with a history) once `quorum_devices` of them are (or all that are
        heard), else everybody's (a fabric starting)."""
        check, stale, claims, devices = self._checks, self.stale_checks, self._claims, self._devices
        samples, span = self.history_samples, self.history_s
        if not claims:  # (the common case, in one comprehension)
            votes = [t for t, heard, first, n in devices.values()
                     if check - heard <= stale and n >= samples and t - first >= span]
            if votes and len(votes) >= self.quorum_devices:
                votes.sort()
                return votes[(len(votes) - 1) // 2]
        votes, new = [], []
        for h, (t, heard, first, n) in devices.items():
            if check - heard <= stale:
                vote = max(t, claims.get(h, -INF)) if claims else t
                (votes if n >= samples and t - first >= span else new).append(vote)
        if len(votes) < min(self.quorum_devices, len(votes) + len(new)) or not votes:  # too few have a history
            votes += new
            votes += [t for h, t in claims.items() if h not in devices]
            if not votes:
                return -INF
        votes.sort()
        return votes[(len(votes) - 1) // 2]

    def _check(self, rejects: list[Reject]) -> list[Metric]:
        if self.fleet == -INF:
            if len(self._new) < self._warm_at:
                return []
            self._warm_at = len(self._new) + len(self._new) // 4 + 1  # (about linear in all)
            return self._warm_up(rejects)
        self._checks += 1
        self._next_check = self._newest + self.release_step_s
        self._refresh()
        watermark = self.fleet - self.lateness_s
        if watermark >= self.watermark + self.release_step_s or self._late:
            return self._release(max(watermark, self.watermark))
        return []

    def _refresh(self) -> None:
        self._scan()
        fleet = self._fleet_time()
        if fleet > self.fleet:
            self.fleet = fleet
            self._high = fleet + self.min_ahead_s + self.skew_s

    def _warm_up(self, rejects: list[Reject]) -> list[Metric]:
        """Trust the fleet's time once `quorum_devices` devices (or one device with
        `lateness_s` of history) are heard; each device votes with its newest time below
        the first jump of more than `min_ahead_s + skew_s` above its median."""
        times: dict[str, list[float]] = {}
        for m in self._new:
            times.setdefault(m.tags.get("host", ""), []).append(m.ts)
        jump = self.min_ahead_s + self.skew_s
        votes, spans = [], []
        for ts in times.values():
            ts.sort()
            k = (len(ts) - 1) // 2
            while k + 1 < len(ts) and ts[k + 1] - ts[k] <= jump:
                k += 1
            votes.append(ts[k])
            spans.append(ts[k] - ts[0])
        if len(votes) < self.quorum_devices and max(spans, default=0.0) < self.lateness_s:
            return []
        votes.sort()
        self.fleet = votes[(len(votes) - 1) // 2]
        self._high = self.fleet + self.min_ahead_s + self.skew_s
        limit = self.fleet + max(self.lateness_intervals * self.default_interval_s, self.min_ahead_s) + self.skew_s
        held, self._new, self._scanned = self._new, [], 0
        for m in held:
            if m.ts > limit:
                self._seen.pop((m.series, m.ts), None)
                self._quarantine(m, rejects)
            else:
                self._new.append(m)
        self._newest = max((m.ts for m in self._new), default=-INF)
        self._next_check = -INF
        return self._check(rejects)

    # --- checkpoints ---------------------------------------------------------------------
    def snapshot(self) -> ReorderState:
        return ReorderState(
            watermark=self.watermark, fleet=self.fleet, duplicates=self.duplicates, merged=self.merged,
            conflicting_fields=self.conflicting_fields, late=self.late, late_halves=self.late_halves,
            clock_suspects={h: (int(c), float(a)) for h, (c, a) in self.clock_suspects.items()},
            held=[HeldRecord.of(m) for m in self._held], new=[HeldRecord.of(m) for m in self._new],
            late_records=[HeldRecord.of(m) for m in self._late], scanned=self._scanned, newest=self._newest,
            high=self._high, warm_at=self._warm_at, next_check=self._next_check, checks=self._checks,
            devices={h: (t, int(c), first, int(n)) for h, (t, c, first, n) in self._devices.items()},
            claims=dict(self._claims),
            series={k: list(v) for k, v in self._series.items()}, max_interval=self._max_interval,
            seen=[HeldRecord.of(m) for m in self._seen.values()], prune_at=self._prune_at, horizon=self._horizon)

    def restore(self, state: ReorderState) -> None:
        """Continue from `state` (the counts in `stats` are the stage's). A record still
        held is the same object in `_seen` as in the held lists, so a later half merges
        into what is released."""
        self.watermark, self.fleet, self.duplicates = state.watermark, state.fleet, state.duplicates
        self.merged, self.conflicting_fields = state.merged, state.conflicting_fields
        self.late, self.late_halves = state.late, state.late_halves
        self.clock_suspects = {h: [c, a] for h, (c, a) in state.clock_suspects.items()}
        self._held = sorted((r.metric() for r in state.held), key=_ts)  # (sorted: stable, and kept so)
        self._new = [r.metric() for r in state.new]
        self._late = [r.metric() for r in state.late_records]
        taken = {(m.series, m.ts): m for m in (*self._held, *self._new, *self._late)}
        self._seen = {}
        for r in state.seen:
            key = (r.series, r.ts)
            self._seen[key] = taken.get(key) or r.metric()
        self._scanned, self._newest, self._high = state.scanned, state.newest, state.high
        self._warm_at, self._next_check, self._checks = state.warm_at, state.next_check, state.checks
        self._devices = {h: list(d) for h, d in state.devices.items()}
        self._claims = dict(state.claims)
        self._series = {k: list(v) for k, v in state.series.items()}
        self._max_interval, self._prune_at, self._horizon = state.max_interval, state.prune_at, state.horizon


    def flush(self, rejects: list[Reject] | None = None) -> list[Metric]:
        """Release everything (end of a recorded file). A fleet still warming up is settled
        first, so a lone record from the future is still quarantined."""
        if self.fleet == -INF and self._new:
            out = self._warm_up_now(rejects if rejects is not None else [])
        else:
            out = []
        return out + self._release(INF)

    def _warm_up_now(self, rejects: list[Reject]) -> list[Metric]:
        quorum = self.quorum_devices
        self.quorum_devices = 0
        try:
            return self._warm_up(rejects)
        finally:
            self.quorum_devices = quorum

    def _release(self, watermark: float) -> list[Metric]:
        held, new = self._held, self._new
        if new:
            new.sort(key=_ts)
            if held and new[0].ts < held[-1].ts:  # merge with the held records newer than the oldest arrival
                k = bisect_right(held, new[0].ts, key=_ts)
                tail = held[k:] + new
                tail.sort(key=_ts)  # stable: at equal times the held (earlier arrivals) stay first
                held[k:] = tail
            else:
                held.extend(new)
            self._new, self._scanned = [], 0
        cut = bisect_right(held, watermark, key=_ts)
        out, self._held = held[:cut], held[cut:]
        if self._late:  # older than the previous watermark: ahead of the in-order batch
            self._late.sort(key=_ts)
            out, self._late = self._late + out, []
        if watermark != INF:
            self.watermark = watermark
        elif out:
            self.watermark = max(self.watermark, out[-1].ts)
        if self.watermark - self._prune_at >= 10.0:
            self._prune()
        return out

    def _prune(self) -> None:
        """Forget the oldest keys in place rather than rebuild the dict: keys arrive in
        nearly time order, so stop at the first recent one. The few older ones behind it
        stay until a later prune; `push` ignores them (`_horizon`)."""
        keep = self._bound(self._max_interval or 1.0)
        horizon = self._horizon = min(self.watermark, self.fleet) - keep
        seen = self._seen
        old = []
        for key in seen:
            if key[1] >= horizon:
                break
            old.append(key)
        for key in old:
            del seen[key]
        self._prune_at = self.watermark
