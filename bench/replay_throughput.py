"""Replay throughput: records/s of the embedded pipeline vs. reading + json.loads alone.

    .venv/bin/python bench/replay_throughput.py [--records 1000000] [--out docs/benchmarks.md]

Generates (once, cached under .cache/bench/) a scenario of at least --records records,
then measures, in fresh subprocesses on the same file so peak memory is per run:
  raw    - read the gzip file line by line and json.loads each line (the floor)
  replay - the full pipeline (normalize, order, features, detect, correlate, rank) in
           memory, incidents kept in a dict
and prints records/s, peak RSS and the ratio replay/raw. A ratio within one run is
meaningful on a shared, noisy machine; absolute numbers less so.
"""
from __future__ import annotations

import argparse
import json
import platform
import resource
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def generate(records: int, cache: Path) -> Path:
    import sim

    spec = sim.FabricSpec(spines=4, leaves=16, hosts_per_leaf=16, storage_hosts=4)
    per_second = 2 * (16 * (16 + 4) + 4 * 16) + 16 * 16 + 4 + 4  # rough: ports+queues, NICs, storage
    duration = int(records / per_second * 1.05) + 60
    out = cache / f"bench-{records}"
    truth_file = out / "truth.json"
    if truth_file.exists() and json.loads(truth_file.read_text())["records"] >= records:
        return out
    print(f"generating >= {records:,} records into {out} (once) ...", file=sys.stderr)
    while True:
        truth = sim.simulate(out=out, scenario="pfc_storm", seed=3, fabric=spec, duration=duration)
        if truth["records"] >= records:
            return out
        duration = int(duration * records / truth["records"] * 1.05) + 10


def run_raw(folder: Path) -> dict:
    from engine.replay import open_lines
    t0 = time.perf_counter()
    n = 0
    loads = json.loads
    for line in open_lines(folder / "telemetry.jsonl.gz"):
        loads(line)
        n += 1
    return {"records": n, "seconds": time.perf_counter() - t0}


def run_replay(folder: Path) -> dict:
    from cli.run import build_pipeline
    from engine.replay import replay
    from engine.topology import load_topology

    pipeline = build_pipeline(topology=load_topology(folder / "topology.dot"), jobs_file=folder / "jobs.jsonl",
                              rule_files=None)
    latest: dict[str, dict] = {}
    t0 = time.perf_counter()
    stats = replay(pipeline, [folder / "telemetry.jsonl.gz"], sink=lambda ch: latest.update((i["id"], i) for i in ch))
    return {"records": stats.records, "seconds": time.perf_counter() - t0, "incidents": len(latest)}


def child(mode: str, folder: Path) -> None:
    result = (run_raw if mode == "raw" else run_replay)(folder)
    result["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


def measure(mode: str, folder: Path) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", mode, str(folder)], check=True,
                         capture_output=True, text=True)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    r["rate"] = r["records"] / r["seconds"]
    return r


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--cache", type=Path, default=ROOT / ".cache" / "bench")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks.md")
    ap.add_argument("--child", nargs=2, metavar=("MODE", "DIR"))
    args = ap.parse_args()
    if args.child:
        child(args.child[0], Path(args.child[1]))
        return
    folder = generate(args.records, args.cache)
    raw = measure("raw", folder)
    rep = measure("replay", folder)
    ratio = rep["rate"] / raw["rate"]
    lines = [
        f"| raw read + json.loads | {raw['records']:,} | {raw['seconds']:.1f} | {raw['rate']:,.0f} | {raw['peak_rss_mib']:.0f} | 1.00 |",
        f"| replay (full pipeline) | {rep['records']:,} | {rep['seconds']:.1f} | {rep['rate']:,.0f} | {rep['peak_rss_mib']:.0f} | {ratio:.2f} |",
    ]
    head = ["| run | records | seconds | records/s | peak RSS MiB | ratio to raw |", "|---|---|---|---|---|---|"]
    print("\n".join(head + lines))
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    section = "\n".join([
        "## Replay throughput (`bench/replay_throughput.py`)",
        "",
        f"Run {stamp} on {platform.machine()}, Python {platform.python_version()}, one process per row, "
        f"same file ({rep['records']:,} records, {folder.name}). Target: >= 50,000 records/s and ratio >= 0.2.",
        "",
        *head, *lines,
        "",
        f"Incidents found in the benchmark scenario: {rep['incidents']}.",
        "",
    ])
    write_section(args.out, "## Replay throughput", section)
    print(f"wrote {args.out}", file=sys.stderr)


def write_section(path: Path, heading: str, section: str) -> None:
    """Replace (or append) one `## ` section of docs/benchmarks.md, keeping the others."""
    text = path.read_text() if path.exists() else "# Benchmarks\n\nFigures written by the scripts in `bench/`.\n\n"
    parts = text.split("\n## ")
    kept = [parts[0].rstrip("\n") + "\n"] + ["## " + p.rstrip("\n") + "\n" for p in parts[1:]
                                              if not ("## " + p).startswith(heading)]
    path.write_text("\n".join(kept + [section]))


if __name__ == "__main__":
    main()
