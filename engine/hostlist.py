"""Slurm hostlists (`gpu[001-004,009],gpu011`, `r[1-2]n[01-02]`): parsed, sized, then
expanded. The size is bounded before a single name is built (see docs/design.md for
why this is not python-hostlist)."""
from __future__ import annotations

import math
import re
from itertools import product

MAX_HOSTLIST = 65536  # a longer expansion is a typo (gpu[1-1000000]), not a job


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
    size = sum(math.prod(len(p) for p in parts) for parts in items)
    if size > MAX_HOSTLIST:
        raise HostlistError(f"hostlist {_short(expr)} expands to {size:,} hosts, more than {MAX_HOSTLIST}")
    names: list[str] = []
    for parts in items:
        names.extend("".join(p) for p in product(*parts))
    return names


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


class _Range:
    """The numbers of one bracket, zero-padded, as a sequence (nothing built until read)."""

    def __init__(self, spans: list[tuple[int, int, int]]):
        self.spans = spans  # (first, last, width)

    def __len__(self) -> int:
        return sum(last - first + 1 for first, last, _ in self.spans)

    def __iter__(self):
        for first, last, width in self.spans:
            for n in range(first, last + 1):
                yield f"{n:0{width}d}"


def _parse_item(item: str, *, expr: str) -> list:
    parts: list = []
    pos = 0
    for m in _BRACKET.finditer(item):
        parts.append((item[pos : m.start()],))
        parts.append(_Range(_parse_ranges(m.group(1), expr=expr)))
        pos = m.end()
    parts.append((item[pos:],))
    return parts


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
