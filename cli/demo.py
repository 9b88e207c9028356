"""`fabric-rca demo`: the whole path on the embedded default, in one command."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Callable


def run_demo(*, out: Path, port: int, serve: bool, seed: int, cli: Callable[[list[str]], int]) -> int:
    """`cli` runs one `fabric-rca` command line (the command table hands itself in)."""
    import sim

    out.mkdir(parents=True, exist_ok=True)
    scenario = out / "scenario"
    db = out / "fabric-rca.db"
    if db.exists():
        db.unlink()
    print(f"1/3 generating a small leaf-spine RoCE fabric with three faults into {scenario}/ ...")
    truth = sim.simulate(out=scenario, scenario="demo", seed=seed)
    for f in truth["faults"]:
        print(f"      injected {f['cause']} at {f['entity']['id']}")
    print("2/3 replaying its telemetry (embedded SQLite store, no Kafka) ...")
    code = cli(["replay", str(scenario / "telemetry.jsonl.gz"), "--topology", str(scenario / "topology.dot"),
                "--jobs", str(scenario / "jobs.jsonl"), "--db", str(db), "--rejects", str(out / "rejects.jsonl")])
    if code:
        return code
    print("3/3 what fabric-rca found:")
    cli(["incidents", "--db", str(db)])
    if not serve:
        return 0
    base = f"http://127.0.0.1:{port}"
    print(f"\nThe console: open {base}/console/ in a browser: the incidents (live), each one's causes,\n"
          f"evidence and topology, the fabric, maintenance windows and field precision.\n"
          f"Served with --auth none: no token is asked, anyone who reaches the port sees everything\n"
          f"(fabric-rca serve asks for tokens by default; docs/operations.md, Tokens). Also try:\n"
          f"  curl -s {base}/incidents | python3 -m json.tool\n"
          f"  curl -sN {base}/incidents/stream   (incident changes as they happen)\n"
          f"  curl -s '{base}/incidents?cause=pfc_storm'\n"
          f"  curl -s {base}/jobs/4242/incidents\n"
          f"  open {base}/docs for the OpenAPI reference\n"
          f"Ctrl-C stops.", flush=True)
    from api.server import serve as serve_api
    from api.store.db import resolve_db_url
    serve_api(db_url=resolve_db_url(str(db), {}), port=port, auth="none")
    return 0
