"""What each speed trick of the replay hot path buys: a switch-off experiment.

    PYTHONPATH=. .venv/bin/python bench/speed_tricks.py [--records 300000] [--rounds 3] [--only gc,tags_memo]
        [--folder SCENARIO_DIR] [--line-protocol]

Each trick is switched off in a fresh subprocess (a patch applied before the replay
starts; nothing in the engine changes), on the same cached scenario as
bench/replay_throughput.py. Each variant runs beside a baseline run of its own, in
alternating order from round to round, so a noisy minute hits the pair alike; a trick's
gain is the median over rounds of (CPU seconds without it / CPU seconds of its baseline
- 1): the replay's process time, which other processes on the machine disturb less than
the wall clock. The table it prints is
the one in docs/design.md ("Speed tricks: what each buys").
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


class NoMemo(dict):
    """A memo that never remembers: every lookup misses, every store is dropped."""

    def get(self, key, default=None):
        return default

    def __setitem__(self, key, value):
        pass


def _no_fast_parse():
    from engine import normalize
    normalize.Parser.parse_line = lambda self, line: normalize._parse_line(line)  # orjson + parse_metric for every line


def _no_tags_memo():
    from engine import normalize
    init = normalize.Parser.__init__

    def forgetful(self) -> None:
        init(self)
        self._tags = NoMemo()  # every record's tags text decoded and checked again

    normalize.Parser.__init__ = forgetful


def _no_compiled_plans():
    import engine.features as features
    from engine.features_reference import reference_compute
    features.compile_plan = reference_compute  # the plain definition instead of generated code


def _no_layouts():
    from engine import lineproto, normalize
    init = normalize.Parser.__init__

    def generic(self) -> None:
        init(self)
        self._read_fields = lineproto.common_bytes  # every common line through the one regex and the JSON rewrite

    normalize.Parser.__init__ = generic


def _no_key_cache():
    from typing import Annotated

    import msgspec

    from engine import normalize as n
    keyed = Annotated[dict[n._Key, n._Int64 | float | n._FieldText | bool], msgspec.Meta(max_length=n.MAX_FIELDS)]
    record = msgspec.defstruct("Keyed", [("name", n._Name), ("tags", msgspec.Raw), ("fields", keyed),
                                         ("timestamp", n._Int64 | float)], forbid_unknown_fields=True, gc=False)
    n._decode_record = msgspec.json.Decoder(record).decode  # every field key decoded anew (as before 2026-12-07)


def _no_isal():
    from engine import replay
    replay._gzip_open = replay._std_gzip_open


def _no_level_shortcut():
    import engine.baseline as baseline
    baseline._may_pass = lambda *a: True  # every closed bucket's windows compared in full


def _no_shown_samples():
    from engine.incidents import Incident
    from engine.samples import display
    Incident._samples_shown = lambda self, s: display(s.samples)  # every symptom's samples shown at every change


TRICKS = {  # name -> (where, switch-off, runs with the anomaly models)
    "fast_parse": ("engine/normalize.py parse_line: typed msgspec decode", _no_fast_parse, False),
    "tags_memo": ("engine/normalize.py Parser._tags: tags decoded once per series", _no_tags_memo, False),
    "key_cache": ("engine/normalize.py _Record.fields: unconstrained keys, from msgspec's cache of short keys",
                  _no_key_cache, False),
    "compiled_plans": ("engine/features_compile.py compile_plan (vs features_reference)", _no_compiled_plans, False),
    "gc": ("cli/runtime.py GC_THRESHOLDS", None, False),
    "isal": ("engine/replay.py _gzip_open: ISA-L's gzip reader instead of the standard module's", _no_isal, False),
    "level_shortcut": ("engine/baseline.py _may_hold: windows no bound can pass are not compared",
                       _no_level_shortcut, False),
    "shown_samples": ("engine/incidents.py Incident._samples_shown: a symptom's samples shown once while it is held "
                      "(with --folder .cache/bench/kafka-200000, the Kafka bench's pause storm)", _no_shown_samples, False),
    "layouts": ("engine/lineproto.py Layouts: a line protocol head's field layout as a regex of its own "
                "(with --line-protocol)", _no_layouts, False),
}


def child(variant: str, folder: Path, models_dir: Path, telemetry: str) -> None:
    from bench.replay_throughput import run_replay
    from cli.runtime import tune_gc

    name, _, base = variant.partition(":")
    trick = TRICKS.get(name)
    if name != "gc":
        tune_gc()
    if trick and trick[1]:
        trick[1]()
    with_models = (trick or TRICKS.get(base, ("", None, False)))[2]
    # (its cpu_seconds, steadier than wall time on a shared machine, count every shard's process)
    result = run_replay(folder, models_dir if with_models else None, telemetry=Path(telemetry) if telemetry else None)
    print(json.dumps(result))


def measure(variant: str, folder: Path, models_dir: Path, telemetry: str) -> float:
    out = subprocess.run([sys.executable, __file__, "--child", variant, str(folder), str(models_dir), telemetry],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["cpu_seconds"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--cache", type=Path, default=ROOT / ".cache" / "bench")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="", help="comma-separated tricks (default: all)")
    ap.add_argument("--folder", type=Path, help="replay this scenario folder (e.g. the coarse-polling bench's "
                    ".cache/bench/bench-1000000-10s) instead of the default one; no models")
    ap.add_argument("--line-protocol", action="store_true", help="replay the scenario in line protocol, nic_port "
                    "as inputs.ethtool (bench/replay_throughput.py --mapped's file)")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], Path(args.child[1]), Path(args.child[2]), args.child[3])
        return
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "replay_throughput.py"), "--prepare", "--records",
                          str(args.records), "--cache", str(args.cache)], check=True, stdout=subprocess.PIPE, text=True)
    folder, models_dir = (Path(p) for p in json.loads(out.stdout.strip().splitlines()[-1]))
    if args.folder:
        folder = args.folder
    telemetry = ""
    if args.line_protocol:
        from bench.replay_mapped import write_line_protocol
        telemetry = str(write_line_protocol(folder)[1])
    names = [n for n in (args.only.split(",") if args.only else TRICKS)]
    gains: dict[str, list[float]] = {n: [] for n in names}
    for i in range(args.rounds):
        for n in names:  # each variant beside its own baseline run, in alternating order
            base = "base:" + n
            pair = [(n, None), (base, None)] if i % 2 else [(base, None), (n, None)]
            t = {v: measure(v, folder, models_dir, telemetry) for v, _ in pair}
            gains[n].append(t[n] / t[base] - 1.0)
            print(f"round {i + 1}: {n}: {t[n]:.2f} s vs {t[base]:.2f} s", file=sys.stderr, flush=True)
        table(names, gains)  # after every round: a cut-short run still tells what it measured


def table(names: list[str], gains: dict[str, list[float]]) -> None:
    print("| trick | where | measured gain (CPU time of the replay without it, median) | each round |")
    print("|---|---|---|---|")
    for n in names:
        each = ", ".join(f"{g:+.1%}" for g in gains[n])
        print(f"| {n} | {TRICKS[n][0]} | {statistics.median(gains[n]):+.1%} | {each} |", flush=True)


if __name__ == "__main__":
    main()
