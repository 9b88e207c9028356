"""A text holding JSON documents one after another: one (a pretty-printed `squeue --json`),
one per line (JSON Lines), or several concatenated (`lldpctl -f json` of every device
in one file, squeue snapshots appended to one `.out` file). Whitespace between them is
free; nothing else is."""
from __future__ import annotations

import json
from collections.abc import Iterator

_DECODER = json.JSONDecoder()
_SPACE = " \t\n\r"


class JSONStreamError(ValueError):
    """Text that is not a stream of JSON documents; `line` is where it broke (1-based)."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.message = message


def documents(text: str) -> Iterator[tuple[object, int]]:
    """Each document with the line it starts on."""
    pos, line, end = 0, 1, len(text)
    while True:
        start = pos
        while pos < end and text[pos] in _SPACE:
            pos += 1
        line += text.count("\n", start, pos)
        if pos >= end:
            return
        try:
            doc, stop = _DECODER.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise JSONStreamError(exc.lineno, f"bad JSON: {exc.msg}") from None
        yield doc, line
        line += text.count("\n", pos, stop)
        pos = stop
