"""A steady load that the fabric changes under (engine/correlate.py `_job_surges`): a
job whose hosts were at line rate long before a shared link they cross congested did
not change its load, so its surge is dated from the congestion and waits, as congestion
on a shared link waits, for that link's pause counters. Timelines on the fabric of
tests/test_correlation_timeline.py, as in tests/test_noisy_neighbor.py.
"""
from __future__ import annotations

from contract.times import parse_rfc3339
from engine.attribution import harmed
from tests.test_correlation_timeline import T0, TOPO, episode, run, tops, uplink_congestion
from tests.test_noisy_neighbor import NOISY, VICTIM, busy, saturated


def test_harm_begins_with_the_earliest_congested_link_the_job_shares_with_another():
    """`harmed` says when a job began to hurt a neighbour: the earliest start among the
    congested switch-to-switch links it crosses with another running job; None when no
    other job crosses them (a job alone on its links hurts nobody)."""
    up = episode("queue_congested", "leaf1:swp51", 30, None)[0][1]
    down = episode("queue_congested", "spine1:swp2", 25, None)[0][1]
    both = [NOISY, VICTIM]
    assert harmed(NOISY, congested=[up, down], jobs=both, topology=TOPO) == T0 + 25
    assert harmed(NOISY, congested=[up], jobs=both, topology=TOPO) == T0 + 30
    assert harmed(NOISY, congested=[up, down], jobs=[NOISY], topology=TOPO) is None
    assert harmed(NOISY, congested=[], jobs=both, topology=TOPO) is None


def test_a_steady_jobs_surge_on_a_pause_trees_queue_proven_a_tick_early_names_no_job():
    """As above, with the job's hosts at line rate for a minute before the tree: its
    surge began with its ramp, 60 s before anything congested, and carried the queue's
    first tick to a noisy_neighbor at once (tune-any confounder probe cf2, pfc_storm-10 at
    2 s: a job ramping to 0.86 of line rate on the storming NIC's leaf). A load that was
    steady while the fabric changed under it is a surge from when it hurt a neighbour, and
    it waits for the shared links' pause counters as congestion there does."""
    storm = episode("nic_pfc_tx", "gpu2:eth0", 80, 260) + episode("port_pfc_rx", "leaf1:swp2", 81, 260) \
        + episode("port_pfc_tx", "leaf1:swp51", 83, 260) + episode("port_pfc_rx", "spine1:swp1", 84, 260)
    queue = [(max(t, T0 + 96), s) for t, s in episode("queue_congested", "leaf2:swp51", 85, 260)]
    pause = [(max(t, T0 + 97), s) for t, s in episode("port_pfc_rx", "leaf2:swp51", 85, 260)]
    load = saturated("gpu3", 20, 260) + saturated("gpu1", 20, 260)
    _, published = run(storm + queue + pause + load, until=380, jobs=[NOISY, VICTIM])
    assert tops(published) == [("pfc_storm", "gpu2:eth0")]


def test_a_steady_job_that_fills_the_shared_uplinks_is_named_after_their_pause_wait():
    """A job at line rate for a minute, then its shared uplinks congest and nothing pauses
    them (a neighbour's traffic joined, or the fabric lost a path): it is the noisy
    neighbour, once its congestion has lasted as long as congestion on a shared link
    waits (`shared_congestion_s`, 20 s), not at the first tick (the victim's congestion
    at its own port, credible in 10 s, may page first)."""
    load = saturated("gpu1", 0, 200) + saturated("gpu3", 0, 200) + busy("gpu2", 0.55, 0, 200)
    first: dict = {}
    _, published = run(load + uplink_congestion(60, 200), until=300, jobs=[NOISY, VICTIM], first=first)
    assert tops(published) == [("noisy_neighbor", "7")]
    (inc,) = first.values()  # (its first page may name the victim's congestion, credible in 10 s)
    assert inc["root_causes"][0]["cause"] != "noisy_neighbor" or parse_rfc3339(inc["detected_at"]) - T0 >= 80
