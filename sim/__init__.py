"""Scenario generator: an independent model of a RoCE leaf/spine fabric that writes
telemetry, topology, job placement and the ground truth of injected faults.

    from sim import simulate, FabricSpec
    truth = simulate(out=Path("out/pfc"), scenario="pfc_storm", seed=1)

writes out/pfc/{topology.dot, jobs.jsonl, telemetry.jsonl.gz, truth.json}. Optional:
fabric=FabricSpec(...), duration (s; a shorter run scales the fault times down),
intensity="strong"|"weak", target (the fault's entity: a host, NIC, switch port, link,
switch, storage host or job id, depending on the scenario), progress(records_written).

The flow: fabric (names, ports) and jobs (placement) -> traffic (demand, routing)
-> physics (normal counters) -> faults (symptoms) -> emit (records); scenarios holds
the table and the entry points. It never imports the engine.
"""
from .fabric import FabricSpec
from .scenarios import SCENARIOS, simulate, simulate_suite

__all__ = ["SCENARIOS", "FabricSpec", "simulate", "simulate_suite"]
