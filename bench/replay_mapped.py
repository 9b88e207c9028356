"""The mapped path of the replay benchmark (`bench/replay_throughput.py --mapped`): the
scenario's telemetry in line protocol, as recorded and with nic_port as Telegraf's
inputs.ethtool writes an mlx5 NIC, replayed beside the JSON file and raw read, in
interleaved rounds; and the shipped mapping alone. Its own section of docs/benchmarks.md.
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from bench.doc import median_run, run_stamp, write_section
from bench.replay_throughput import measure
from testkit.mlx5_ethtool import as_ethtool


def write_line_protocol(folder: Path) -> tuple[Path, Path]:
    """The scenario's telemetry in line protocol, once (cached beside it): contract
    records, and the same with nic_port records as inputs.ethtool writes them."""
    import gzip

    from engine.lineproto import dumps
    from engine.normalize import parse_line
    from engine.replay import open_lines

    lp, mapped = folder / "telemetry-contract.lp.gz", folder / "telemetry-ethtool.lp.gz"
    if lp.exists() and mapped.exists():
        return lp, mapped
    print(f"writing {lp.name} and {mapped.name} (once) ...", file=sys.stderr)
    with gzip.open(lp, "wt", compresslevel=1) as a, gzip.open(mapped, "wt", compresslevel=1) as b:
        for line in open_lines(folder / "telemetry.jsonl.gz"):
            for m in parse_line(line)[0]:
                ns = round(m.ts * 1e9)
                a.write(dumps(m.name, m.tags, m.fields, ns) + "\n")
                b.write(dumps(*as_ethtool(m.name, m.tags, m.fields), ns) + "\n")
    return lp, mapped


def run_map(path: Path, n: int = 50_000) -> dict:
    """The mapping alone: the shipped mappings' `map` over the file's first `n` ethtool records."""
    from engine.mapping import load_mappings, shipped_files
    from engine.normalize import parse_line
    from engine.replay import open_lines

    mappings = load_mappings(shipped_files())
    records = []
    for line in open_lines(path):
        if line.startswith(b"ethtool,"):
            records.extend(parse_line(line)[0])
            if len(records) >= n:
                break
    t0 = time.perf_counter()
    for m in records:
        mappings.map(m)
    return {"records": len(records), "seconds": time.perf_counter() - t0, "fields": len(records[0].fields)}


MAPPED_MODES = (("replay, JSON (contract names)", "replay"),
                ("replay, line protocol (contract names)", "file:{lp}"),
                ("replay, line protocol, nic_port as inputs.ethtool (mapped)", "file:{mapped}"),
                ("raw read + json.loads (the JSON file)", "raw"))


def mapped_main(args, folder: Path) -> None:
    """--mapped: the JSON file, its line-protocol copy and the copy with ethtool records,
    `--repeat` rounds interleaved; its own section of docs/benchmarks.md."""
    lp, mapped = write_line_protocol(folder)
    modes = [(label, mode.format(lp=lp, mapped=mapped)) for label, mode in MAPPED_MODES]
    rounds = []
    for i in range(args.repeat):
        print(f"round {i + 1} of {args.repeat}: JSON, line protocol, mapped ethtool, raw ...", file=sys.stderr)
        rounds.append([measure(mode, folder) for _, mode in modes])
    med = [median_run([r[i] for r in rounds]) for i in range(4)]
    to_raw = [statistics.median(r[i]["rate"] / r[3]["rate"] for r in rounds) for i in (0, 2)]
    alone = median_run([measure(f"map:{mapped}", folder) for _ in range(args.repeat)])
    ratio = statistics.median(r[2]["rate"] / r[1]["rate"] for r in rounds)
    lp_ratio = statistics.median(r[1]["rate"] / r[0]["rate"] for r in rounds)
    cpu = [statistics.median(r[0]["cpu_seconds"] / r[i]["cpu_seconds"] for r in rounds) for i in (1, 2)]
    same = len({(m["incidents"], tuple(m["causes"])) for m in med[:3]}) == 1
    head = ["| run | records | seconds of each round | records/s (median run) | peak RSS MiB | incidents (top causes) |",
            "|---|---|---|---|---|---|"]
    lines = []
    for i, ((label, _), m) in enumerate(zip(modes, med)):
        each = ", ".join(f"{r[i]['seconds']:.1f}" for r in rounds)
        found = f"{m['incidents']} ({', '.join(m['causes'])})" if "incidents" in m else "-"
        lines.append(f"| {label} | {m['records']:,} | {each} | {m['rate']:,.0f} | {m['peak_rss_mib']:.0f} | {found} |")
    section = "\n".join([
        "## Mapped input (`bench/replay_throughput.py --mapped`)",
        "",
        run_stamp() +
        f"{args.repeat} rounds interleaved, the benchmark's scenario at {med[0]['records']:,} records ({folder.name}). "
        "The mapped file is the line-protocol one with every nic_port record written as Telegraf's inputs.ethtool "
        f"writes an mlx5 NIC (`ethtool`, driver=mlx5_core, link 1/0): {med[2]['mapped']:,} records "
        f"({med[2]['mapped'] / med[2]['records']:.0%}) go through the shipped mapping `telegraf_ethtool_mlx5`.",
        "",
        *head, *lines,
        "",
        f"- mapped / unmapped line protocol (median of the rounds' ratios): {ratio:.2f}; "
        f"line protocol / JSON: {lp_ratio:.2f}; by the replays' CPU time (a shared machine's waits left out): "
        f"line protocol / JSON {cpu[0]:.2f}, mapped / JSON {cpu[1]:.2f}",
        f"- the mapping alone (`MappingSet.map`, median of {args.repeat} runs over {alone['records']:,} ethtool "
        f"records of {alone['fields']} fields): {alone['seconds'] / alone['records'] * 1e6:.1f} µs per record, "
        f"{alone['rate']:,.0f} records/s",
        f"- replay >= 50,000 records/s with mapping on: {med[2]['rate']:,.0f} -> "
        f"{'met' if med[2]['rate'] >= 50_000 else '**MISS**'} (the JSON replay of the same rounds: "
        f"{med[0]['rate']:,.0f}, {'met' if med[0]['rate'] >= 50_000 else 'a miss too'})",
        f"- ratio to raw read + json.loads of the same rounds (median of the rounds' ratios; this machine's raw rate: "
        f"{med[3]['rate']:,.0f} records/s): mapped {to_raw[1]:.2f}, JSON {to_raw[0]:.2f} (target >= 0.2: "
        f"{'met' if to_raw[1] >= 0.2 else '**MISS**'})",
        f"- the same incidents from every input: {'yes' if same else '**NO**'}",
        "",
    ])
    print(section)
    write_section(args.out, "## Mapped input", section)
    print(f"wrote {args.out}", file=sys.stderr)
