"""Reordering behind an event-time watermark (contract section 1: records may arrive a
few seconds late or out of order).

Timelines are written as offsets from T0 (2025-11-29T07:06:40Z); the watermark is the
newest event time pushed minus the lateness, worked out by hand at each step.
"""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.normalize import parse_metric
from engine.order import Reorderer
from engine.types import Metric, Reject

T0 = 1764400000


def rec(t: float, host: str = "leaf01") -> Metric:
    m = parse_metric({"name": "switch_port", "tags": {"host": host, "interface": "swp1"},
                      "fields": {"if_in_octets": 1}, "timestamp": T0 + t})
    assert isinstance(m, Metric)
    return m


def old(lateness: float = 5.0, **kw) -> Reorderer:
    """A reorderer with one lateness for every series (no per-interval bound) that trusts
    the first device it hears, and lets every device it hears vote on the fleet's time
    (no history needed): the release mechanics alone, times worked out by hand."""
    kw = {"history_samples": 0, "history_s": 0.0, **kw}
    return Reorderer(lateness_s=lateness, lateness_intervals=0, quorum_devices=1, **kw)


def offsets(metrics: list[Metric]) -> list[float]:
    return [m.ts - T0 for m in metrics]


def push(r: Reorderer, *times: float, host: str = "leaf01") -> tuple[list[float], list[Reject]]:
    rejects: list[Reject] = []
    out = r.push([rec(t, host) for t in times], rejects)
    return offsets(out), rejects


def test_records_three_seconds_out_of_order_come_out_sorted():
    r = old(5)
    # (arrival, released by that push): watermark = newest - 5
    timeline = [
        (0, []),  # newest 0, watermark -5
        (3, []),  # watermark -2
        (1, []),
        (2, []),
        (6, [0, 1]),  # watermark 1
        (4, []),  # newest still 6
        (5, []),
        (9, [2, 3, 4]),  # watermark 4
        (7, []),
        (8, []),
        (12, [5, 6, 7]),  # watermark 7
    ]
    for t, expected in timeline:
        released, rejects = push(r, t)
        assert released == expected, f"after pushing {t}"
        assert rejects == []
    assert r.watermark == T0 + 7
    assert offsets(r.flush()) == [8, 9, 12]
    assert r.duplicates == 0


def test_a_batch_is_ordered_within_itself():
    r = old(2)
    released, rejects = push(r, 5, 1, 4, 0, 3, 2)  # newest 5 -> watermark 3
    assert released == [0, 1, 2, 3]
    assert rejects == []
    assert offsets(r.flush()) == [4, 5]


def test_lateness_boundary():
    r = old(5)
    assert push(r, 10) == ([], [])  # watermark 5
    released, rejects = push(r, 5)  # exactly at the watermark: not behind it, kept
    assert (released, rejects) == ([], [])  # the watermark did not move
    released, rejects = push(r, 4.5)  # 0.5 s behind the watermark
    assert released == []
    assert [x.reason for x in rejects] == ["too_late"]
    released, rejects = push(r, 11)  # watermark 6
    assert released == [5]
    assert offsets(r.flush()) == [10, 11]


def test_too_late_record_is_rejected_and_never_released():
    r = old(5)
    push(r, 0)
    released, _ = push(r, 10)  # watermark 5
    assert released == [0]
    released, rejects = push(r, 3, host="leaf02")
    assert released == []
    assert len(rejects) == 1
    assert rejects[0].reason == "too_late"
    assert "leaf02" in rejects[0].raw  # names the series
    assert offsets(r.flush()) == [10]


def test_rejects_are_appended_to_the_callers_list():
    r = old(1)
    push(r, 10)
    rejects = [Reject("bad_json", "earlier", "x")]
    r.push([rec(1), rec(2)], rejects)
    assert [x.reason for x in rejects] == ["bad_json", "too_late", "too_late"]


def test_duplicates_are_dropped_and_counted():
    r = old(5)
    push(r, 0, 1)
    push(r, 1)  # same series, same time
    push(r, 1, host="leaf02")  # same time, another series: not a duplicate
    push(r, 0, 1)
    assert r.duplicates == 3
    assert sorted((m.tags["host"], m.ts - T0) for m in r.flush()) == [
        ("leaf01", 0), ("leaf01", 1), ("leaf02", 1)]


def test_resent_record_already_released_is_not_released_again():
    r = old(5)
    push(r, 0)
    released, _ = push(r, 6)  # watermark 1
    assert released == [0]
    released, _ = push(r, 0)  # re-sent after release (dropped or rejected, never re-released)
    assert released == []
    assert offsets(r.flush()) == [6]


def test_flush_releases_everything_held():
    r = old(30)
    assert push(r, 2, 0, 1) == ([], [])
    assert offsets(r.flush()) == [0, 1, 2]
    assert r.flush() == []


def test_empty_push_releases_nothing():
    r = old()
    assert r.push([], []) == []
    assert r.flush() == []


# ------------------------------------------------------------------ property


