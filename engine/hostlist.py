"""Slurm hostlists (`gpu[001-004,009],gpu011`, `r[1-2]n[01-02]`): checked and sized here,
then expanded by python-hostlist. The size is bounded before a single name is built, the
brackets of a name are bounded (python-hostlist recurses once per bracket), and an error
names the part at fault (docs/design.md)."""
from __future__ import annotations

import math
import re

import hostlist as python_hostlist

MAX_HOSTLIST = 65536  # a longer expansion is a typo (gpu[1-1000000]), not a job
MAX_BRACKETS = 16  # per name: a rack, a node, a rail, ... (python-hostlist recurses once per bracket)


class HostlistError(ValueError):
    """A hostlist that cannot be expanded; the message names the part at fault."""


_BRACKET = re.compile(r"\[([^\[\]]*)\]")


def expand(expr: str) -> list[str]:
    """Expand a Slurm hostlist (`gpu[001-004,009],gpu011`, `r[1-2]n[01-02]`) in the
    order written; a range keeps the zero padding of its lower bound. Its size (the sum
    over names of the product of their ranges' lengths) is worked out and bounded by
    MAX_HOSTLIST before a single name is built."""
    text = "".join(expr.split())
    items = [_parse_item(item, expr=expr) for item in _split_top_level(text, expr=expr)]
    size = sum(math.prod(lengths) for lengths in items)
    if size > MAX_HOSTLIST:
        raise HostlistError(f"hostlist {_short(expr)} expands to {size:,} hosts, more than {MAX_HOSTLIST}")
    # Checked: every range well formed, the whole list bounded. Duplicates stay, in the
    # order written (a job's hostlist names each host once; a repeat is the scheduler's).
    return python_hostlist.expand_hostlist(text, allow_duplicates=True)


def _short(expr: str) -> str:
    return repr(expr) if len(expr) <= 80 else repr(expr[:77] + "...")


def _split_top_level(text: str, *, expr: str) -> list[str]:
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise HostlistError(f"hostlist {_short(expr)}: nested '['")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise HostlistError(f"hostlist {_short(expr)}: ']' without '['")
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth:
        raise HostlistError(f"hostlist {_short(expr)}: '[' without ']'")
    items.append(text[start:])
    if len(items) > 1 and any(not item for item in items):
        raise HostlistError(f"hostlist {_short(expr)}: empty name between commas")
    return [item for item in items if item]


def _parse_item(item: str, *, expr: str) -> list[int]:
    """The lengths of a name's ranges (each checked)."""
    if item.count("[") > MAX_BRACKETS:
        raise HostlistError(f"hostlist {_short(expr)}: a name with more than {MAX_BRACKETS} ranges")
    return [sum(last - first + 1 for first, last, _ in _parse_ranges(m.group(1), expr=expr))
            for m in _BRACKET.finditer(item)]


def _parse_ranges(body: str, *, expr: str) -> list[tuple[int, int, int]]:
    out: list[tuple[int, int, int]] = []
    for part in body.split(","):
        lo, sep, hi = part.partition("-")
        if not _digits(lo) or (sep and not _digits(hi)):
            raise HostlistError(f"hostlist {_short(expr)}: bad range {part[:40]!r} (expected N or N-M)")
        first, last = int(lo), int(hi) if sep else int(lo)
        if last < first:
            raise HostlistError(f"hostlist {_short(expr)}: range {part!r} runs backwards")
        if last - first >= MAX_HOSTLIST:
            raise HostlistError(f"hostlist {_short(expr)}: range {part!r} is longer than {MAX_HOSTLIST}")
        out.append((first, last, len(lo)))
    return out


def _digits(text: str) -> bool:
    """ASCII digits only (str.isdigit also takes other scripts' digits, and '²')."""
    return text.isascii() and text.isdigit() and len(text) <= 18
