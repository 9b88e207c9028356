"""Plain-text rendering of incidents for the CLI (`fabric-rca incidents`)."""
from __future__ import annotations

WIDTH = 120
_GAP = "  "
_INDENT = "    "
_MIN_TITLE = 24
_MIN_ENTITY = 16
_MAX_ENTITY = 26
_HEADERS = ("ID", "STATUS", "SEVERITY", "OPENED (UTC)", "CAUSE", "ENTITY", "SCORE", "JOBS", "TITLE")
_RIGHT = {"SCORE", "JOBS"}


def incidents_table(incidents: list[dict]) -> str:
    """One line per incident, columns sized to the content, at most 120 columns wide.

    The top root cause stands for the incident; long entities are cut with `…`. When
    the columns leave too little room for the title, each title gets its own
    indented line under its incident instead.
    """
    if not incidents:
        return "no incidents"
    cells = [_cells(incident) for incident in incidents]
    widths = [max(len(h), *(len(row[i]) for row in cells)) for i, h in enumerate(_HEADERS[:-1])]
    widths[5] = entity = min(widths[5], _MAX_ENTITY)
    room = WIDTH - _used(widths)
    if room < _MIN_TITLE:  # cut the entity first
        widths[5] = max(_MIN_ENTITY, entity - (_MIN_TITLE - room))
        room = WIDTH - _used(widths)
    if room >= _MIN_TITLE:
        widths.append(room)
        return "\n".join(_line(values, widths) for values in [_HEADERS, *cells])
    widths[5] = entity
    lines = [_line(_HEADERS[:-1], widths)]
    for row in cells:
        lines += [_line(row[:-1], widths), _cut(_INDENT + row[-1], WIDTH)]
    return "\n".join(lines)


def _used(widths: list[int]) -> int:
    return sum(widths) + len(_GAP) * len(widths)


def _cells(incident: dict) -> tuple[str, ...]:
    causes = sorted(incident.get("root_causes") or [], key=lambda rc: rc.get("rank", 0))
    top = causes[0] if causes else None
    return (
        str(incident.get("id", "")),
        str(incident.get("status", "")),
        str(incident.get("severity", "")),
        _short_time(incident.get("opened_at")),
        top["cause"] if top else "-",
        top["entity"]["id"] if top else "-",
        f"{top['score']:.2f}" if top else "-",
        str(len(incident.get("affected_jobs") or [])),
        str(incident.get("title", "")),
    )


def _line(values: tuple[str, ...], widths: list[int]) -> str:
    parts = []
    for header, value, width in zip(_HEADERS, values, widths, strict=False):
        text = _cut(value, width)
        parts.append(text.rjust(width) if header in _RIGHT else text.ljust(width))
    return _GAP.join(parts).rstrip()


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _short_time(value: str | None) -> str:
    """`2025-11-29T07:08:10.000Z` -> `2025-11-29 07:08:10` (the header says UTC)."""
    if not value:
        return "-"
    return value.replace("T", " ").removesuffix("Z").split(".")[0]
