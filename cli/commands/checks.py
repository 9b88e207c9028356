"""`fabric-rca rules check` and `fabric-rca mappings check`: validate users' files offline."""
from __future__ import annotations

from pathlib import Path


def add(sub) -> None:
    ru = sub.add_parser("rules", help="rule files")
    rsub = ru.add_subparsers(dest="rules_command", required=True)
    rc = rsub.add_parser("check", help="validate rule files offline")
    rc.add_argument("files", nargs="*", type=Path)
    rc.set_defaults(fn=run_rules_check)

    ma = sub.add_parser("mappings", help="mapping files (real exporters' measurements -> the contract's)")
    msub = ma.add_subparsers(dest="mappings_command", required=True)
    mc = msub.add_parser("check", help="validate mapping files offline (default: the shipped ones)")
    mc.add_argument("files", nargs="*", type=Path)
    mc.set_defaults(fn=run_mappings_check)


def run_rules_check(args) -> int:
    from rules.loader import default_rule_files, load_rules

    files = args.files or default_rule_files()
    ruleset = load_rules(files)
    print(f"ok: {len(ruleset.rules) + len(ruleset.silence)} rules in {len(files)} file(s)")
    return 0


def run_mappings_check(args) -> int:
    from engine.mapping import load_mappings, shipped_files

    files = args.files or shipped_files()
    found = load_mappings(files)
    print(f"ok: {len(found)} mappings in {len(files)} file(s)")
    return 0
