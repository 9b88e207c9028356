"""The Kafka benchmark's report: its table, verdict and details on stdout, and its section
of docs/benchmarks.md (`bench/kafka_throughput.py` measures, this writes)."""
from __future__ import annotations

import os
import platform
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from bench.doc import median_run as _median, write_section

# Half of replay_throughput's fabric, so one run stays near two minutes on 2 cores.
# (Snapshots are compressed and may reach 16 MiB, so larger fabrics checkpoint too.)
FABRIC = dict(spines=4, leaves=8, hosts_per_leaf=16, storage_hosts=4)
TARGET_RATE = 20_000
TARGET_RATIO = 0.30
# /healthz-to-done is known to this much; the busy time comes from the workers' own clocks
# (as the raw consumers time themselves), and each sample costs the worker a /metrics render.
HEADING = "## Kafka throughput"  # its title before " (`": not the section "... with mapping"
SAMPLE_EVERY_S = 0.25
SETTLE_S = 3.0


@dataclass
class Measured:
    """One benchmark run: what was published to each prefix and every measured run."""

    folder: Path
    truth: dict
    prefixes: dict[str, str]
    published: dict[str, object]  # PublishStats by prefix name
    raws: list[dict]
    fraws: list[dict]
    oneruns: list[dict]
    two: dict
    broker: str | None  # the --bootstrap given, or None when the bench started its own
    repeat: int


def messages(stats) -> int:
    """Telemetry messages published (a batch of metrics is one; older publishers sent one
    metric a message and did not count messages)."""
    return getattr(stats, "messages", stats.records + stats.jobs) - stats.jobs


def _secs(s: float) -> str:
    return f"{s:.{2 if s < 10 else 1}f}"


def _counts(d: dict[str, int]) -> str:
    return ", ".join(f"{k} {v:,}" for k, v in d.items()) or "none"


def _table(m: Measured) -> list[str]:
    raw, fraw, one, two = _median(m.raws), _median(m.fraws), _median(m.oneruns), m.two
    runs = {"raw": m.raws, "fraw": m.fraws, "one": m.oneruns, "two": [two]}
    rows = [
        ("raw: aiokafka getmany, no processing", raw, "raw"),
        ("raw: faust-streaming agent, no processing", fraw, "fraw"),
        ("1 worker (end to end)", one, "one"),
        ("2 workers (end to end)", two, "two"),
    ]
    head = ["| run | records | Kafka messages | seconds of each run | seconds (median) | records/s | "
            "ratio to aiokafka raw | ratio to faust raw |",
            "|---|---|---|---|---|---|---|---|"]
    return head + [f"| {label} | {r['records']:,} | {messages(m.published['raw']):,} | "
                   f"{', '.join(_secs(x['seconds']) for x in runs[key])} | {_secs(r['seconds'])} | {r['rate']:,.0f} | "
                   f"{r['rate'] / raw['rate']:.2f} | {r['rate'] / fraw['rate']:.2f} |"
                   for label, r, key in rows]


