"""`fabric-rca tokens add|list|revoke`: the API's bearer tokens, on the database.

The CLI works on the database directly (`--db`), so it is how the first admin token is
made: whoever can write the store is trusted to hand out access to it. After that, an
admin token can also manage tokens over HTTP (`/tokens`)."""
from __future__ import annotations

import json

from cli.commands.operations import OperationError, _session
from cli.common import DB_HELP


def cmd_add(args) -> int:
    from api.auth import TokenError, add_token

    with _session(args) as session:
        try:
            record, token = add_token(session, role=args.role, tenant=args.tenant, name=args.name or "")
        except TokenError as exc:
            raise OperationError(str(exc)) from None
    if args.format == "json":
        print(json.dumps({**record, "token": token}))
    else:
        who = f"tenant {record['tenant']}" if record["tenant"] else record["role"]
        print(f"created token {record['id']} ({who}); it is shown this once, the store keeps only its hash:\n{token}")
    return 0


def cmd_list(args) -> int:
    from api.auth import list_tokens

    with _session(args) as session:
        tokens = list_tokens(session)
    if args.format == "json":
        print(json.dumps(tokens, indent=2))
    elif not tokens:
        print("no tokens (create the first admin token with: fabric-rca tokens add --role admin)")
    else:
        print(f"{'ID':<8}  {'ROLE':<8}  {'TENANT':<16}  {'CREATED (UTC)':<24}  {'REVOKED (UTC)':<24}  NAME")
        for t in tokens:
            print(f"{t['id']:<8}  {t['role']:<8}  {t['tenant'] or '-':<16}  {t['created_at']:<24}  "
                  f"{t['revoked_at'] or '-':<24}  {t['name']}")
    return 0


def cmd_revoke(args) -> int:
    from api.auth import revoke_token

    with _session(args) as session:
        revoked = revoke_token(session, token_id=args.id)
    if revoked is None:
        raise OperationError(f"no token with id {args.id!r} (fabric-rca tokens list shows them)")
    print(json.dumps(revoked) if args.format == "json" else f"revoked token {args.id} at {revoked['revoked_at']}")
    return 0


def add(sub) -> None:
    t = sub.add_parser("tokens", help="API bearer tokens: admin, operator, or one tenant's (stored hashed)")
    tsub = t.add_subparsers(dest="tokens_command", required=True)
    ta = tsub.add_parser("add", help="create a token and print it (once)")
    ta.add_argument("--role", required=True, choices=("admin", "operator", "tenant"),
                    help="admin: manages tokens; operator: sees and annotates everything; tenant: its own incidents")
    ta.add_argument("--tenant", metavar="NAME", help="with --role tenant: the tenant (the jobs' account)")
    ta.add_argument("--name", help="what the token is for, e.g. who holds it")
    ta.set_defaults(fn=cmd_add)
    tl = tsub.add_parser("list", help="every token (ids and roles; never the tokens)")
    tl.set_defaults(fn=cmd_list)
    tr = tsub.add_parser("revoke", help="revoke a token: its next request is refused")
    tr.add_argument("id", metavar="ID")
    tr.set_defaults(fn=cmd_revoke)
    for p in (ta, tl, tr):
        p.add_argument("--db", help=DB_HELP)
        p.add_argument("--format", choices=("table", "json"), default="table")
