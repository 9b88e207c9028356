"""`fabric-rca incidents` and `fabric-rca serve`: what the store holds, on the terminal and over HTTP."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from cli.common import DB_HELP, count, db_url


def add(sub) -> None:
    from cli.notify_flags import add_notify_arguments
    i = sub.add_parser("incidents", help="list stored incidents")
    i.add_argument("--db", help=DB_HELP)
    i.add_argument("--format", choices=("table", "json"), default="table")
    i.add_argument("--status", choices=("open", "resolved"))
    i.add_argument("--cause")
    i.add_argument("--limit", type=count, help="at most N incidents, newest first (default: every match)")
    i.set_defaults(fn=run_incidents)

    s = sub.add_parser("serve", help="serve the HTTP API and the web console (/console/)")
    s.add_argument("--db", help=DB_HELP)
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--topology", type=Path, help="serve this topology at /topology (default: the one stored by replay)")
    s.add_argument("--auth", choices=("tokens", "none"), default="tokens",
                   help="tokens (default): every route but /healthz needs a bearer token of `fabric-rca tokens add`; "
                        "none: anyone who reaches the port sees and annotates everything")
    add_notify_arguments(s)
    s.set_defaults(fn=run_serve)


def run_incidents(args) -> int:
    from sqlmodel import Session

    from api.format import incidents_table
    from api.store.db import create_schema, make_engine
    from api.store.repository import count_incidents, list_incidents

    engine = make_engine(db_url(args))
    create_schema(engine)
    filters = {"status": args.status, "cause": args.cause}
    with Session(engine) as session:
        # one query (one snapshot): every match unless --limit, as the contract says
        found = list_incidents(session, **filters, limit=args.limit)
        total = len(found) if args.limit is None or len(found) < args.limit else count_incidents(session, **filters)
    if args.format == "json":
        print(json.dumps(found, indent=2))
    else:
        print(incidents_table(found) if found else "no incidents")
    if total > len(found):
        print(f"fabric-rca incidents: showing {len(found)} of {total} matching incidents (--limit {args.limit}); "
              "drop --limit for all", file=sys.stderr)
    return 0


def run_serve(args) -> int:
    from api.server import serve
    from api.store.db import redacted_url
    from cli.notify_flags import notify_settings_from
    from engine.topology import load_topology

    topology = load_topology(args.topology).to_dict() if args.topology else None
    url = db_url(args)
    notify = notify_settings_from(args, console_default=f"http://{args.host}:{args.port}", topology=args.topology)
    print(f"serving {redacted_url(url)} on http://{args.host}:{args.port} (API docs: /docs)", file=sys.stderr)
    print(auth_notice(args.auth, url), file=sys.stderr)
    if notify is not None:
        print("notifying " + ", ".join(n for n in (notify.alertmanager and f"Alertmanager {notify.alertmanager}",
                                                  notify.webhook and f"webhook {notify.webhook}") if n), file=sys.stderr)
    serve(db_url=url, host=args.host, port=args.port, topology=topology, notify=notify, auth=args.auth)
    return 0


def auth_notice(auth: str, url: str) -> str:
    """What the server asks of its callers, said when it starts."""
    if auth == "none":
        return "auth: none: no token is asked, anyone who reaches the port sees and annotates every incident"
    from sqlmodel import Session

    from api.auth import count_tokens
    from api.store.db import create_schema, make_engine

    from sqlalchemy.exc import SQLAlchemyError

    from api.store.db import StoreError

    engine = make_engine(url)
    try:
        create_schema(engine)
        with Session(engine) as session:
            valid = count_tokens(session)
    except (StoreError, SQLAlchemyError):  # the server starts all the same and answers 503 until the store is back
        return "auth: tokens: every route but /healthz needs Authorization: Bearer <token> (the store cannot be read now)"
    finally:
        engine.dispose()
    if valid:
        return f"auth: tokens ({valid} valid): every route but /healthz needs Authorization: Bearer <token>"
    return ("auth: tokens, and the store holds none yet: every request will be refused; create the first with "
            "fabric-rca tokens add --role admin --db URL")
