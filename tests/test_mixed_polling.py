"""A fabric whose devices are polled at different intervals (contract section 1: per
series, 1-60 s), built by the simulator's realism layer as a probe of the tune-range
split draws it."""
from __future__ import annotations

import json

from cli.run import build_pipeline
from contract.times import parse_rfc3339
from engine.replay import open_lines
from engine.topology import load_topology
from evaluation.scenarios import scenario_files
from sim.split import build, entries


def test_a_storm_at_a_nic_polled_every_60_s_leads_its_incident_on_its_ports_evidence(tmp_path):
    """tune-range pfc_storm-1 probed at 2/15/60 s: a weak storm of 78 s at gpu007:eth0,
    read every 60 s, its switches every 15 s. The NIC's own rule waits for three of its
    samples (199 s); its leaf port receives the same pause, so the storm is credible on
    the port's evidence from 36 s. Before (rank._sent_by), the storm was not credible
    until the NIC's own symptom came, and victims' congestion on the spines led the
    published incident on and off until 60 s. (The first publication, at 30 s, still
    leads with a spine's congestion: the queue's gauge is proven in two readings, the
    pause counters that make it a victim in three.)"""
    folder = tmp_path / "run"
    build(next(e for e in entries("tune-range") if e.name == "pfc_storm-1"), out=folder, split="tune-range",
          intervals=(2, 15, 60))
    truth = json.loads((folder / "truth.json").read_text())
    assert truth["realism"]["intervals"] == {"switch": 15, "nic": 60, "storage": 15}  # the case this is about
    fault = truth["faults"][0]
    files = scenario_files(folder)
    pipeline = build_pipeline(topology=load_topology(files["topology"]), jobs_file=files["jobs"], rule_files=None)
    for line in open_lines(files["telemetry"]):
        pipeline.feed(line)
    pipeline.finish()
    published = [(parse_rfc3339(d["updated_at"]) - fault["start"], d["id"],  # every version as it was sent
                  (d["root_causes"][0]["cause"], d["root_causes"][0]["entity"]["id"])) for d in pipeline.changes()]
    assert len({i for _, i, _ in published}) == 1
    storm = ("pfc_storm", fault["entity"]["id"])
    assert published[-1][2] == storm
    assert [(round(t), top) for t, _, top in published if t >= 40 and top != storm] == []
