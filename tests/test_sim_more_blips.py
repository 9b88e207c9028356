"""The blips of the counters the rules read that `sim.realism._blips` leaves out
(`_more_blips`, drawn on a stream of their own): a storage pause slows reads and writes
for its seconds, discards come once, a target pauses once a run at most."""
from __future__ import annotations

import random

import pytest

from sim.fabric import Fabric
from sim.realism import Phenomenon, _more_blips, draw
from tests.test_sim_realism import SPEC, T0, _run, _sorted, _t


def test_a_storage_pause_slows_reads_and_writes_for_its_seconds_and_discards_come_once(tmp_path):
    ps = [Phenomenon("blip_storage_latency", "storage", "stor01", None, T0 + 20.5, T0 + 22.5,
                     {"io_stall": 9.0}),
          Phenomenon("blip_nic_discards", "nic_port", "gpu003", "eth0", T0 + 15.5, T0 + 16.5,
                     {"rx_discards_phy": 7}),
          Phenomenon("blip_out_discards", "switch_port", "leaf01", "swp2", T0 + 15.5, T0 + 16.5,
                     {"if_out_discards": 5})]
    series = _run(tmp_path, ps)
    stor = _sorted(series[("storage", "stor01", None)])

    def latency(side: str, a: dict, b: dict) -> float:
        ops = "reads" if side == "read" else "writes"
        return (b["fields"][f"{side}_time"] - a["fields"][f"{side}_time"]) / max(1, b["fields"][ops] - a["fields"][ops])
    for side in ("read", "write"):
        lat = {round(_t(b) - T0): latency(side, a, b) for a, b in zip(stor, stor[1:])}
        normal = [v for t, v in lat.items() if t < 19 or t > 24]
        slow = [v for t, v in lat.items() if 21 <= t <= 22]
        assert slow and min(slow) > 5 * max(normal)  # 10x for its 2 s, on both sides
        assert len([t for t, v in lat.items() if v > 3 * max(normal)]) <= 3
    nic = [r["fields"]["rx_discards_phy"] for r in _sorted(series[("nic_port", "gpu003", "eth0")])]
    port = [r["fields"]["if_out_discards"] for r in _sorted(series[("switch_port", "leaf01", "swp2")])]
    assert nic[-1] - nic[0] == 7 and port[-1] - port[0] == 5


def test_the_extra_blips_come_from_a_stream_of_their_own():
    """Drawing them leaves every other phenomenon of a run as it was (the splits' runs
    change only by the blips added)."""
    fab = Fabric(SPEC)
    plain = draw(random.Random(5), split="test", fabric=fab, start=T0, duration=900.0)
    more = draw(random.Random(5), split="test", fabric=fab, start=T0, duration=900.0, more=random.Random(9))
    added = more.phenomena[len(plain.phenomena):]
    assert more.phenomena[:len(plain.phenomena)] == plain.phenomena and more.intervals == plain.intervals
    assert added and {p.kind for p in added} <= {"blip_storage_latency", "blip_nic_discards", "blip_out_discards"}


def test_a_storage_target_pauses_once_a_run_at_most():
    """A pause that recurs on one target within minutes is a fault (contract section 8),
    so a run draws at most one a target, however many blips it draws."""
    fab = Fabric(SPEC)
    for seed in range(20):
        more = _more_blips(random.Random(seed), fab, T0, T0 + 3600.0, 40)
        pauses = [p.host for p in more if p.kind == "blip_storage_latency"]
        assert pauses and len(pauses) == len(set(pauses)) <= len(fab.storage)


def test_a_probe_may_draw_blips_denser_and_says_so(tmp_path, capsys):
    """`simulate --split tune-range --blips 3`: three times the blips (and the extra ones),
    the truth keeps the multiplier, 1 draws the run as it was, and the test split is
    never probed."""
    from cli.main import main
    from sim.split import TUNE_RANGE_SEED, build, check_blips
    from tests.test_sim_realism import _short

    fab = Fabric(SPEC)

    def blips(p) -> int:
        return sum(1 for x in p.phenomena if x.kind.startswith("blip_"))
    kw = dict(split="tune-range", fabric=fab, start=T0, duration=900.0)
    plain = draw(random.Random(5), **kw, more=random.Random(9))
    assert draw(random.Random(5), **kw, more=random.Random(9), blip_scale=1.0) == plain
    dense = draw(random.Random(5), **kw, more=random.Random(9), blip_scale=3.0)
    assert 2.5 * blips(plain) <= blips(dense) <= 3.5 * blips(plain)
    assert blips(draw(random.Random(5), **kw, more=random.Random(9), blip_scale=0.0)) == 0
    entry = _short("tune-range", "clean", TUNE_RANGE_SEED)
    truth = build(entry, out=tmp_path / "dense", split="tune-range", blips=3.0)
    assert truth["probe_blips"] == 3.0
    assert "probe_blips" not in build(entry, out=tmp_path / "plain", split="tune-range")
    with pytest.raises(ValueError, match="test split"):
        check_blips("test", 3.0)
    with pytest.raises(ValueError, match="0 to 100"):
        check_blips("tune", -1.0)
    assert main(["simulate", "--suite", str(tmp_path / "s"), "--blips", "3"]) != 0
    assert "--blips need --split" in capsys.readouterr().err
