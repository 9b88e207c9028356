"""The Kafka path on fabrics polled the way operators poll them (issue 12, point 5).

tests/test_kafka_workers.py publishes a classic 1 s scenario. Here a run of the tune split
polled every 10 s and every 30 s, with the realism layer's jitter, missed, late and
duplicate records, clock skew and collector gaps (sim/realism.py), goes through a worker
on the real broker: its records are spread over partitions by device, so the worker reads
another interleaving than the file's, bounded in sample intervals as contract section 1
says (engine/order.py). It must store the incidents the embedded replay stores, and count
every record once (tests/test_partitions_coarse.py runs the same wiring in one process
on more runs, and compares the time each incident was published too).

KAFKA_BOOTSTRAP=127.0.0.1:9092 pytest tests/test_kafka_coarse.py
"""
from __future__ import annotations

import time

import pytest

from sim.split import build, entries
from testkit.metrics import scrape
from testkit.store import incident_summary
from testkit.workers import Fleet

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.slow,
    pytest.mark.filterwarnings(r"ignore:.*is deprecated\. Use files\(\) instead:DeprecationWarning"),
]


@pytest.mark.parametrize("name, interval", [("pfc_storm-0", 10), ("noisy_neighbor-0", 30)])
def test_a_coarsely_polled_realistic_run_gives_the_replays_incidents(tmp_path, kafka_bootstrap, replay_once,
                                                                     name, interval):
    folder = tmp_path / name
    entry = next(e for e in entries("tune") if e.name == name)
    truth = build(entry, out=folder, split="tune", intervals=(interval,))
    assert truth["realism"]["intervals"]["switch"] == interval
    _, expected, replayed = replay_once(folder)
    assert expected, "the replay found no incident: the comparison would prove little"
    (tmp_path / "fleet").mkdir()
    fleet = Fleet(tmp_path / "fleet", folder, kafka_bootstrap)
    try:
        base = fleet.start("w")
        stats = fleet.publish()
        assert stats.failed == 0 and stats.records > 0
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:  # every record read (and counted once) before comparing
            samples = scrape(base)
            if samples["fabric_rca_records_total"] >= stats.records:
                break
            time.sleep(1)
        assert samples["fabric_rca_records_total"] == stats.records, fleet.logs()
        got = fleet.wait_for(expected, timeout=60)
        assert incident_summary(got) == incident_summary(expected), fleet.logs()
        assert fleet.alive("w"), fleet.logs()
    finally:
        fleet.stop()
