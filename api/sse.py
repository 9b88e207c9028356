"""Server-sent events (the WHATWG `text/event-stream` format), as pure functions.

An event is `event:`, `id:` and one `data:` line per line of the payload, ended by a
blank line; a line starting with `:` is a comment (a heartbeat keeps proxies from
closing an idle stream). A browser's `EventSource` reconnects by itself and sends the
last `id:` it saw as `Last-Event-ID`, which `parse_last_event_id` reads back.
"""
from __future__ import annotations

import re

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
MAX_EVENT_ID = 2**63 - 1  # the change log's numbers are database integers


class EventIdError(ValueError):
    """A `Last-Event-ID` (or `after`) that is not a change number this stream handed out."""


def event(data: str, *, name: str | None = None, event_id: int | None = None) -> str:
    """One event: `data` may hold line breaks (each line becomes its own `data:` line).

    `name` may not hold a line break (it would end the field and start another).
    """
    if name is not None and (not name or _LINE_BREAK.search(name)):
        raise ValueError(f"an event name must be one non-empty line, got {name!r}")
    head = f"event: {name}\n" if name is not None else ""
    if event_id is not None:
        head += f"id: {event_id}\n"
    body = "".join(f"data: {line}\n" for line in _LINE_BREAK.split(data))
    return head + body + "\n"


def comment(text: str = "") -> str:
    """A comment line (ignored by clients); the heartbeat of an idle stream."""
    return "".join(f": {line}\n" for line in _LINE_BREAK.split(text)) + "\n"


def retry(milliseconds: int) -> str:
    """Tell the client how long to wait before reconnecting."""
    if milliseconds < 0:
        raise ValueError(f"retry must be >= 0 ms, got {milliseconds}")
    return f"retry: {milliseconds}\n\n"


def parse_last_event_id(value: str | None) -> int | None:
    """The change number of a `Last-Event-ID` header, None when there is none (or it is empty)."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    if not text.isascii() or not text.isdigit():
        raise EventIdError(f"Last-Event-ID must be a change number this stream sent (digits), got {value!r}")
    number = int(text)
    if number > MAX_EVENT_ID:
        raise EventIdError(f"Last-Event-ID {value!r} is larger than any change number ({MAX_EVENT_ID})")
    return number
