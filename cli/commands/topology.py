"""`fabric-rca topology show FILE` and `fabric-rca topology check --declared X --lldp DIR`."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

EXIT_DIFFERENT = 1  # `check`: the cabling differs from the declared topology


def add(sub) -> None:
    to = sub.add_parser("topology", help="topology files: what they load as, and the cabling against them")
    tsub = to.add_subparsers(dest="topology_command", required=True)
    ts = tsub.add_parser("show", help="devices, links and the reader's warnings of a topology file or lldpctl folder")
    ts.add_argument("file", type=Path, help="DOT, containerlab YAML, fabric-rca JSON, lldpctl JSON or a folder of it")
    ts.add_argument("--json", action="store_true", help="the engine's own form plus warnings and excluded devices")
    ts.set_defaults(fn=run_show)
    tc = tsub.add_parser("check", help="compare the cabling lldpctl reports with a declared topology "
                                       f"(exit {EXIT_DIFFERENT} when links are missing, extra or miswired)")
    tc.add_argument("--declared", type=Path, required=True, help="the topology file the engine is given")
    tc.add_argument("--lldp", type=Path, required=True, metavar="DIR|FILE",
                    help="`lldpctl -f json` of every device: a folder of DEVICE.json files, or one file")
    tc.add_argument("--json", action="store_true", help="the report as JSON")
    tc.set_defaults(fn=run_check)


def _warn(warnings) -> None:
    for line in warnings:
        print(f"warning: {line}", file=sys.stderr)


def run_show(args: argparse.Namespace) -> int:
    from engine.topology import load_topology

    topo = load_topology(args.file)
    if args.json:
        print(json.dumps(topo.to_dict() | {"excluded": topo.excluded, "warnings": list(topo.warnings)}, indent=2))
        return 0
    _warn(topo.warnings)
    roles = {r: len(topo.devices(r)) for r in ("superspine", "spine", "leaf", "host", "storage")}
    print(f"{args.file}: {len(topo.devices())} devices ({', '.join(f'{n} {r}' for r, n in roles.items() if n)}), "
          f"{len(topo.links())} links" + (f"; left out of the fabric: {', '.join(sorted(topo.excluded))}"
                                           if topo.excluded else ""))
    return 0


def run_check(args: argparse.Namespace) -> int:
    from engine.topology import load_topology
    from engine.topology_check import cross_check
    from engine.topology_load import TopologyError, read_spec

    declared = load_topology(args.declared)
    observed = read_spec(args.lldp)
    if not observed.surveyed:
        raise TopologyError(f"{args.lldp}: not lldpctl JSON output (no device's neighbours in it)")
    report = cross_check(declared, observed)
    report = {"declared": str(args.declared), "lldp": str(args.lldp), **report,
              "warnings": list(declared.warnings) + list(observed.warnings)}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _warn(report["warnings"])
        _print_report(report)
    return 0 if report["consistent"] else EXIT_DIFFERENT


def _print_report(report: dict) -> None:
    s = report["summary"]
    print(f"{report['lldp']} ({s['reporting_devices']} devices reporting, {s['observed_links']} cables) against "
          f"{report['declared']} ({s['declared_links']} links): {s['matching']} matching, {s['miswired']} miswired, "
          f"{s['missing']} missing, {s['extra']} extra, {s['unverified']} unverified, {s['non_fabric']} non-fabric")
    for item in report["miswired"]:
        print(f"  miswired {item['link']}: seen as {', '.join(item['observed'])}")
    for item in report["missing"]:
        print(f"  missing  {item['link']}: not seen by {', '.join(item['not_seen_by'])}")
    for item in report["extra"]:
        unknown = item.get("unknown_devices")
        print(f"  extra    {item['link']} ({item['where']})" + (f"; not declared: {', '.join(unknown)}" if unknown else ""))
