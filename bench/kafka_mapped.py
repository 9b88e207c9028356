"""`bench/kafka_throughput.py --mapped`: one worker with mapping on, beside one on contract
names, on the same broker and scenario, `--repeat` rounds interleaved; its own section of
docs/benchmarks.md.

The mapped input is the scenario with every nic_port record as Telegraf's inputs.ethtool
writes an mlx5 NIC (measurement `ethtool`, tag driver=mlx5_core, link 1/0: the file
`bench/replay_throughput.py --mapped` replays, written beside the scenario once). The
publisher reads it as any telemetry file and sends Telegraf JSON batches, so the topic holds
what Telegraf with `data_format = "json"` and inputs.ethtool would send, and the worker's
shipped mapping telegraf_ethtool_mlx5 turns those records back into nic_port.
"""
from __future__ import annotations

import os
import platform
import sys
from datetime import datetime, timezone
from pathlib import Path

from bench.kafka_report import FABRIC, TARGET_RATE, TARGET_RATIO, _median, _secs, messages
from bench.doc import write_section
from bench.replay_mapped import write_line_protocol

RUNS = (("1 worker, contract names (JSON)", "json"), ("1 worker, nic_port as inputs.ethtool (mapped)", "mapped"))


def prefix_names(repeat: int) -> list[str]:
    return [f"{kind}{i}" for i in range(repeat) for _, kind in RUNS]


def rounds(args, bootstrap: str, folder: Path, truth: dict, prefixes: dict[str, str], tmp: Path) -> dict:
    """Publish both files (one prefix per run), then one worker on each, alternating."""
    from bench.kafka_throughput import measure_faust, measure_workers
    from streams.publish import publish_files
    from streams.topics import ensure_topics, pipeline_topics

    _, ethtool = write_line_protocol(folder)
    files = {"json": folder / "telemetry.jsonl.gz", "mapped": ethtool}
    published = {}
    for name, prefix in prefixes.items():
        ensure_topics(bootstrap=bootstrap, topics=pipeline_topics(prefix))
        print(f"publishing {files[name.rstrip('0123456789')].name} to {prefix}* ...", file=sys.stderr)
        published[name] = publish_files([files[name.rstrip("0123456789")]], bootstrap=bootstrap,
                                        topic=prefix + "fabric.telemetry", jobs_topic=prefix + "fabric.jobs")
    cause = truth["faults"][0]["cause"]
    runs: dict[str, list[dict]] = {kind: [] for _, kind in RUNS}
    fraws: list[dict] = []
    for i in range(args.repeat):
        print(f"round {i + 1} of {args.repeat}: raw faust-streaming consumer of the mapped topic ...", file=sys.stderr)
        name = f"mapped{i}"
        fraws.append(measure_faust(bootstrap, prefixes[name], records=published[name].records,
                                   messages=messages(published[name]), topology=folder / "topology.dot", tmp=tmp,
                                   tag=f"mapped{i}"))
        for label, kind in RUNS:
            print(f"round {i + 1} of {args.repeat}: {label} ...", file=sys.stderr)
            name = f"{kind}{i}"
            runs[kind].append(measure_workers(1, bootstrap=bootstrap, folder=folder, prefix=prefixes[name],
                                              cause=cause, published=published[name].records, tmp=tmp,
                                              timeout_s=args.timeout, label=name))
    return {"folder": folder, "truth": truth, "published": published, "runs": runs, "broker": args.bootstrap,
            "repeat": args.repeat, "fraws": fraws}