@given(
    lateness=st.sampled_from([0.5, 1.0, 3.0, 5.0]),
    items=st.lists(
        st.tuples(st.sampled_from(["leaf01", "leaf02", "spine01"]), st.integers(0, 400).map(lambda q: q / 4)),
        max_size=60,
    ),
    data=st.data(),
)
def test_bounded_disorder_is_fully_repaired(lateness, items, data):
    """Invariants, for records displaced by less than the lateness:
    released_sorted: released + flushed output is in non-decreasing event time;
    exactly_once: each distinct (series, ts) comes out once, duplicates are counted;
    nothing_rejected: no record is too late."""
    jitter = data.draw(st.lists(st.floats(0, lateness, exclude_max=True), min_size=len(items), max_size=len(items)))
    # arrival order: by event time plus a delay below the lateness
    order = sorted(range(len(items)), key=lambda i: (items[i][1] + jitter[i], i))
    arrival = [items[i] for i in order]
    sizes = data.draw(st.lists(st.integers(1, 5), min_size=len(arrival), max_size=len(arrival)))

    r = old(lateness, skew_s=1e9)  # (gaps of any size: no record is from the future here)
    rejects: list[Reject] = []
    out: list[Metric] = []
    pos = 0
    for size in sizes:
        if pos >= len(arrival):
            break
        chunk = arrival[pos:pos + size]
        pos += size
        out += r.push([rec(t, host) for host, t in chunk], rejects)
    out += r.flush()

    times = [m.ts for m in out]
    assert times == sorted(times)
    got = [(m.tags["host"], m.ts - T0) for m in out]
    assert sorted(got) == sorted(set(items))
    assert r.duplicates == len(items) - len(set(items))
    assert rejects == []


