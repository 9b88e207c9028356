"""Rule files: YAML validated once into typed rules; every error names the file, the rule
and the field so an operator can fix a rule file without reading code."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cli.main import main
from engine.features import MEASUREMENTS, known_features, plan
from rules.loader import RuleError, default_rule_files, load_file, load_rules
from rules.schema import Rule, SilenceRule

CATALOGUE = Path(__file__).resolve().parent.parent / "rules" / "catalogue" / "fabric.yaml"


def good_rule(**over) -> dict:
    rule = {
        "id": "pfc_hot",
        "symptom": "pfc_pause_tx",
        "family": "pfc",
        "measurement": "switch_port",
        "when": {"all": ["pfc_tx_pkts_rate > 50"]},
        "hits": 2,
        "within_s": 3,
        "clear_s": 10,
        "severity": 0.6,
    }
    for key, value in over.items():
        if value is ...:
            rule.pop(key)
        else:
            rule[key] = value
    return rule


def silence_rule(**over) -> dict:
    rule = {"id": "leaf_quiet", "symptom": "switch_silent", "family": "silence",
            "silence": {"roles": ["leaf"], "after_s": 5}}
    return rule | over


def write(folder: Path, name: str, *rules: dict) -> Path:
    path = folder / name
    path.write_text(yaml.safe_dump({"version": 1, "rules": list(rules)}, sort_keys=False))
    return path


def error_of(*paths: Path) -> str:
    with pytest.raises(RuleError) as info:
        load_rules(list(paths))
    return str(info.value)


# -------------------------------------------------------------- catalogue


def test_builtin_catalogue_loads():
    rs = load_rules()
    assert CATALOGUE in default_rule_files()
    assert len(rs.rules) >= 10
    ids = [r.id for r in (*rs.rules, *rs.silence)]
    assert len(ids) == len(set(ids))
    assert "switch_silent" in {s.symptom for s in rs.silence}
    assert all(isinstance(r, Rule) for r in rs.rules)
    assert all(isinstance(s, SilenceRule) for s in rs.silence)
    assert load_rules([CATALOGUE]).rules == rs.rules


def test_every_catalogue_feature_is_known_and_planned():
    rs = load_rules()
    for r in rs.rules:
        assert r.measurement in MEASUREMENTS, r.id
        assert r.features, r.id
        assert r.features <= known_features(r.measurement), r.id
        p = plan(r.measurement, r.features)
        produced = {f"{c}_{k}" for c in p.counters for k in ("rate", "delta")} | set(p.gauges) | {d.name for d in p.derived}
        assert r.features <= produced, r.id


def test_every_catalogue_rule_is_well_formed():
    for r in load_rules().rules:
        assert "{host}" in r.entity, r.id
        assert r.hits >= 1 and r.within_s > 0 and r.clear_s > 0, r.id
        assert 0 <= r.severity <= 1, r.id


def test_a_valid_file_becomes_typed_rules(tmp_path):
    path = write(tmp_path, "ok.yaml", good_rule(when={"all": ['oper_status == "down"'], "any": ["if_in_errors_rate >= 1.5"]}),
                 silence_rule())
    rule, quiet = load_file(path)
    assert rule.id == "pfc_hot" and rule.hits == 2 and rule.within_s == 3.0 and rule.clear_s == 10.0
    assert rule.entity == "{host}:{interface}" and rule.entity_kind == "interface"  # the measurement's default
    assert [(c.feature, c.op, c.value) for c in rule.all] == [("oper_status", "==", "down")]
    assert [(c.feature, c.op, c.value) for c in rule.any] == [("if_in_errors_rate", ">=", 1.5)]
    assert rule.source == str(path)
    assert quiet.roles == ("leaf",) and quiet.after_s == 5.0


def test_conditions_evaluate_as_written(tmp_path):
    path = write(tmp_path, "ok.yaml", good_rule(when={"all": ['oper_status == "down"'], "any": ["if_in_errors_rate >= 1.5"]}))
    (rule,) = load_file(path)
    assert rule.matches({"oper_status": "down", "if_in_errors_rate": 1.5})
    assert not rule.matches({"oper_status": "down", "if_in_errors_rate": 1.4})
    assert not rule.matches({"oper_status": "up", "if_in_errors_rate": 9})
    assert not rule.matches({"oper_status": "down"})  # a missing feature never matches
    assert not rule.matches({"oper_status": 0, "if_in_errors_rate": 9})  # number vs string never matches


# -------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("rule", "field", "words"),
    [
        (good_rule(measurement="switch_prot"), "measurement", ["unknown measurement", "switch_prot"]),
        (good_rule(when={"all": ["pfc_tx_pkts_rate => 50"]}), "when.all[0]", ["cannot read"]),
        (good_rule(when={"all": ["pfc_tx_pkts_rate ~ 50"]}), "when.all[0]", ["cannot read"]),
        (good_rule(when={"all": ["pfc_tx_pkts_rate >"]}), "when.all[0]", []),
        (good_rule(when={"any": ["pfc_tx_pkts_rate > 50", 'oper_status > "down"']}), "when.any[1]", ["== or !="]),
        (good_rule(when={"all": ["pfc_tx_pkts_rate > lots"]}), "when.all[0]", ["not a number"]),
        (good_rule(when={"all": [50]}), "when.all[0]", []),
        (good_rule(when={"all": "pfc_tx_pkts_rate > 50"}), "when.all", []),
        (good_rule(when={"none": ["pfc_tx_pkts_rate > 50"]}), "when", []),
        (good_rule(when={"all": []}), "when", []),
        (good_rule(threshold=5), "threshold", ["unknown field"]),
        (good_rule(hits=2.5), "hits", ["integer"]),
        (good_rule(hits="3"), "hits", ["integer"]),
        (good_rule(hits=True), "hits", ["integer"]),
        (good_rule(hits=0), "hits", []),
        (good_rule(severity=1.5), "severity", ["0..1"]),
        (good_rule(severity=-0.1), "severity", ["0..1"]),
        (good_rule(clear_s=0), "clear_s", []),
        (good_rule(within_s="5s"), "within_s", ["number"]),
        (good_rule(opens_incident="yes"), "opens_incident", []),
        (good_rule(symptom="PFC Pause"), "symptom", []),
        (good_rule(family=...), "family", []),
        (good_rule(entity_kind="port"), "entity_kind", []),
        (good_rule(entity="{interface}"), "entity", ["{host}"]),
        (silence_rule(silence={"roles": ["router"], "after_s": 5}), "silence.roles", ["leaf"]),
        (silence_rule(silence={"roles": [], "after_s": 5}), "silence.roles", []),
        (silence_rule(silence={"roles": "leaf", "after_s": 5}), "silence.roles", []),
        (silence_rule(silence={"roles": ["leaf"], "after_s": 0}), "after_s", []),
        (silence_rule(silence={"roles": ["leaf"], "every": 5}), "silence", []),
        (silence_rule(measurement="switch_port"), "measurement", ["unknown field"]),
    ],
)
def test_error_names_file_rule_and_field(tmp_path, rule, field, words):
    path = write(tmp_path, "broken_rules.yaml", good_rule(id="fine_rule"), rule)
    message = error_of(path)
    assert str(path) in message
    assert repr(rule["id"]) in message
    assert repr(field) in message
    for w in words:
        assert w in message


def test_unknown_feature_error_gives_a_hint(tmp_path):
    path = write(tmp_path, "storage_rules.yaml",
                 good_rule(id="slow_disk", measurement="storage", when={"all": ["latency > 3"]}))
    message = error_of(path)
    assert str(path) in message and "'slow_disk'" in message and "'when.all[0]'" in message
    assert "unknown feature 'latency'" in message
    assert "did you mean" in message and "latency_ms" in message


def test_unknown_feature_without_anything_close_has_no_hint(tmp_path):
    path = write(tmp_path, "r.yaml", good_rule(when={"all": ["zzz > 3"]}))
    message = error_of(path)
    assert "unknown feature 'zzz'" in message and "did you mean" not in message


def test_hint_for_a_counter_named_without_rate_names_its_rate(tmp_path):
    path = write(tmp_path, "r.yaml", good_rule(when={"all": ["pfc_tx_pkts > 50"]}))
    assert "pfc_tx_pkts_rate" in error_of(path)


def test_a_counter_must_be_read_as_a_rate(tmp_path):
    path = write(tmp_path, "r.yaml", good_rule(when={"all": ["if_in_octets > 50"]}))
    message = error_of(path)
    assert "'pfc_hot'" in message and "'when.all[0]'" in message and "if_in_octets" in message


def test_duplicate_id_across_two_files(tmp_path):
    first = write(tmp_path, "first.yaml", good_rule(id="twice"))
    second = write(tmp_path, "second.yaml", good_rule(id="other"), good_rule(id="twice"))
    message = error_of(first, second)
    assert str(second) in message  # where the duplicate is
    assert str(first) in message  # where it was first defined
    assert "'twice'" in message and "'id'" in message and "duplicate" in message


def test_duplicate_id_between_a_rule_and_a_silence_rule(tmp_path):
    path = write(tmp_path, "r.yaml", good_rule(id="same"), silence_rule(id="same"))
    message = error_of(path)
    assert str(path) in message and "'same'" in message and "'id'" in message


def test_bad_yaml_names_the_file(tmp_path):
    path = tmp_path / "mangled.yaml"
    path.write_text("version: 1\nrules:\n  - id: pfc_hot\n    when: {all: [\"x > 1\"\n")
    message = error_of(path)
    assert str(path) in message
    assert "YAML" in message  # no rule can be named: the file did not parse


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("rules: {pfc_hot: {}}\n", "rules"),
        ("- id: pfc_hot\n", "rules"),
        ("", "rules"),
        ("version: 2\nrules: []\n", "version"),
    ],
)
def test_file_shape_errors_name_the_file_and_field(tmp_path, text, field):
    path = tmp_path / "shape.yaml"
    path.write_text(text)
    message = error_of(path)
    assert str(path) in message and repr(field) in message


def test_a_rule_that_is_not_a_mapping_is_named_by_position(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump({"rules": [good_rule(), "pfc_tx_pkts_rate > 5"]}))
    message = error_of(path)
    assert str(path) in message and "#2" in message


def test_missing_file(tmp_path):
    path = tmp_path / "absent.yaml"
    assert str(path) in error_of(path)


# -------------------------------------------------------------- CLI


def test_cli_rules_check_accepts_the_catalogue(capsys):
    assert main(["rules", "check"]) == 0
    assert main(["rules", "check", str(CATALOGUE)]) == 0
    out = capsys.readouterr()
    assert out.out.startswith("ok")
    assert out.err == ""


def test_cli_rules_check_rejects_a_bad_file(tmp_path, capsys):
    path = write(tmp_path, "bad_thresholds.yaml", good_rule(severity=3))
    assert main(["rules", "check", str(CATALOGUE), str(path)]) == 2
    out = capsys.readouterr()
    assert "bad_thresholds.yaml" in out.err
    assert "'pfc_hot'" in out.err and "'severity'" in out.err
    assert "ok" not in out.out


def test_a_counted_rule_names_a_counters_increase_and_nothing_else(tmp_path):
    """`count` is a counter's increase of the rule's measurement (`x_delta`); a rate, a
    gauge or an unknown name is a clear error, and so is counting with a level or for_s."""
    ok = load_rules([write(tmp_path, "ok.yaml", good_rule(count="carrier_changes_delta", hits=3))])
    assert ok.rules[0].count == "carrier_changes_delta" and "carrier_changes_delta" in ok.rules[0].features
    for bad in ("carrier_changes_rate", "pfc_tx_pkts_delta", "oper_status", "nope_delta", 3):
        msg = error_of(write(tmp_path, "bad.yaml", good_rule(count=bad)))
        assert "count" in msg and "increase" in msg and repr(bad) in msg, msg
    msg = error_of(write(tmp_path, "for.yaml", good_rule(count="carrier_changes_delta", for_s=10)))
    assert "count" in msg and "for_s" in msg, msg
