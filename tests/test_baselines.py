"""Published root-cause baselines (BARO, N-Sigma): the scoring, the metric -> cause table,
and `fabric-rca evaluate --methods` putting them beside the engine."""
import numpy as np
import pytest

from engine.features import MEASUREMENTS
from engine.topology import Topology
from engine.types import CAUSE_ENTITY_KIND, CAUSES
from evaluation.baselines import (
    FAMILIES,
    METHODS,
    Column,
    Frame,
    baro_scores,
    cause_of,
    family_of,
    fill,
    metric_features,
    rank,
    root_causes,
)


def _frame(*, outlier: bool) -> tuple[np.ndarray, np.ndarray]:
    """Column 0 is the injected metric: it rises by 10 after the anomaly time. Column 1
    is noise. With `outlier`, column 0 had one wild sample in the normal period."""
    rng = np.random.default_rng(7)
    normal = rng.normal(0.0, 1.0, size=(200, 4))
    anomal = rng.normal(0.0, 1.0, size=(60, 4))
    anomal[:, 0] += 10.0
    if outlier:
        normal[50, 0] = 1000.0
    return normal, anomal


@pytest.mark.parametrize("method", ["baro", "nsigma"])
def test_both_rank_the_injected_metric_first_on_clean_history(method):
    normal, anomal = _frame(outlier=False)
    m = METHODS[method]
    scores = m.scorer(normal, anomal, absolute=m.absolute)
    assert int(np.argmax(scores)) == 0


def test_baro_is_robust_to_an_outlier_in_the_normal_period_and_nsigma_is_not():
    # BARO's point (Pham et al., FSE 2024): median/IQR ignore one wild normal sample,
    # mean/std do not, so N-Sigma's z-score of the real root cause collapses.
    normal, anomal = _frame(outlier=True)
    assert int(np.argmax(METHODS["baro"].scorer(normal, anomal))) == 0
    assert int(np.argmax(METHODS["nsigma"].scorer(normal, anomal))) != 0


def test_scores_are_the_largest_scaled_value_as_rcaeval_computes_them():
    normal = np.array([[1.0, 5.0], [2.0, 5.0], [3.0, 5.0], [4.0, 5.0], [5.0, 5.0]])
    anomal = np.array([[9.0, 2.0], [3.0, 5.0]])
    # median 3, IQR 2 -> (9 - 3) / 2; a constant column divides by 1 (scikit-learn)
    assert baro_scores(normal, anomal).tolist() == [3.0, 0.0]
    assert baro_scores(normal, anomal, absolute=True).tolist() == [3.0, 3.0]


def test_fill_carries_short_gaps_and_counts_long_absence_as_zero():
    nan = np.nan
    col = np.array([[1.0, 1.0], [nan, nan], [2.0, nan], [nan, nan], [nan, nan], [nan, nan]])
    out = fill(col, carry=np.array([True, False]))
    assert out[:, 0].tolist() == [1.0, 1.0, 2.0, 2.0, 2.0, 0.0]
    assert out[:, 1].tolist() == [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]


def test_every_metric_maps_to_a_contract_cause():
    assert {c for _, _, c, _ in FAMILIES} <= set(CAUSES)
    assert "noisy_neighbor" not in {c for _, _, c, _ in FAMILIES}  # no metric is per job
    for m in MEASUREMENTS:
        for f in metric_features(m):
            assert family_of(m, f) is not None, (m, f)


TOPO = Topology.from_links(
    roles={"leaf01": "leaf", "spine01": "spine", "gpu001": "host", "stor01": "storage"},
    links=[("leaf01:swp1", "gpu001:eth0"), ("leaf01:swp51", "spine01:swp1"), ("leaf01:swp2", "stor01:eth0")],
)