def _onebusy(m: Measured) -> dict:
    return sorted(m.oneruns, key=lambda r: r["busy_s"])[len(m.oneruns) // 2]  # the median by its own clock


def _verdict(m: Measured) -> list[str]:
    raw, fraw, one = _median(m.raws), _median(m.fraws), _median(m.oneruns)
    ratio1 = one["rate"] / raw["rate"]
    ratio1f = one["rate"] / fraw["rate"]
    busy1f = _onebusy(m)["busy_rate"] / fraw["rate"]
    return [
        f"- one worker >= {TARGET_RATE:,} records/s end to end: {one['rate']:,.0f} -> "
        f"**{'PASS' if one['rate'] >= TARGET_RATE else 'MISS'}**",
        f"- one worker >= {TARGET_RATIO:.0%} of the raw consume rate of faust-streaming, the client library "
        f"the workers consume with, both timed from their first record: {busy1f:.0%} -> "
        f"**{'PASS' if busy1f >= TARGET_RATIO else 'MISS'}** (one worker timed from /healthz: {ratio1f:.0%})",
        f"- one worker >= {TARGET_RATIO:.0%} of the raw consume rate of aiokafka, the Kafka client under faust: "
        f"{ratio1:.0%} -> **{'PASS' if ratio1 >= TARGET_RATIO else 'MISS'}**",
    ]


def _details(m: Measured) -> list[str]:
    raw, fraw, one, two = _median(m.raws), _median(m.fraws), _median(m.oneruns), m.two
    pub = list(m.published.values())
    pub_rate = sum(p.records + p.jobs for p in pub) / sum(p.seconds for p in pub)
    onebusy = _onebusy(m)
    busy_runs = ", ".join(f"{r['busy_s']:.2f} s" for r in m.oneruns)
    fault = m.truth["faults"][0]
    return [
        f"- publish (`publish_files` with its defaults, kafka-python, acks=all): {pub_rate:,.0f} records/s "
        f"({', '.join(f'{p.seconds:.1f} s' for p in pub)} for the {len(pub)} prefixes)",
        f"- raw consume: aiokafka {raw['bytes'] / raw['seconds'] / 2**20:,.1f} MiB/s of values, "
        f"faust-streaming {fraw['bytes'] / fraw['seconds'] / 2**20:,.1f} MiB/s",
        f"- max `fabric_rca_processing_delay_seconds` (sampled every {SAMPLE_EVERY_S} s): "
        f"1 worker {one['max_delay_s']:.1f} s, 2 workers {two['max_delay_s']:.1f} s",
        f"- detection delay in event time (detected_at - opened_at of the stored incident): "
        f"1 worker {one['detection_delay_s']:.1f} s, 2 workers {two['detection_delay_s']:.1f} s; "
        f"top root cause {one['top_cause']} {one['top_entity']} (truth: {fault['cause']} {fault['entity']['id']})",
        f"- one worker from its first record to its last (`fabric_rca_first_read_timestamp_seconds` to "
        f"`fabric_rca_last_read_timestamp_seconds`, its own clock): "
        f"{busy_runs}; median {onebusy['busy_s']:.2f} s, "
        f"{onebusy['busy_rate']:,.0f} records/s",
        f"- records already counted when the clock started: 1 worker {one['counted_at_start']:,}, "
        f"2 workers {two['counted_at_start']:,} (2 workers: consumption starts while the group settles)",
        f"- rejected by the workers (by reason; then dead-lettered messages, duplicates): "
        f"1 worker {_counts(one['rejects'])}; 2 workers {_counts(two['rejects'])}",
        f"- 2 workers' stages: "
        f"{' / '.join(', '.join(x.replace(m.prefixes['two'], '') for x in s) for s in two['stages'])}",
    ]


def _intro(m: Measured) -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    records = m.published["raw"].records
    return (
        f"Run {stamp} on {platform.machine()} ({os.cpu_count()} cores), Python {platform.python_version()}, "
        f"{'the broker at ' + m.broker if m.broker else 'a single-node Kafka broker started by the bench (scripts/kafka-dev)'}. "
        f"Scenario {m.folder.name}: pfc_storm on {FABRIC['spines']} spines, {FABRIC['leaves']} leaves x "
        f"{FABRIC['hosts_per_leaf']} hosts, {FABRIC['storage_hosts']} storage hosts ({m.truth['duration_s']:.0f} s of "
        f"event time, {records:,} telemetry records), published with `publish_files` to {len(m.prefixes)} fresh topic prefixes "
        f"(4 telemetry partitions each; the fabric is half of the replay benchmark's, see FABRIC in the script). "
        f"The raw consumers and one worker run {m.repeat} times, interleaved, and the run of median duration is "
        f"reported (the durations of all runs are in the table). The broker, the publisher and the workers share this "
        f"{os.cpu_count()}-core machine, so the figures are lower than on separate hosts; ratios within one run are "
        f"the meaningful part. Worker runs are timed from /healthz (2 workers: +{SETTLE_S:.0f} s for the group to "
        f"settle) until `fabric_rca_records_total` reaches the records published and the incident is in the store. "
        f"Two raw rates: aiokafka's getmany (the Kafka client faust is built on, its floor) and a faust-streaming "
        f"agent that only counts messages, in the workers' own app (`streams.app.new_app`), timed from its first "
        f"message to its last. For the ratio to it, one worker is timed the same way, by its own clock: from the first "
        f"telemetry message it took to the last it finished (`fabric_rca_first_read_timestamp_seconds` and "
        f"`fabric_rca_last_read_timestamp_seconds`; the table's seconds run from /healthz and include joining the group). "
        f"The workers consume with faust-streaming, so the issue's \"same client library\" is read as faust-streaming; "
        f"the ratio to aiokafka is given too. "
        f"Target: one worker >= {TARGET_RATE:,} records/s end to end and >= {TARGET_RATIO:.0%} of the raw consume rate."
    )


def report(m: Measured, out: Path) -> None:
    """The table, verdict and details on stdout; the section written into `out`."""
    table, verdict, details = _table(m), _verdict(m), _details(m)
    print("\n".join(table))
    print()
    print("\n".join(verdict + details).replace("**", ""))
    section = "\n".join(["## Kafka throughput (`bench/kafka_throughput.py`)", "", _intro(m), "",
                         *table, "", *verdict, *details, ""])
    write_section(out, HEADING, section)
    print(f"wrote {out}", file=sys.stderr)
