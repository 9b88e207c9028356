"""Dead letters: records the pipeline refused, sent to the dead-letter topic with their
original bytes and the reason, and counted only once the broker has acknowledged them.

The pure part cuts a message into what to dead-letter (`letters`): a single record as
the message's bytes; a `{"metrics": [...]}` batch as its bad members' own bytes, each
judged by the engine's own parser (`engine.normalize.parse_line` on the member as a
one-record batch: the verdict it gets inside the batch), so that the good members, which
the stage has processed, are never dead-lettered with a bad one. Only a batch that cannot
be cut (invalid JSON) goes whole. The adapter (`DeadLetters`) bounds the headers, sends
a value too large for the topic truncated (and says so), awaits the acknowledgement and
retries.
"""
from __future__ import annotations

import asyncio
import inspect
import logging
from dataclasses import dataclass

import msgspec

from engine.normalize import parse_line
from engine.types import Reject

log = logging.getLogger("fabric_rca.worker")

MAX_HEADER_BYTES = 256  # the reason and detail headers at most (a detail may quote the record)
MAX_VALUE_BYTES = 900_000  # under the broker's default max.message.bytes (1 MiB), headers included
RETRIES = 6  # sends of one dead letter before it counts as failed (0.25 s doubling: ~16 s)


@dataclass(frozen=True)
class Letter:
    value: bytes  # the refused record's original bytes (or the whole message's)
    reason: str  # the reject reason(s), comma-separated
    detail: str
    rejected: int = 1  # records it stands for
    whole: bool = False  # the whole message: a batch whose bad members could not be cut out


class _Members(msgspec.Struct):
    metrics: list[msgspec.Raw]


_members = msgspec.json.Decoder(_Members).decode


def bounded(text: str, limit: int = MAX_HEADER_BYTES) -> bytes:
    """`text` as UTF-8 of at most `limit` bytes (cut on a character boundary, marked)."""
    data = text.encode("utf-8", "replace")
    if len(data) <= limit:
        return data
    return data[: limit - 3].decode("utf-8", "ignore").encode() + b"..."


def members(value: bytes) -> list[bytes] | None:
    """The members' own bytes of a `{"metrics": [...]}` batch, or None (not such a batch)."""
    try:
        return [bytes(m) for m in _members(value).metrics]
    except (msgspec.DecodeError, msgspec.ValidationError, TypeError):
        return None
    except RecursionError:  # nested past the decoder's stack (tests/corpus: 5,000 brackets): not cut
        return None


def _verdict(member: bytes) -> list[Reject]:
    return parse_line(b'{"metrics":[' + member + b"]}")[1]


def _whole(value: bytes, rejects: list[Reject], *, whole: bool = False) -> Letter:
    reasons = sorted({r.reason for r in rejects})
    return Letter(value, ",".join(reasons), rejects[0].detail, rejected=len(rejects), whole=whole)


def letters(value: bytes, rejects: list[Reject]) -> list[Letter]:
    """What to dead-letter for a message whose records got `rejects` from the stage."""
    if not rejects:
        return []
    parts = members(value)
    if not parts:  # one record (or unreadable, or an empty batch): the message is the record
        return [_whole(value, rejects)]
    out: list[Letter] = []
    left = list(rejects)
    for part in parts:
        verdict = _verdict(part)
        if verdict:
            r = verdict[0]
            out.append(Letter(part, r.reason, r.detail))
            _take(left, r.reason)
    # Rejects found after parsing (too late, a bad job) name the record's series.
    read = [(part, parse_line(part)[0]) for part in parts] if left else []
    for r in list(left):
        part = _member_of(read, r)
        if part is not None:
            out.append(Letter(part, r.reason, r.detail))
            left.remove(r)
    if left:  # not cut out: the whole message, so nothing refused goes unlettered
        out.append(_whole(value, left, whole=True))
    return out


def _take(rejects: list[Reject], reason: str) -> None:
    for i, r in enumerate(rejects):
        if r.reason == reason:
            del rejects[i]
            return


def _member_of(read: list[tuple[bytes, list]], r: Reject) -> bytes | None:
    """The member a post-parse reject (raw = the record's series) is about."""
    for part, metrics in read:
        for m in metrics:
            if m.series == r.raw and (r.reason != "too_late" or f"event time {m.ts:.3f} " in r.detail):
                return part
    return None


class DeadLetters:
    """Sends letters to the dead-letter topic; counts those acknowledged, truncated, failed."""

    def __init__(self, topic, *, max_value_bytes: int = MAX_VALUE_BYTES, retries: int = RETRIES,
                 first_wait_s: float = 0.25):
        self.topic, self.max_value_bytes, self.retries, self.first_wait_s = topic, max_value_bytes, retries, first_wait_s
        self.delivered = 0  # acknowledged by the broker
        self.truncated = 0  # of those, sent truncated (too large for the topic)
        self.failed = 0  # not acknowledged after every retry

    async def send_all(self, key: bytes | None, letters_: list[Letter], *, source: str) -> None:
        """Send every letter, then wait for all acknowledgements (one round trip per message)."""
        await asyncio.gather(*(self._send(key, letter, source) for letter in letters_))

    async def _send(self, key: bytes | None, letter: Letter, source: str) -> None:
        limit, wait = self.max_value_bytes, self.first_wait_s
        for attempt in range(1, self.retries + 1):
            value, headers = self._message(letter, source, limit)
            try:
                delivery = await self.topic.send(key=key, value=value, headers=headers)
                if inspect.isawaitable(delivery):  # (faust: a future of the broker's ack)
                    await delivery
            except Exception as exc:  # noqa: BLE001 - any refusal: retry, smaller if it was the size
                if "TooLarge" in type(exc).__name__ or "TooLarge" in repr(exc):
                    limit = max(1024, min(limit, len(value)) // 2)
                log.warning("dead letter of %s (%s) not delivered, try %d of %d: %s: %s", source, letter.reason,
                            attempt, self.retries, type(exc).__name__, str(exc)[:200])
                await asyncio.sleep(wait)
                wait *= 2
                continue
            self.delivered += 1
            self.truncated += len(value) < len(letter.value)
            return
        self.failed += 1
        log.error("dead letter of %s (%s, %d bytes) could not be delivered: dropped after %d tries",
                  source, letter.reason, len(letter.value), self.retries)

    @staticmethod
    def _message(letter: Letter, source: str, limit: int) -> tuple[bytes, list[tuple[str, bytes]]]:
        headers = [("reason", bounded(letter.reason)), ("detail", bounded(letter.detail)),
                   ("source", bounded(source)), ("rejected", str(letter.rejected).encode())]
        if letter.whole:
            headers.append(("whole_message", b"true"))
        value = letter.value
        if len(value) > limit:
            headers.append(("truncated", f"{len(value)} bytes, first {limit} kept".encode()))
            value = value[:limit]
        return value, headers
