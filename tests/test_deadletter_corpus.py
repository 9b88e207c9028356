"""The dead letters of every line of the hostile corpus (tests/corpus), cut as the
worker cuts them: none raises, each letter holds the record's own bytes (the line, or a
member of its batch), and their reasons are the line's expected rejects."""
from engine.pipeline import DetectStage
from rules.loader import load_rules
from streams.deadletter import letters
from test_normalize import load_corpus


def _reasons(letter) -> list[str]:
    return letter.reason.split(",") if "," in letter.reason else [letter.reason] * letter.rejected


def test_every_corpus_line_is_cut_into_letters_of_its_own_bytes_and_expected_reasons(tmp_path):
    lines, expected, _ = load_corpus(tmp_path)
    stage = DetectStage(rules=load_rules(None), roles={}, source="corpus")
    for raw, want in zip(lines, expected):
        if not raw.strip():
            continue
        stage.feed(raw)
        cut = letters(raw, stage.take_rejects())  # (a RecursionError here crashed the worker's agent)
        assert sorted(r for letter in cut for r in _reasons(letter)) == want["rejected"], want["kind"]
        assert all(letter.value == raw or letter.value in raw for letter in cut), want["kind"]


def test_a_value_nested_past_the_decoder_goes_whole_with_its_reason():
    raw = b'{"name":"x","a":' + b"[" * 5000 + b"]" * 5000 + b"}"
    from engine.normalize import parse_line

    [letter] = letters(raw, parse_line(raw)[1])
    assert (letter.value, letter.reason, letter.whole) == (raw, "bad_json", False)
