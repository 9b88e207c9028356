"""The fleet's time weighted by history (engine/order.py): never-seen hosts, however many
and whatever time they claim, cannot move or freeze the time of devices with a history;
a fabric where every device is new still sets its own time.

Timelines are offsets from T0 as in tests/test_order.py.
"""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from engine.order import Reorderer
from engine.types import Metric, Reject
from test_order import T0, fleet_of, srec



def _established(r: Reorderer, hosts, until: float, every: float = 1.0) -> list[Metric]:
    out = fleet_of(r, until, hosts=hosts, every=every)
    assert all(r._devices[h][3] >= r.history_samples for h in hosts)  # (every one has a history now)
    return out


def test_a_burst_of_new_hosts_at_the_fleets_time_does_not_freeze_it():
    """Eighteen never-seen hosts, all stamped with one time, outnumber six established
    devices three to one: they vote only once they have a history of their own."""
    r = Reorderer()
    real = [f"leaf{i:02d}" for i in range(6)]
    out = _established(r, real, 30)
    rejects: list[Reject] = []
    out += r.push([srec(30, f"fake{i:02d}", "x") for i in range(18)], rejects)
    out += fleet_of(r, 120, hosts=real, start=31)
    out += r.flush(rejects)
    assert rejects == []
    assert r.fleet == T0 + 120  # the established devices' time, not the burst's 30
    assert [m.ts - T0 for m in out if m.tags["host"] == "leaf00"] == [float(t) for t in range(121)]


def test_a_burst_of_new_hosts_ahead_is_quarantined_and_moves_nothing():
    r = Reorderer()
    real = [f"leaf{i:02d}" for i in range(5)]
    _established(r, real, 30)
    rejects: list[Reject] = []
    r.push([srec(5000, f"fake{i:02d}", "x") for i in range(15)], rejects)
    assert [x.reason for x in rejects] == ["future_timestamp"] * 15
    assert set(r.clock_suspects) == {f"fake{i:02d}" for i in range(15)}
    fleet_of(r, 60, hosts=real, start=31)  # (asserts: none of theirs rejected)
    assert r.fleet == T0 + 60


def test_hosts_heard_before_the_fabric_do_not_hold_its_time():
    """The hostile corpus's case: never-seen hosts at the fabric's start time arrive first
    (every device is new: all vote), then the fabric's devices, every 10 s, take over
    the vote once three of them have a history."""
    r = Reorderer()
    rejects: list[Reject] = []
    r.push([srec(0, f"corpus{i:02d}", "x") for i in range(18)], rejects)
    real = [f"leaf{i:02d}" for i in range(6)]
    out = fleet_of(r, 300, hosts=real, every=10)
    out += r.flush(rejects)
    assert rejects == []
    assert r.fleet == T0 + 300
    assert [m.ts - T0 for m in out if m.tags["host"] == "leaf03"] == [float(t) for t in range(0, 301, 10)]


def test_a_fresh_fabric_of_new_devices_sets_its_own_time():
    r = Reorderer()
    hosts = [f"gpu{i:03d}" for i in range(20)]
    out = fleet_of(r, 5, hosts=hosts)  # nobody has a history yet: everybody votes
    assert r.fleet == T0 + 5 and out
    fleet_of(r, 40, hosts=hosts, start=6)
    assert r.fleet == T0 + 40


@given(
    established=st.integers(3, 7),
    ratio=st.floats(0, 3),
    offset=st.sampled_from([-3600.0, -20.0, 0.0, 2.0, 25.0, 600.0, 10.0**6]),
    copies=st.integers(1, 3),
    at=st.integers(20, 40),
)
def test_new_hosts_with_one_bogus_time_never_reject_an_established_devices_records(established, ratio, offset,
                                                                                   copies, at):
    """Invariant burst: k <= 3 x E never-seen hosts sending `copies` records each at one
    common time (behind, at, just ahead of or far ahead of the fleet) never get an
    established device's on-time record rejected, and the fleet's time stays theirs."""
    r = Reorderer()
    real = [f"leaf{i:02d}" for i in range(established)]
    out = _established(r, real, at)
    burst = [srec(at + offset, f"fake{i:02d}", "x") for i in range(int(established * ratio)) for _ in range(copies)]
    bogus: list[Reject] = []
    out += r.push(burst, bogus)
    out += fleet_of(r, at + 60, hosts=real, start=at + 1)  # (asserts: none of theirs rejected)
    assert r.fleet == T0 + at + 60
    if offset > r.min_ahead_s + r.skew_s:  # far ahead: quarantined, their clocks reported
        assert [x.reason for x in bogus] == ["future_timestamp"] * len(burst)
        assert len(r.clock_suspects) == len(burst) // copies
    else:  # behind the fleet's bound: too late; near it: taken, and voting for nothing
        assert {x.reason for x in bogus} <= {"too_late"} and not r.clock_suspects
    assert [m.ts - T0 for m in out if m.tags["host"] == "leaf00"] == [float(t) for t in range(at + 60 - 4)]
