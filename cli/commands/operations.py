"""`fabric-rca maintenance add|list|delete` and `fabric-rca feedback add|list|export`.

Both write the store the API serves (`--db`, as every command); the API routes and these
commands call the same repository functions (`api.maintenance`, `api.feedback`)."""
from __future__ import annotations

import json
import os
from pathlib import Path

from cli.common import DB_HELP
from contract.entities import CAUSES


class OperationError(ValueError):
    """A flag that is wrong; the message names it."""


def _session(args):
    from sqlmodel import Session

    from api.store.db import create_schema, make_engine, resolve_db_url

    engine = make_engine(resolve_db_url(args.db, os.environ))
    create_schema(engine)
    return Session(engine)


def _time(flag: str, value: str):
    from fastapi import HTTPException

    from api.routes import parse_time
    try:
        return parse_time(flag, value)
    except HTTPException as exc:
        raise OperationError(f"--{flag}: {exc.detail[0]['msg']}") from None


def cmd_maintenance_add(args) -> int:
    from api.maintenance import add_window

    starts, ends = _time("from", args.from_), _time("until", args.until)
    if ends <= starts:
        raise OperationError(f"--until ({args.until}) must be after --from ({args.from_})")
    with _session(args) as session:
        window = add_window(session, entity=args.entity, starts_at=starts, ends_at=ends, note=args.note or "")
    print(json.dumps(window) if args.format == "json" else f"added maintenance window {window['id']}: "
          f"{window['entity']} from {window['from']} until {window['until']}")
    return 0


def cmd_maintenance_list(args) -> int:
    from api.maintenance import list_windows

    with _session(args) as session:
        windows = list_windows(session)
    if args.format == "json":
        print(json.dumps(windows, indent=2))
    elif not windows:
        print("no maintenance windows")
    else:
        print(f"{'ID':>4}  {'ENTITY':<24}  {'FROM (UTC)':<24}  {'UNTIL (UTC)':<24}  NOTE")
        for w in windows:
            print(f"{w['id']:>4}  {w['entity']:<24}  {w['from']:<24}  {w['until']:<24}  {w['note']}")
    return 0


def cmd_maintenance_delete(args) -> int:
    from api.maintenance import delete_window

    with _session(args) as session:
        if not delete_window(session, window_id=args.id):
            raise OperationError(f"no maintenance window with id {args.id}")
    print(f"deleted maintenance window {args.id}")
    return 0


def cmd_feedback_add(args) -> int:
    from api.feedback import FeedbackError, add_feedback

    with _session(args) as session:
        try:
            made = add_feedback(session, incident_id=args.incident, verdict=args.verdict,
                                right_cause=args.right_cause, right_entity=args.right_entity,
                                duplicate_of=args.duplicate_of, note=args.note or "")
        except FeedbackError as exc:
            raise OperationError(f"--{exc.field.replace('_', '-')}: {exc}") from None
    if made is None:
        raise OperationError(f"no incident with id {args.incident!r}")
    print(json.dumps(made) if args.format == "json" else
          f"recorded {made['verdict']} on {made['incident_id']} ({made['cause']} on {made['entity']})")
    return 0


def cmd_feedback_list(args) -> int:
    from api.feedback import latest_verdicts, list_feedback, precision_table

    with _session(args) as session:
        verdicts = list_feedback(session, incident_id=args.incident)
        table = precision_table(latest_verdicts(session), by_day=False)
    if args.format == "json":
        print(json.dumps({"feedback": verdicts, "precision": table}, indent=2))
        return 0
    for f in verdicts:
        extra = f" -> {f['right_cause']} on {f['right_entity']}" if f["right_cause"] else ""
        extra += f" -> {f['duplicate_of']}" if f["duplicate_of"] else ""
        print(f"{f['created_at']}  {f['incident_id']}  {f['verdict']}{extra}  {f['note']}")
    for row in table:
        shown = "-" if row["precision"] is None else f"{row['precision']:.2f}"
        print(f"precision {row['cause']}: {shown} ({row['confirmed']} confirmed, {row['false_alarm']} false alarms, "
              f"{row['wrong_cause']} wrong cause, {row['duplicate_of']} duplicates)")
    return 0


def cmd_feedback_export(args) -> int:
    from api.feedback_export import export_cases

    with _session(args) as session:
        written = export_cases(session, out=args.out, telemetry=args.telemetry, topology=args.topology,
                               jobs=args.jobs, margin_s=args.margin_s)
    print(f"wrote {len(written)} labelled case(s) under {args.out}"
          + (f"; score them with: fabric-rca evaluate {args.out}/*" if written else ""))
    return 0


def add(sub) -> None:
    m = sub.add_parser("maintenance", help="maintenance windows: incidents on their entities are marked, not notified")
    msub = m.add_subparsers(dest="maintenance_command", required=True)
    ma = msub.add_parser("add", help="add a window")
    ma.add_argument("--entity", required=True, help="a device (leaf03), an interface (leaf03:swp1) or a link id")
    ma.add_argument("--from", dest="from_", required=True, metavar="TIME", help="RFC 3339 or epoch seconds")
    ma.add_argument("--until", required=True, metavar="TIME", help="RFC 3339 or epoch seconds")
    ma.add_argument("--note")
    ma.set_defaults(fn=cmd_maintenance_add)
    ml = msub.add_parser("list", help="every window, earliest first")
    ml.set_defaults(fn=cmd_maintenance_list)
    md = msub.add_parser("delete", help="delete a window")
    md.add_argument("id", type=int, metavar="ID")
    md.set_defaults(fn=cmd_maintenance_delete)

    f = sub.add_parser("feedback", help="operator verdicts on incidents, field precision, labelled cases")
    fsub = f.add_subparsers(dest="feedback_command", required=True)
    fa = fsub.add_parser("add", help="record a verdict on an incident")
    fa.add_argument("incident", metavar="INCIDENT_ID")
    fa.add_argument("--verdict", required=True, choices=("confirmed", "false_alarm", "wrong_cause", "duplicate_of"))
    fa.add_argument("--right-cause", choices=CAUSES, help="with wrong_cause: the cause it really was")
    fa.add_argument("--right-entity", help="with wrong_cause: the entity it really was on")
    fa.add_argument("--duplicate-of", metavar="INCIDENT_ID", help="with duplicate_of: the incident it repeats")
    fa.add_argument("--note")
    fa.set_defaults(fn=cmd_feedback_add)
    fl = fsub.add_parser("list", help="verdicts (oldest first) and field precision per cause")
    fl.add_argument("--incident", metavar="INCIDENT_ID")
    fl.set_defaults(fn=cmd_feedback_list)
    fe = fsub.add_parser("export", help="write judged incidents as labelled cases `fabric-rca evaluate` scores")
    fe.add_argument("--out", type=Path, required=True, metavar="DIR")
    fe.add_argument("--telemetry", type=Path, nargs="+", required=True, metavar="FILE",
                    help="the recorded telemetry the incidents came from (.jsonl / .jsonl.gz)")
    fe.add_argument("--topology", type=Path, required=True)
    fe.add_argument("--jobs", type=Path, help="job placements or squeue --json (default: none)")
    fe.add_argument("--margin-s", type=float, default=300.0, metavar="S",
                    help="telemetry kept before and after each incident (default 300)")
    fe.set_defaults(fn=cmd_feedback_export)
    for p in (ma, ml, md, fa, fl, fe):
        p.add_argument("--db", help=DB_HELP)
        p.add_argument("--format", choices=("table", "json"), default="table")
