"""Event time as the contract writes it: epoch numbers in s, ms, us or ns (inferred from
their magnitude) and RFC 3339 strings. The one reading and the one writing of times."""
from __future__ import annotations

import math
from datetime import datetime, timezone

# Plausible event times: 2000-01-01 .. 2100-01-01. Anything else is a unit or clock bug.
MIN_TS = 946_684_800.0
MAX_TS = 4_102_444_800.0


def epoch_seconds(value: float) -> float:
    """Seconds from an epoch number in s, ms, us or ns, by magnitude (2000..2100 in one
    unit only). Not range-checked: callers say what out of range means to them."""
    mag = abs(value)
    if mag >= 1e17:
        return value / 1e9
    if mag >= 1e14:
        return value / 1e6
    if mag >= 1e11:
        return value / 1e3
    return value


class NoTimeZone(ValueError):
    """An ISO 8601 time without a zone offset, where one is required."""


def parse_rfc3339(text: str, *, naive_utc: bool = False) -> float:
    """Seconds since the epoch from an RFC 3339 (ISO 8601) string. A time without a zone
    is refused unless `naive_utc` (then it is UTC). ValueError says why not."""
    try:
        dt = datetime.fromisoformat(text.strip().replace("z", "Z"))
    except ValueError:
        raise ValueError(f"{text!r} is not an RFC 3339 time") from None
    if dt.tzinfo is None:
        if not naive_utc:
            raise NoTimeZone(f"{text!r} has no time zone")
        dt = dt.replace(tzinfo=timezone.utc)
    try:
        return dt.timestamp()
    except (OverflowError, ValueError):
        raise ValueError(f"{text!r} is out of range") from None


def in_range(ts: float) -> bool:
    return math.isfinite(ts) and MIN_TS <= ts <= MAX_TS


def rfc3339(ts: float | datetime | None) -> str | None:
    """`2025-11-29T07:08:10.000Z`: UTC, milliseconds, `Z` (the contract's time format).
    A naive datetime is taken as UTC."""
    if ts is None:
        return None
    if isinstance(ts, datetime):
        dt = ts.replace(tzinfo=timezone.utc) if ts.tzinfo is None else ts.astimezone(timezone.utc)
    else:
        dt = datetime.fromtimestamp(ts, tz=timezone.utc)
    return dt.isoformat(timespec="milliseconds").replace("+00:00", "Z")