class _Reference:
    """The definition, spelled out: hold in arrival order, release by a stable sort of
    everything held, with the same watermark, duplicate and lateness rules."""

    def __init__(self, lateness: float, step: float):
        self.lateness, self.step = lateness, step
        self.held, self.seen, self.watermark, self.newest = [], set(), float("-inf"), float("-inf")
        self.devices, self.fleet, self.next_check, self.late = {}, float("-inf"), float("-inf"), []

    def push(self, metrics):
        for m in metrics:
            if (m.series, m.ts) in self.seen or m.ts < self.watermark:
                continue
            self.seen.add((m.series, m.ts))
            if m.ts == self.watermark:  # at the watermark: taken, released with the next release
                self.late.append(m)
                continue
            self.held.append(m)
            self.newest = max(self.newest, m.ts)
            host = m.tags["host"]
            self.devices[host] = max(self.devices.get(host, m.ts), m.ts)
        if not self.devices or self.newest < self.next_check:
            return []
        self.next_check = self.newest + self.step
        votes = sorted(self.devices.values())  # the fleet: the lower median of devices' newest
        self.fleet = max(self.fleet, votes[(len(votes) - 1) // 2])
        if self.fleet - self.lateness >= self.watermark + self.step or self.late:
            return self.release(max(self.fleet - self.lateness, self.watermark))
        return []

    def release(self, watermark):
        self.held.sort(key=lambda m: m.ts)
        out = sorted(self.late, key=lambda m: m.ts) + [m for m in self.held if m.ts <= watermark]
        self.held, self.late = [m for m in self.held if m.ts > watermark], []
        if watermark != float("inf"):
            self.watermark = watermark
        return out


@given(
    items=st.lists(st.tuples(st.sampled_from(["leaf01", "leaf02", "spine01", "spine02"]),
                             st.integers(0, 120).map(lambda q: q / 8)), max_size=80),
    sizes=st.lists(st.integers(1, 6), min_size=80, max_size=80),
)
def test_release_order_is_a_stable_sort_of_arrivals(items, sizes):
    """Invariant stable_release: whatever the disorder, records come out as a stable sort
    by event time of their arrival order (equal times keep arrival order)."""
    records = [rec(t, host) for host, t in items]
    r, ref = old(2.0, stale_checks=10**9, skew_s=1e9), _Reference(2.0, Reorderer().release_step_s)
    got, want, pos = [], [], 0
    for size in sizes:
        chunk, pos = records[pos:pos + size], pos + size
        got += r.push(chunk, [])
        want += ref.push(chunk)
    got += r.flush()
    want += ref.release(float("inf"))
    assert [id(m) for m in got] == [id(m) for m in want]


# ------------------------------------------------------------------ fleet, intervals, halves


def srec(t: float, host: str, interval: str = "swp1", **fields) -> Metric:
    m = parse_metric({"name": "switch_port", "tags": {"host": host, "interface": interval},
                      "fields": fields or {"if_in_octets": t}, "timestamp": T0 + t})
    assert isinstance(m, Metric)
    return m


def fleet_of(r: Reorderer, until: float, hosts=("leaf01", "leaf02", "spine01"), every: float = 1.0,
             start: float = 0.0) -> list[Metric]:
    """Push every host's 1 s series up to `until`; what was released."""
    out, t = [], start
    while t <= until:
        rejects: list[Reject] = []
        out += r.push([srec(t, h) for h in hosts], rejects)
        assert rejects == []
        t += every
    return out


@pytest.mark.parametrize("interval", [10.0, 30.0])
def test_slow_series_records_one_to_three_intervals_late_are_all_used(interval):
    r = Reorderer()
    rejects: list[Reject] = []
    slow = [srec(k * interval, "stor01", "sda") for k in range(12)]
    out = fleet_of(r, 2 * interval)
    for k in range(3):  # the slow series' interval is learnt from its first samples
        out += r.push([slow[k]], rejects)
    t = 2 * interval
    for k in range(3, 12):
        delay = 1 + k % 3  # 1, 2, 3 intervals late (behind the fleet's time)
        while t < (k + delay) * interval:
            t += 1
            out += r.push([srec(t, h) for h in ("leaf01", "leaf02", "spine01")], rejects)
        out += r.push([slow[k]], rejects)
    out += r.flush()
    assert rejects == []
    assert [m.ts - T0 for m in out if m.tags["host"] == "stor01"] == [k * interval for k in range(12)]
    assert r._interval(slow[0].series) == interval


def test_a_record_later_than_its_series_bound_is_too_late():
    r = Reorderer()
    fleet_of(r, 30)  # 1 s series: bound max(3 x 1 s, 5 s) = 5 s behind the fleet's time
    rejects: list[Reject] = []
    r.push([srec(26, "leaf01", "swp9")], rejects)  # a new series: its interval unknown, taken
    r.push([srec(30 - 5.5, "leaf01")], rejects)  # leaf01:swp1 at 1 s: 5.5 s behind
    assert [x.reason for x in rejects] == ["too_late"]
    assert "5 s" in rejects[0].detail


def test_one_record_far_ahead_is_quarantined_and_moves_nothing():
    r = Reorderer()
    fleet_of(r, 10)
    rejects: list[Reject] = []
    assert r.push([srec(10_000, "rogue")], rejects) == []
    assert [x.reason for x in rejects] == ["future_timestamp"]
    assert r.clock_suspects == {"rogue": [1, pytest.approx(10_000 - 10, abs=2)]}
    out = fleet_of(r, 20, start=11)  # the fleet goes on: nothing of it is too late
    assert out and r.fleet == T0 + 20


def test_the_fleet_follows_a_clock_jump_of_most_devices():
    r = Reorderer()
    fleet_of(r, 10)
    rejects: list[Reject] = []
    for t in range(3600, 3610):
        r.push([srec(t, h) for h in ("leaf01", "leaf02", "spine01")], rejects)
    assert r.fleet >= T0 + 3600
    assert 0 < len(rejects) <= 3  # the first jumped records, until two of three devices agree


def test_halves_of_one_sample_are_merged_and_true_duplicates_dropped():
    r = Reorderer(quorum_devices=1)
    a = srec(0, "gpu001", "mlx5_0", port_xmit_data=1, port_rcv_data=2)
    b = srec(0, "gpu001", "mlx5_0", excessive_buffer_overrun_errors=0, port_rcv_data=3)
    rejects: list[Reject] = []
    r.push([a], rejects)
    r.push([b], rejects)
    r.push([srec(0, "gpu001", "mlx5_0", port_xmit_data=1)], rejects)  # a re-sent half: nothing new
    out = r.flush()
    assert rejects == []
    assert len(out) == 1
    assert out[0].fields == {"port_xmit_data": 1, "port_rcv_data": 3, "excessive_buffer_overrun_errors": 0}
    assert (r.merged, r.conflicting_fields, r.duplicates) == (1, 1, 1)


@given(
    delays=st.lists(st.integers(0, 3), min_size=40, max_size=40),
    interval=st.sampled_from([1.0, 10.0, 30.0]),
)
def test_any_disorder_within_the_bound_gives_the_same_records_per_series(delays, interval):
    """Invariant within_bound: records delayed by up to 3 of their series' intervals are
    all taken, whatever the arrival order, and every series comes out in time order but
    for late records (counted `late`): released ahead of the next in-order batch, which
    can put one behind a newer sample of its series that was released already (the
    features count those as superseded)."""
    hosts = ("leaf01", "leaf02", "spine01", "spine02")
    records = [(srec(k * interval, h), k + delays[(k * 4 + i) % len(delays)])
               for k in range(10) for i, h in enumerate(hosts)]
    arrival = [m for m, _ in sorted(records, key=lambda x: x[1])]
    r, rejects, out = Reorderer(), [], []
    for m in arrival:
        out += r.push([m], rejects)
    out += r.flush()
    assert rejects == []
    behind = 0
    for h in hosts:
        got = [m.ts - T0 for m in out if m.tags["host"] == h]
        assert sorted(got) == [k * interval for k in range(10)]
        behind += sum(1 for k, t in enumerate(got) if t < max(got[:k], default=-1.0))
    assert behind <= r.late
