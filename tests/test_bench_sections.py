"""docs/benchmarks.md is written a section at a time by several benchmarks: one section
replaced never takes another whose title merely starts the same way; and the coarse
polling variant generates the benchmark fabric at the interval asked, with about as many
records as asked (30 times the event time for a 30 s poll)."""
from __future__ import annotations

import gzip
import json
from collections import defaultdict

from bench.replay_throughput import generate, write_section

DOC = """# Benchmarks

Intro.

## Replay throughput (`bench/replay_throughput.py`)

old 1 s figures

## Replay throughput, coarse polling (`bench/replay_throughput.py --intervals 10,30`)

old coarse figures

## Kafka throughput (`bench/kafka_throughput.py`)

kafka figures
"""


def test_replacing_a_section_keeps_the_one_whose_title_starts_alike(tmp_path):
    doc = tmp_path / "benchmarks.md"
    doc.write_text(DOC)
    write_section(doc, "## Replay throughput", "## Replay throughput (`bench/replay_throughput.py`)\n\nnew 1 s\n")
    text = doc.read_text()
    assert "new 1 s" in text and "old 1 s" not in text
    assert "old coarse figures" in text and "kafka figures" in text
    write_section(doc, "## Replay throughput, coarse polling", "## Replay throughput, coarse polling (`x`)\n\nnew coarse\n")
    text = doc.read_text()
    assert "new coarse" in text and "old coarse" not in text and "new 1 s" in text
    assert text.count("## ") == 3


def test_the_kafka_report_replaces_its_own_section_only(tmp_path):
    from bench.kafka_report import HEADING

    doc = tmp_path / "benchmarks.md"
    doc.write_text(DOC + "\n## Kafka throughput with mapping (`x --mapped`)\n\nmapped figures\n")
    write_section(doc, HEADING, "## Kafka throughput (`bench/kafka_throughput.py`)\n\nnew kafka\n")
    text = doc.read_text()
    assert "new kafka" in text and "kafka figures" not in text and "mapped figures" in text
    assert text.count("## Kafka throughput (") == 1


def test_a_coarse_bench_file_is_polled_at_its_interval_with_the_records_asked(tmp_path):
    folder = generate(20_000, tmp_path, 30)
    truth = json.loads((folder / "truth.json").read_text())
    # at least 60 polls of the whole fabric (about 1,400 records each) whatever is asked
    assert truth["fabric"]["interval_s"] == 30 and 20_000 <= truth["records"] < 100_000
    assert truth["duration_s"] >= 60 * 30
    times = defaultdict(list)
    with gzip.open(folder / "telemetry.jsonl.gz", "rt") as fh:
        for line in fh:
            for m in (r := json.loads(line)).get("metrics", [r]):
                if m["name"] == "nic_port":
                    times[m["tags"]["host"]].append(m["timestamp"] / 1e9)
    gaps = {round(b - a) for ts in times.values() for a, b in zip(sorted(ts), sorted(ts)[1:])}
    assert gaps == {30}
