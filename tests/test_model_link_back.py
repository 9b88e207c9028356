"""The first record of a link back up, seen by the anomaly models (engine.detect `down`).

A port taken down for maintenance sends no codewords. Some collectors report its counters
pinned while it is down, but the counter itself ran on, so the first sample back up holds
the whole run at once. On a 5-10 s probe of the tune-range seeds (clean-6 at 10 s), a port
back from 150 s of maintenance showed 11,000 corrected FEC frames in one sample. That
sample is the transition, not a reading of the running link. Its tail in the models'
minute-long mean, with ordinary noise in the windows after it, opened link_degraded. The
models now skip that record; the rules judge it as ever. (This synthetic fabric opened
nothing before either, its noise being gentler than the probe's: what is tested here is
what the models are fed. The probe's clean-6 opens nothing now.)
"""
from __future__ import annotations

import pytest

from engine.pipeline import Pipeline
from models.train import train
from tests.test_gray_faults import RULES, T0, TOPO, Exporters, telemetry


def catching_up(ex: Exporters, t: float) -> None:
    """leaf1:swp1 corrects 60-140 frames/s. From 150 s to 400 s it is admin-down, and its
    reported counters stand still. When it comes back, the counter has run on the whole
    time."""
    port = "leaf1:swp1"
    for name, rate in (("if_in_fec_correctable_frames", 100), ("if_in_fec_symbol_errors", 200)):
        ex.add(port, f"running_{name}", rate * ex.rng.uniform(0.6, 1.4))
        if 150 <= t < 400:
            ex.counters[(port, name)] = ex.counters.setdefault((port, f"pinned_{name}"), ex.counters[(port, name)])
        else:
            ex.counters[(port, name)] = ex.counters[(port, f"running_{name}")]
    (ex.admin_down.add if 150 <= t < 400 else ex.admin_down.discard)(port)


def fed(lines: list[str], models, series: str) -> list[float]:
    """The times of the records of `series` the models were fed (their scorer's own
    methods, watched)."""
    scorer, seen = models.scorer(), []
    observe, adder = scorer.observe, scorer.adder

    def watched_observe(measurement, name, tags, ts, vec):
        if name == series:
            seen.append(ts)
        return observe(measurement, name, tags, ts, vec)

    def watched_adder(name):
        add = adder(name)
        if add is None or name != series:
            return add
        return lambda vec: (seen.append(pipe.detect.detector.clock), add(vec))[1]
    scorer.observe, scorer.adder = watched_observe, watched_adder
    pipe = Pipeline(rules=RULES, topology=TOPO, scorer=scorer)
    for line in lines:
        pipe.feed(line)
    pipe.finish()
    return [round(t - T0) for t in seen]


@pytest.mark.parametrize("interval", (5, 10))
def test_the_models_never_see_the_first_sample_of_a_port_back_from_maintenance(tmp_path, interval):
    history = tmp_path / "history.jsonl"
    history.write_text("\n".join(telemetry(interval, fec=catching_up_never)) + "\n")
    models, _ = train([history], topologies=[TOPO], seed=3)
    times = fed(telemetry(interval, fec=catching_up), models, "switch_port|host=leaf1|interface=swp1")
    assert 400 - interval in times and 400 + interval in times  # down, and up again after
    assert 400 not in times  # the sample whose counters ran on while it was down
    times = fed(telemetry(interval, fec=catching_up_never), models, "switch_port|host=leaf1|interface=swp1")
    assert 400 in times  # (a port that stayed up: every sample)


def catching_up_never(ex: Exporters, t: float) -> None:
    """The same port in the history: up, 60-140 corrected frames/s."""
    ex.add("leaf1:swp1", "if_in_fec_correctable_frames", 100 * ex.rng.uniform(0.6, 1.4))
    ex.add("leaf1:swp1", "if_in_fec_symbol_errors", 200 * ex.rng.uniform(0.6, 1.4))
