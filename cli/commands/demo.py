"""`fabric-rca demo`: a small faulty fabric, replayed and served."""
from __future__ import annotations

from pathlib import Path


def add(sub) -> None:
    d = sub.add_parser("demo", help="generate a small faulty fabric, replay it, serve the console and the API")
    d.add_argument("--out", type=Path, default=Path("demo-out"))
    d.add_argument("--port", type=int, default=8000)
    d.add_argument("--seed", type=int, default=1)
    d.add_argument("--no-serve", action="store_true", help="stop after printing the incidents")
    d.set_defaults(fn=run)


def run(args) -> int:
    from cli.demo import run_demo
    from cli.main import main
    return run_demo(out=args.out, port=args.port, serve=not args.no_serve, seed=args.seed, cli=main)
