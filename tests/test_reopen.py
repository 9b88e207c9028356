"""A fault that comes back soon after its incident resolved continues that incident
(engine/reopen.py), and a candidate whose own leading cause another incident's root
explains joins it (a cascade, contract section 8): one fault pages once. Timelines on
the fabric of tests/test_correlation_timeline.py."""
from __future__ import annotations

import msgspec

from engine.correlate import Correlator, CorrelatorState
from engine.incidents import Incident
from engine.jobs import JobBook
from engine.rank import rank
from tests.test_correlation_timeline import RULES, T0, TOPO, episode, run, tops


def _storm_twice(gap_s: float) -> list:
    """gpu1's NIC sends pause for 60 s, stops, and sends again `gap_s` s after it stopped."""
    return episode("nic_pfc_tx", "gpu1:eth0", 10, 70) + episode("nic_pfc_tx", "gpu1:eth0", 70 + gap_s, 70 + gap_s + 60)


def test_a_storm_back_two_minutes_after_its_incident_resolved_reopens_that_incident():
    c, published = run(_storm_twice(gap_s=120), until=260)
    assert tops(published) == [("pfc_storm", "gpu1:eth0")]
    (inc,) = published.values()
    assert inc["status"] == "open" and inc["resolved_at"] is None
    assert c.opened == 1 and c.resolved == 1 and c.reopened == 1
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(c.snapshot()), type=CorrelatorState).reopened == 1
    starts = sorted(s["start"] for s in inc["symptoms"])
    assert len(starts) == 2  # both episodes, under the first one's id


def test_a_storm_back_ten_minutes_later_is_a_new_incident():
    c, published = run(_storm_twice(gap_s=600), until=760)
    assert tops(published) == [("pfc_storm", "gpu1:eth0")] * 2
    assert c.opened == 2 and c.reopened == 0


def test_a_resolved_incident_that_may_reopen_survives_a_checkpoint():
    """Snapshot after the first incident resolved, restore into a new correlator, and the
    storm's return still reopens it."""
    events = sorted(_storm_twice(gap_s=120), key=lambda e: (e[0], e[1].key, e[1].end is not None))
    c = Correlator(topology=TOPO, jobs=JobBook(), opens_incident=RULES.opens_incident)
    ids = set()
    i = 0
    for sec in range(0, 261):
        now = T0 + sec
        while i < len(events) and events[i][0] <= now:
            c.add(events[i][1])
            i += 1
        c.advance(now)
        ids |= {inc["id"] for inc in c.drain()}
        if sec == 150:  # resolved at 70 + 60 s: held in `recent`
            assert c.open == {} and c.recent.by_lead
            wire = msgspec.msgpack.encode(c.snapshot())
            c = Correlator(topology=TOPO, jobs=JobBook(), opens_incident=RULES.opens_incident)
            c.restore(msgspec.msgpack.decode(wire, type=CorrelatorState))
    assert len(ids) == 1 and c.reopened == 1 and next(iter(c.open.values())).status == "open"


def test_an_old_checkpoint_without_resolved_incidents_restores():
    c = Correlator(topology=TOPO, jobs=JobBook(), opens_incident=RULES.opens_incident)
    state = msgspec.to_builtins(c.snapshot())
    state.pop("recent", None)
    c.restore(msgspec.convert(state, CorrelatorState))
    assert c.recent.by_lead == {}


def _candidate(key: str, events: list) -> Incident:
    symptoms = {s.key: s for _, s in events}
    inc = Incident(id=key, opened_at=min(s.start for s in symptoms.values()), updated_at=T0, symptoms=symptoms)
    c = Correlator(topology=TOPO, jobs=JobBook(), opens_incident=RULES.opens_incident)
    inc.root_causes = rank(list(symptoms.values()), c._context())
    return inc


def test_a_group_led_by_congestion_a_flap_explains_joins_the_flap_whatever_else_it_holds():
    """leaf1--spine1 flaps and leaf1's traffic reroutes over spine2, congesting
    leaf1:swp52; that congestion founded a group of its own beside gpu3's link bounce
    (two link-down reports the flap does not explain, more than half the group). The
    group's own lead is the flap's consequence, so the flap takes it."""
    flap = _candidate("flap", episode("port_carrier_flap", "leaf1:swp51", 20, 200)
                      + episode("port_oper_down", "leaf1:swp51", 20, 24))
    young = _candidate("young", episode("queue_congested", "leaf1:swp52", 26, 200)
                       + episode("nic_link_down", "gpu3:eth0", 26, 30) + episode("port_oper_down", "leaf2:swp1", 26, 30))
    assert (flap.root_causes[0].cause, young.root_causes[0].cause) == ("link_flap", "congestion")
    c = Correlator(topology=TOPO, jobs=JobBook(), opens_incident=RULES.opens_incident)
    ctx = c._context()
    assert c._covered(flap.root_causes[0], list(young.symptoms.values()), ctx) < 0.5  # not by the old share
    assert c._same_fault(flap, young, ctx)
