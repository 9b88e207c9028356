"""Server-sent event formatting (api/sse.py), read back by a parser written from the WHATWG rules."""
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api import sse


def parse(stream: str) -> list[dict]:
    """Events of a `text/event-stream`, the way a browser's EventSource reads them."""
    events, fields, data = [], {}, []
    for line in re.split(r"\r\n|\r|\n", stream):
        if line == "":
            if data or fields:
                events.append({**fields, "data": "\n".join(data)})
            fields, data = {}, []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            data.append(value)
        else:
            fields[name] = value
    return events


@given(data=st.text(), name=st.one_of(st.none(), st.from_regex(r"\A[a-z_]{1,12}\Z")),
       event_id=st.one_of(st.none(), st.integers(0, sse.MAX_EVENT_ID)))
def test_an_event_reads_back_as_written(data, name, event_id):
    (got,) = parse(sse.event(data, name=name, event_id=event_id))
    assert got["data"] == re.sub(r"\r\n|\r", "\n", data)  # any line break reads back as \n
    assert got.get("event") == name
    assert got.get("id") == (None if event_id is None else str(event_id))


@given(st.lists(st.text(), min_size=1, max_size=5))
def test_events_in_a_row_stay_apart_and_comments_are_not_events(payloads):
    stream = sse.retry(1500) + "".join(sse.comment("heartbeat") + sse.event(p, name="incident") for p in payloads)
    events = parse(stream)
    assert [e["data"] for e in events if "retry" not in e] == [re.sub(r"\r\n|\r", "\n", p) for p in payloads]


def test_the_exact_wire_format():
    assert sse.event('{"a": 1}', name="incident", event_id=7) == 'event: incident\nid: 7\ndata: {"a": 1}\n\n'
    assert sse.event("a\nb") == "data: a\ndata: b\n\n"
    assert sse.comment("heartbeat") == ": heartbeat\n\n"
    assert sse.retry(2000) == "retry: 2000\n\n"


@pytest.mark.parametrize("name", ["", "two\nlines", "cr\rin"])
def test_an_event_name_must_be_one_line(name):
    with pytest.raises(ValueError, match="one non-empty line"):
        sse.event("x", name=name)


@given(st.integers(0, sse.MAX_EVENT_ID))
def test_last_event_id_reads_back_the_ids_sent(number):
    (got,) = parse(sse.event("x", event_id=number))
    assert sse.parse_last_event_id(got["id"]) == number


@pytest.mark.parametrize("value", [None, "", "  "])
def test_no_last_event_id(value):
    assert sse.parse_last_event_id(value) is None


@pytest.mark.parametrize("value", ["-1", "1.5", "abc", "١٢", str(sse.MAX_EVENT_ID + 1), "0x10"])
def test_a_last_event_id_this_stream_never_sent_is_refused_with_the_reason(value):
    with pytest.raises(sse.EventIdError, match="Last-Event-ID"):
        sse.parse_last_event_id(value)
