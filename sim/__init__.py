"""Scenario generator: an independent model of a RoCE leaf/spine fabric that writes
telemetry, topology, job placement and the ground truth of injected faults.

    from sim import simulate, FabricSpec
    truth = simulate(out=Path("out/pfc"), scenario="pfc_storm", seed=1)

writes out/pfc/{topology.dot, jobs.jsonl, telemetry.jsonl.gz, truth.json}. Optional:
fabric=FabricSpec(...), duration (s; a shorter run scales the fault times down),
intensity="strong"|"medium"|"weak", target (the fault's entity: a host, NIC, switch
port, link, switch, storage host or job id, depending on the scenario), label (the name
truth.json gives the run), progress(records_written), physics (fabric.Physics: buffer,
MTU, ECN knee...; default the classic constants) and benign (faults.benign.Scheduled
events: a job ramp-up, an idle port), which the realism layer (split.py) draws per seed.

Scenarios: SCENARIOS (the classic ones: one fault each, clean, demo), GRAY_SCENARIOS
(fec_creep, pcie_stall, storage_drift, pfc_storm_low), concurrent2, concurrent3 and
clean_1h; ALL_SCENARIOS lists every name. SUITE (suite.py) is the hard scenario suite
that simulate_suite(out=..., seed=...) builds, one folder per entry.

The flow: fabric (names, ports) and jobs (placement) -> traffic (demand, routing)
-> physics (normal counters) -> faults (symptoms) -> emit (records); scenarios holds
the table and the entry point. It never imports the engine.
"""
from .fabric import FabricSpec
from .faults import INTENSITIES
from .scenarios import ALL_SCENARIOS, GRAY_SCENARIOS, SCENARIOS, simulate
from .suite import SUITE, SuiteEntry, simulate_suite

__all__ = ["ALL_SCENARIOS", "GRAY_SCENARIOS", "INTENSITIES", "SCENARIOS", "SUITE", "FabricSpec",
           "SuiteEntry", "simulate", "simulate_suite"]