@pytest.mark.parametrize("col, cause, entity", [
    (Column("switch_port", "leaf01:swp51", "if_in_fec_symbol_errors_rate"), "link_degraded",
     "leaf01:swp51--spine01:swp1"),
    (Column("nic_port", "gpu001:eth0", "link_down_events_phy_rate"), "link_flap", "gpu001:eth0--leaf01:swp1"),
    (Column("nic_port", "gpu001:eth0", "tx_prio3_pause_rate"), "pfc_storm", "gpu001:eth0"),
    (Column("switch_port", "leaf01:swp1", "pfc_3_rx_pkts_rate"), "pfc_storm", "gpu001:eth0"),  # the sender
    (Column("switch_queue", "leaf01:swp1", "curr_occupancy_bytes", "queue=3"), "congestion", "leaf01:swp1"),
    (Column("switch_queue", "leaf01:swp1", "shared_watermark_bytes", "queue=3"), "microburst", "leaf01:swp1"),
    (Column("nic_port", "gpu001:eth0", "rx_bytes_rate"), "congestion", "leaf01:swp1"),  # the egress toward it
    (Column("nic_port", "gpu001:eth0", "oob_rate"), "nic_degraded", "gpu001:eth0"),
    (Column("storage", "stor01", "latency_ms", "kind=nvmf"), "storage_slow", "stor01"),
])
def test_cause_of_a_metric(col, cause, entity):
    got_cause, got_entity = cause_of(col, TOPO)
    assert (got_cause, got_entity.id) == (cause, entity)
    assert got_entity.kind == CAUSE_ENTITY_KIND[cause]


def test_a_metric_of_a_switch_that_stopped_reporting_points_at_the_switch():
    col = Column("switch_port", "spine01:swp1", "if_out_octets_rate")
    assert cause_of(col, TOPO)[0] == "congestion"
    cause, entity = cause_of(col, TOPO, frozenset({"spine01"}))
    assert (cause, entity.kind, entity.id) == ("device_down", "switch", "spine01")
    assert cause_of(Column("nic_port", "gpu001:eth0", "oob_rate"), TOPO, frozenset({"gpu001"}))[0] == "nic_degraded"


def test_root_causes_keep_the_best_metric_of_each_cause_and_entity():
    cols = [Column("nic_port", "gpu001:eth0", "tx_pause_rate"), Column("nic_port", "gpu001:eth0", "tx_prio3_pause_rate"),
            Column("switch_port", "leaf01:swp1", "pfc_3_rx_pkts_rate"), Column("nic_port", "gpu001:eth0", "oob_rate")]
    normal = np.zeros((30, 4))
    anomal = np.array([[9.0, 8.0, 7.0, 1.0]] * 5)
    ranked = rank(Frame(0.0, cols, normal, anomal, frozenset()), METHODS["baro"])
    out = root_causes(ranked, TOPO)
    # tx pause (both metrics) and pause received on the leaf port all name the NIC: one root cause
    assert [(r["rank"], r["cause"], r["entity"]["id"]) for r in out] == [
        (1, "pfc_storm", "gpu001:eth0"), (2, "nic_degraded", "gpu001:eth0")]
    assert out[0]["score"] == 1.0 and 0 < out[1]["score"] < 1


@pytest.fixture(scope="module")
def pfc_storm_dir(scenario_dir):
    return scenario_dir("pfc_storm", duration=200.0)


def test_evaluate_prints_a_table_per_cause_with_a_row_per_method(pfc_storm_dir, capsys):
    from cli.main import main

    assert main(["evaluate", str(pfc_storm_dir), "--methods", "rules,baro,nsigma"]) == 0
    out = capsys.readouterr().out
    blocks = [b.strip().splitlines() for b in out.split("\n\n") if b.strip().startswith(("pfc_storm", "overall"))]
    assert [b[0] for b in blocks] == ["pfc_storm", "overall"]
    for block in blocks:
        assert block[1].split()[0] == "method"
        assert [line.split()[0] for line in block[2:]] == ["rules", "baro", "nsigma"]
    rows = {line.split()[0]: line.split() for line in blocks[0][2:]}
    assert rows["rules"][2] == "1.00"  # recall: the engine found the fault itself
    assert rows["baro"][2] == "-"  # the baselines were given its time: no recall to speak of
    assert rows["baro"][3] == "1.00"  # top-1: the NIC sending the pause frames


def test_evaluate_writes_the_methods_and_the_oracle_caveat(pfc_storm_dir, tmp_path, capsys):
    from cli.main import main

    doc = tmp_path / "accuracy.md"
    assert main(["evaluate", str(pfc_storm_dir), "--methods", "baro,nsigma", "--write", str(doc)]) == 0
    text = doc.read_text()
    assert "### pfc_storm" in text and "### overall" in text
    assert "| baro |" in text and "| nsigma |" in text
    assert "handed the answer" in text


def test_evaluate_refuses_unknown_methods_and_models_without_a_folder(pfc_storm_dir, capsys):
    from cli.main import main

    assert main(["evaluate", str(pfc_storm_dir), "--methods", "rules,magic"]) == 2
    assert "magic" in capsys.readouterr().err
    assert main(["evaluate", str(pfc_storm_dir), "--methods", "models"]) == 2
    assert "--models" in capsys.readouterr().err