def report(m: dict, out: Path) -> None:
    """The table and verdict on stdout; the section written into `out`."""
    runs = m["runs"]
    med = {kind: _median(runs[kind]) for _, kind in RUNS}
    busy = {kind: sorted(runs[kind], key=lambda r: r["busy_s"])[len(runs[kind]) // 2] for _, kind in RUNS}
    pub = m["published"]
    rows = ["| run | records | Kafka messages | seconds of each run | seconds (median) | records/s (from /healthz) | "
            "records/s (its own clock, median) | top root cause |", "|---|---|---|---|---|---|---|---|"]
    for label, kind in RUNS:
        r = med[kind]
        rows.append(f"| {label} | {r['records']:,} | {messages(pub[f'{kind}0']):,} | "
                    f"{', '.join(_secs(x['seconds']) for x in runs[kind])} | {_secs(r['seconds'])} | {r['rate']:,.0f} | "
                    f"{busy[kind]['busy_rate']:,.0f} | {r['top_cause']} {r['top_entity']} |")
    mapped = med["mapped"]
    ratios = sorted(b["rate"] / a["rate"] for a, b in zip(runs["json"], runs["mapped"]))
    fault = m["truth"]["faults"][0]
    # the mapped worker by its own clock against faust's raw read of the same topic, round by round
    own = sorted(b["busy_rate"] / f["rate"] for b, f in zip(runs["mapped"], m["fraws"]))
    own_ratio = own[len(own) // 2]
    verdict = [
        f"- mapped / contract, one worker (median of the rounds' ratios, from /healthz): {ratios[len(ratios) // 2]:.2f}; "
        f"by the workers' own clocks (medians): {busy['mapped']['busy_rate'] / busy['json']['busy_rate']:.2f}",
        f"- one worker >= {TARGET_RATE:,} records/s end to end with mapping on: {mapped['rate']:,.0f} -> "
        f"**{'PASS' if mapped['rate'] >= TARGET_RATE else 'MISS'}**",
        f"- one worker >= {TARGET_RATIO:.0%} of the raw consume rate of faust-streaming with mapping on (its own clock "
        f"against a faust agent that only counts the mapped topic's messages, median of the rounds' ratios; raw: "
        f"{', '.join(_secs(f['seconds']) for f in m['fraws'])}): {own_ratio:.0%} -> "
        f"**{'PASS' if own_ratio >= TARGET_RATIO else 'MISS'}**",
        f"- rejected by the mapped worker (by reason; then dead-lettered messages, duplicates): "
        f"{', '.join(f'{k} {v:,}' for k, v in mapped['rejects'].items()) or 'none'} (its NIC records reach the "
        f"engine only through the mapping: the pfc_storm on a host NIC in the table comes from them)",
        f"- the same incident from both inputs: {'yes' if med['json']['top_cause'] == mapped['top_cause'] == fault['cause'] and med['json']['top_entity'] == mapped['top_entity'] else 'no'} "
        f"(truth: {fault['cause']} {fault['entity']['id']})",
    ]
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    intro = (f"Run {stamp} on {platform.machine()} ({os.cpu_count()} cores), Python {platform.python_version()}, "
             f"{'the broker at ' + m['broker'] if m['broker'] else 'a broker started by the bench'}. Scenario "
             f"{m['folder'].name} ({FABRIC['spines']} spines, {FABRIC['leaves']} leaves x {FABRIC['hosts_per_leaf']} "
             f"hosts, pfc_storm), published twice per round with `publish_files`: as recorded (contract names) and "
             f"with every nic_port record as Telegraf's inputs.ethtool writes an mlx5 NIC (`ethtool`, "
             f"driver=mlx5_core, link 1/0), which the worker maps back with the shipped `telegraf_ethtool_mlx5`. "
             f"One worker on each, {m['repeat']} rounds, alternating; the run of median duration is reported, timed "
             f"as in the section \"Kafka throughput\" (from /healthz until every record is counted and the "
             f"incident stored). "
             f"The machine is shared: compare the two rows, not other runs.")
    section = "\n".join(["## Kafka throughput with mapping (`bench/kafka_throughput.py --mapped`)", "", intro, "",
                         *rows, "", *verdict, ""])
    print("\n".join(rows + [""] + verdict).replace("**", ""))
    write_section(out, "## Kafka throughput with mapping", section)
    print(f"wrote {out}", file=sys.stderr)
