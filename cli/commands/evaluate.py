"""`fabric-rca evaluate` and `fabric-rca train`: score the diagnosis on labelled runs; learn models."""
from __future__ import annotations

import sys
from pathlib import Path

from cli.common import CliError, positive


def add(sub) -> None:
    from cli.engine_flags import ORDER, add_engine_arguments
    e = sub.add_parser("evaluate", help="replay scenarios and score the diagnosis against their truth")
    e.add_argument("dirs", nargs="+", type=Path, metavar="DIR")
    e.add_argument("--rules", type=Path, action="append")
    e.add_argument("--methods", metavar="M,M...",
                   help="comma-separated: rules, models (needs --models), baro, nsigma, baro_abs, nsigma_abs "
                        "(default: rules,baro,nsigma, and models with --models); one table per cause, a row per method")
    e.add_argument("--models", type=Path, metavar="DIR", help="anomaly models folder, for the method 'models'")
    e.add_argument("--write", type=Path, help="also write the results as Markdown (e.g. docs/accuracy-classic.md)")
    e.set_defaults(fn=run_evaluate)

    tr = sub.add_parser("train", help="learn anomaly models from recorded (mostly clean) telemetry")
    tr.add_argument("--from", dest="from_files", nargs="+", type=Path, required=True, metavar="FILE",
                    help=".jsonl or .jsonl.gz telemetry to learn normal behaviour from")
    tr.add_argument("--topology", type=Path, required=True, action="append",
                    help="the fabric the telemetry comes from (repeat for telemetry of several fabrics)")
    tr.add_argument("--out", type=Path, required=True, metavar="DIR", help="folder for the models and metadata.json")
    tr.add_argument("--window-s", type=positive, default=5.0, help="feature window in seconds of event time (default 5)")
    tr.add_argument("--z-min", type=positive, default=6.0,
                    help="robust score a feature must reach before a window can be anomalous (default 6)")
    tr.add_argument("--seed", type=int, default=0, help="random seed of the forests (same data + seed: same models)")
    add_engine_arguments(tr, from_env=False, groups=(ORDER,))  # the order the models will score in
    tr.add_argument("--quiet", action="store_true", help="no progress")
    tr.set_defaults(fn=run_train)


def run_evaluate(args) -> int:
    from evaluation.report import accuracy_doc, choose_methods, console_text, run_suite

    try:
        methods = choose_methods(args.methods, models=bool(args.models))
    except ValueError as exc:
        raise CliError(str(exc)) from None
    run = run_suite(args.dirs, methods=methods, rule_files=args.rules, models_dir=args.models,
                    on_scenario=lambda line: print("  " + line, file=sys.stderr, flush=True))
    print(console_text(run))
    print("time: " + ", ".join(f"{m} {run.seconds[m]:.1f} s" for m in methods)
          + (f" ({'+'.join(run.baselines)} share one read of the telemetry)" if len(run.baselines) > 1 else ""),
          file=sys.stderr)
    if args.write:
        command = "fabric-rca evaluate " + " ".join(str(d) for d in args.dirs)
        command += f" --methods {args.methods}" if args.methods else ""
        command += f" --models {args.models}" if args.models else ""
        args.write.parent.mkdir(parents=True, exist_ok=True)
        args.write.write_text(accuracy_doc(run, command=command + f" --write {args.write}"))
        print(f"wrote {args.write}", file=sys.stderr)
    return 0


def run_train(args) -> int:
    from cli.engine_flags import engine_settings
    from engine.topology import load_topology
    from models.store import save
    from models.train import train

    topologies = [load_topology(t) for t in args.topology]
    show = sys.stderr.isatty() and not args.quiet

    def progress(data) -> None:
        if show:
            sys.stderr.write(f"\r{data.records:,} records read   ")
            sys.stderr.flush()

    models, training = train(args.from_files, topologies=topologies, window_s=args.window_s, seed=args.seed,
                             z_min=args.z_min, progress=progress,
                             config=engine_settings(args).config)
    if show:
        sys.stderr.write("\n")
    meta = save(models, args.out, training=training)
    print(f"trained on {training['records']:,} records ({training['from']} .. {training['to']}): "
          f"{models.describe()}")
    if training["foreign_records"]:
        print(f"  skipped {training['foreign_records']:,} records of devices in no topology given")
    print(f"  wrote {args.out} (metadata: {meta})")
    return 0
