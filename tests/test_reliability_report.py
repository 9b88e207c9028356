"""docs/reliability.md is written from the recorded figures, and says what they say."""
from evaluation.reliability_report import render

KILL = "tests/test_kafka_workers.py::test_a_worker_killed_mid_stream_restarts_to_the_same_incidents"
FUZZ = "tests/test_api_fuzz.py::test_no_request_gets_a_5xx_or_an_answer_off_the_schema[GET /incidents-positive-sqlite]"


def _figures(equal: bool, fives: int) -> list[dict]:
    return [
        {"section": "test", "test": KILL, "outcome": "passed" if equal else "failed", "seconds": 41.2},
        {"section": "fleet", "test": KILL, "published": 1000, "incidents": 1, "replay_incidents": 1,
         "duplicate_ids": 0, "equal_to_replay": equal, "dlq_messages": 0,
         "workers": [{"worker": "second", "records": 990 if not equal else 1000, "unread": 0 if equal else 10,
                      "duplicates": 0, "dead_lettered": 0,
                      "dead_letter_failed": 0, "checkpoints_refused": 0, "stages_restored": 4}]},
        {"section": "test", "test": FUZZ, "outcome": "passed", "seconds": 3.0},
        {"section": "fuzz", "test": FUZZ, "2xx": 60, "4xx": 40 - fives, "5xx": fives},
        {"section": "session", "exit_status": 0, "seconds": 50.0},
    ]


def test_the_page_gives_the_run_s_figures():
    page = render(_figures(True, 0), when="now", machine="here")
    assert "| worker SIGKILLed mid-stream, restarted | passed | 41.2 | 1000 | 1000 | 0 | 0 | 1 (1) | yes | 0 |" in page
    assert "| **all** | | | 100 | | | **0** |" in page
    assert "2 tests in 50.0 s, 0 failed." in page


def test_a_loss_a_difference_and_5xx_show():
    page = render(_figures(False, 3), when="now", machine="here")
    assert "| 1000 | 990 | 10 | 0 | 1 (1) | **no** |" in page
    assert "| **all** | | | 100 | | | **3** |" in page
    assert f"1 failed: `{KILL}`" in page
