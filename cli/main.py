"""`fabric-rca`: the command table. Each subcommand's flags and handler live in `cli/commands/`."""
from __future__ import annotations

import argparse
import sys

from cli.commands import checks, demo, evaluate, operations, replay, simulate, store, tokens, topology, worker
from cli.commands.worker import worker_settings
from cli.common import EXIT_USAGE, CliError

__all__ = ["CliError", "main", "parser", "worker_settings"]

# In the order `fabric-rca --help` lists them.
COMMANDS = (replay.add, store.add, simulate.add, evaluate.add, checks.add, topology.add, worker.add, worker.add_topics,
            operations.add, tokens.add, demo.add)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fabric-rca", description="Root-cause diagnosis for AI-cluster RoCE fabrics.")
    sub = p.add_subparsers(dest="command", required=True)
    for add in COMMANDS:
        add(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    from api.store.db import StoreError
    from cli.runtime import tune_gc
    from engine.jobs import JobError
    from engine.replay import ReplayError
    from engine.topology import TopologyError
    from rules.loader import RuleError
    from streams.publish import PublishError
    from streams.topics import KafkaUnavailable

    args = parser().parse_args(argv)
    tune_gc()
    try:
        return args.fn(args)
    except (CliError, TopologyError, RuleError, JobError, ReplayError, StoreError, KafkaUnavailable, PublishError,
            ValueError, FileNotFoundError) as exc:  # ValueError includes ModelError and TrainingError
        print(f"fabric-rca {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
