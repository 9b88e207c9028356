"""Fabric shapes beyond the two-tier, one-NIC-per-host Clos, made from a generated run:

- "two_tier": unchanged.
- "three_tier": a superspine layer above the spines (function="superspine" in the DOT);
  every spine gets one uplink to each superspine, carrying steady inter-pod traffic
  (5-30 % of line rate, no errors), reported at the switch interval.
- "rails": rail-optimised multi-NIC hosts: the endpoint in slot s of leaf k becomes NIC
  eth{k} (device mlx5_{k}) of host gpu{s+1}, so each host has one NIC per leaf (8 NICs
  on an 8-leaf fabric) and each leaf is one rail. Jobs and truth are renamed alike.
"""
from __future__ import annotations

import gzip
import heapq
import json
import random
import re
from pathlib import Path

from .events import ms
from .fabric import NIC, Fabric
from .jobs import Job, hostlist
from .paths import affected_jobs
from .realism import SEP

SHAPES = {"tune": ("two_tier", "two_tier", "rails"), "tune-wide": ("two_tier", "rails", "three_tier"),
          "tune-any": ("two_tier", "rails", "three_tier"), "tune-range": ("two_tier", "rails", "three_tier"),
          "tune-retired": ("two_tier", "rails", "three_tier"), "test": ("two_tier", "rails", "three_tier")}
SUPERSPINES = 2


def _read(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as fh:
        return [json.loads(line) for line in fh]


def _write(path: Path, recs) -> int:
    n = 0
    with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0,
                                                  compresslevel=1) as gz:
        for rec in recs:
            gz.write((json.dumps(rec, separators=SEP) + "\n").encode())
            n += 1
    return n


def reshape(folder: Path, fab: Fabric, shape: str, rng: random.Random, *, interval: int) -> dict:
    if shape == "two_tier":
        return {}
    if shape == "three_tier":
        return _three_tier(Path(folder), fab, rng, interval)
    if shape == "rails":
        return _rails(Path(folder), fab)
    raise ValueError(f"unknown shape {shape!r}")


# --- three tiers ------------------------------------------------------------------------
def superspine_links(fab: Fabric) -> list[tuple[str, str, str, str]]:
    """(spine, spine iface, superspine, superspine iface) of every spine uplink."""
    out = []
    for j in range(SUPERSPINES):
        for i, spine in enumerate(fab.spines):
            out.append((spine, f"swp{fab.spec.leaves + 1 + j}", f"superspine{j + 1:02d}",
                        f"swp{i + 1}"))
    return out


def _sort_key(rec: dict) -> float:
    ts = rec["timestamp"]
    return ts / (1e9 if ts > 1e17 else 1e3 if ts > 1e11 else 1)


def _port_records(fab: Fabric, rng: random.Random, interval: int, start: float,
                  end: float, sp_tmpl: dict, sq_tmpl: dict) -> list[dict]:
    out = []
    line = fab.spec.line_bytes
    for a, ai, b, bi in superspine_links(fab):
        share = rng.uniform(0.05, 0.3)
        for dev, iface in ((a, ai), (b, bi)):
            octets, pkts, ecn = rng.randint(10**11, 10**13), rng.randint(10**7, 10**9), 0
            base = {k: v for k, v in sp_tmpl["fields"].items()}
            for k, v in base.items():
                if isinstance(v, int) and k not in ("speed_mbps",):
                    base[k] = rng.randint(0, 100) if "pkts" in k or "pause" in k else 0
            t = start + rng.uniform(0, interval)
            while t < end:
                step = line * share * interval * rng.uniform(0.95, 1.05)
                octets += int(step)
                pkts += int(step / 4096)
                ecn += rng.randint(0, 3)
                f = dict(base, if_in_octets=octets, if_out_octets=octets,
                         if_in_ucast_pkts=pkts, if_out_ucast_pkts=pkts, ecn_marked_packets=ecn,
                         oper_status="up", admin_status="up")
                out.append({"name": "switch_port", "tags": {"host": dev, "interface": iface},
                            "fields": f, "timestamp": ms(t)})
                q = {k: (0 if isinstance(v, int) else v) for k, v in sq_tmpl["fields"].items()}
                q.update(packets=pkts, bytes=octets, curr_occupancy_bytes=rng.randint(0, 20000),
                         shared_watermark_bytes=rng.randint(20000, 200000),
                         pfcwd_status="operational")
                out.append({"name": "switch_queue", "tags": dict(sq_tmpl["tags"], host=dev,
                                                                 interface=iface),
                            "fields": q, "timestamp": ms(t)})
                t += interval
    return sorted(out, key=_sort_key)


def _three_tier(folder: Path, fab: Fabric, rng: random.Random, interval: int) -> dict:
    dot = (folder / "topology.dot").read_text().rstrip().rstrip("}")
    lines = [f'  "superspine{j + 1:02d}" [function="superspine"]' for j in range(SUPERSPINES)]
    lines += [f'  "{a}":"{ai}" -- "{b}":"{bi}"' for a, ai, b, bi in superspine_links(fab)]
    (folder / "topology.dot").write_text(dot + "\n".join(lines) + "\n}\n")
    truth = json.loads((folder / "truth.json").read_text())
    path = folder / "telemetry.jsonl.gz"
    recs = _read(path)
    sp = next(r for r in recs if r["name"] == "switch_port")
    sq = next(r for r in recs if r["name"] == "switch_queue")
    extra = _port_records(fab, rng, interval, truth["start"], truth["end"], sp, sq)
    n = _write(path, heapq.merge(recs, extra, key=_sort_key))
    return {"records": n, "superspines": SUPERSPINES}


# --- rails ------------------------------------------------------------------------------
def rail_names(fab: Fabric) -> dict[str, tuple[str, str]]:
    """Old host name -> (new host name, NIC interface)."""
    width = max(3, len(str(fab.spec.hosts_per_leaf)))
    return {e.name: (f"gpu{e.slot + 1:0{width}d}", f"eth{e.leaf}") for e in fab.hosts}


def _expand(expr: str) -> list[str]:
    out = []
    for m in re.finditer(r"([a-z]+)(?:\[([^\]]*)\]|(\d+))", expr):
        prefix, body, single = m.groups()
        if single:
            out.append(prefix + single)
            continue
        for part in body.split(","):
            lo, _, hi = part.partition("-")
            for n in range(int(lo), int(hi or lo) + 1):
                out.append(f"{prefix}{n:0{len(lo)}d}")
    return out


def host_level_truth(fab: Fabric, truth: dict, names: dict[str, tuple[str, str]]) -> dict:
    """Each fault's affected jobs as contract section 6 defines them on the rail fabric
    (before renaming). Job placements name hosts, not NICs (contract section 2), so a job
    on a rail host holds every NIC of that host: its paths are those between all of its
    hosts' NICs, and a fault on any of them, or on any rail leaf they reach, touches it.
    The generator's traffic uses only the NICs the job's endpoints were before the
    renaming; the jobs that traffic reaches are kept as `affected_jobs_by_nic` (what a
    NIC-level placement could name), not scored."""
    index = {e.name: e.index for e in fab.endpoints}
    nics: dict[str, list[int]] = {}  # rail host -> every endpoint that became one of its NICs
    for old, (host, _) in names.items():
        nics.setdefault(host, []).append(index[old])
    jobs = []
    for j in truth.get("jobs", []):
        hosts = sorted({i for h in j["hosts"] for i in nics.get(names.get(h, (h, ""))[0], [index[h]])})
        jobs.append(Job(j["job_id"], j["tenant"], "", tuple(hosts), tuple(index[s] for s in j.get("storage", [])),
                        0.0, j["start"], j["end"]))
    for f in truth.get("faults", []):
        f["affected_jobs_by_nic"] = f["affected_jobs"]
        f["affected_jobs"] = affected_jobs(fab, jobs, cause=f["cause"], kind=f["entity"]["kind"],
                                           entity=f["entity"]["id"], start=f["start"], end=f["end"])
    return truth


def _rails(folder: Path, fab: Fabric) -> dict:
    names = rail_names(fab)
    pattern = re.compile(r"\b(gpu\d+)(:eth0)?\b")

    def sub(m: re.Match) -> str:
        if m.group(1) not in names:
            return m.group(0)
        host, iface = names[m.group(1)]
        return f"{host}:{iface}" if m.group(2) else host

    truth = host_level_truth(fab, json.loads((folder / "truth.json").read_text()), names)
    dot = (folder / "topology.dot").read_text()
    node = re.compile(r'^\s*"gpu\d+" \[function="host"\]\n', re.M)
    hosts = sorted({h for h, _ in names.values()})
    dot = node.sub("", dot).replace('graph "fabric" {\n', 'graph "fabric" {\n' + "".join(
        f'  "{h}" [function="host"]\n' for h in hosts), 1)
    dot = re.sub(r'"(gpu\d+)":"eth0"', lambda m: '"%s":"%s"' % names[m.group(1)], dot)
    (folder / "topology.dot").write_text(dot)
    jobs = []
    for line in (folder / "jobs.jsonl").read_text().splitlines():
        rec = json.loads(line)
        new = sorted({names.get(h, (h, ""))[0] for h in _expand(rec["fields"]["nodes"])})
        rec["fields"]["nodes"] = hostlist(new)
        jobs.append(json.dumps(rec, separators=SEP))
    (folder / "jobs.jsonl").write_text("\n".join(jobs) + "\n")
    truth = json.loads(pattern.sub(sub, json.dumps(truth)))
    for job in truth.get("jobs", []):
        job["hosts"] = sorted(set(job["hosts"]))
    (folder / "truth.json").write_text(json.dumps(truth, indent=2) + "\n")
    path = folder / "telemetry.jsonl.gz"

    def renamed():
        for rec in _read(path):
            tags = rec["tags"]
            if tags.get("host") in names and tags.get("interface", NIC) == NIC:
                host, iface = names[tags["host"]]
                tags.update(host=host, interface=iface)
                if "device" in tags:
                    tags["device"] = "mlx5_" + iface[3:]
            yield rec
    recs = list(renamed())
    _write(path, recs)
    return {"nics_per_host": fab.spec.leaves}
