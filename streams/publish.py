"""Publish recorded telemetry (and job placements) to Kafka, keyed as Telegraf would.

The pure part is `publishable` (`messages_of_line`: its messages): one recorded line -> the Kafka messages it becomes
(contract section 1: one metric per message, key = its `host` tag; `job_placement`
records go to the jobs topic keyed by job id) and the records it rejects. It reads the
line with the very function replay and the workers read it with (engine.normalize's
`parse_line`), so it sends exactly what they would accept, each metric re-encoded from
what was read; what they would reject goes to the rejects file, counted, never sent.

`publish_files` is the adapter around it: read files, pace event time, send, count,
and raise `PublishError` at the end if any message was not acknowledged.
"""
from __future__ import annotations

import logging
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, NamedTuple

from orjson import dumps

from engine.bounds import MAX_LINE_BYTES
from engine.job_sources import read_jobs_file
from engine.k8s_pods import PodLabels
from engine.normalize import JOB_PLACEMENT, Parser, seconds
from engine.replay import FileBroken, FileFailure, Pacer, RejectWriter, check_files, numbered_lines, open_lines
from engine.types import Job, Metric, Reject
from streams.security import PLAINTEXT, KafkaSecurity
from streams.topics import JOBS, TELEMETRY, KafkaUnavailable, parse_bootstrap

log = logging.getLogger(__name__)

PROGRESS_EVERY_S = 0.5
FLUSH_TIMEOUT_S = 120.0
DEFAULT_BATCH = 200  # metrics of one host per message (about 200 KB of JSON)
BATCH_BYTES = 256 * 1024  # ... and at most this much
WINDOW_S = 3.0  # ... and at most this much of its event time (under the workers' 5 s lateness)
MAX_REQUEST_BYTES = 1_048_576  # the producer's bound, under the broker's default max.message.bytes (1 MiB + 12)
MAX_MESSAGE_BYTES = MAX_LINE_BYTES + 4096  # a value, with room for its key and the record's overhead
JUMP_S = 60.0  # a record this far past the window is sent alone and moves no window ...
JUMP_RUN = 64  # ... unless this many such records come in a row (the file's clock jumped)


class Message(NamedTuple):
    topic: str
    key: bytes | None
    value: bytes
    timestamp: object = None  # the record's own timestamp (any unit), for pacing only


@dataclass
class PublishStats:
    records: int = 0  # metrics for the telemetry topic (unkeyed and failed ones included)
    messages: int = 0  # Kafka messages sent (a batch of one host's metrics is one)
    jobs: int = 0  # messages for the jobs topic (failed ones included)
    unkeyed: int = 0  # messages without a key (unreadable, or no host / job id)
    bytes: int = 0  # value bytes handed to the producer
    seconds: float = 0.0  # wall time so far
    failed: int = 0  # messages the broker did not acknowledge (or that could not be sent)
    rejects: Counter = field(default_factory=Counter)  # records not sent, by reason (as replay names them)
    failed_files: list[FileFailure] = field(default_factory=list)  # files that broke part-way

    @property
    def rejected(self) -> int:
        return sum(self.rejects.values())

    @property
    def rate(self) -> float:
        """Metrics and job snapshots sent per second."""
        return (self.records + self.jobs) / self.seconds if self.seconds > 0 else 0.0


class PublishError(RuntimeError):
    """Some messages were not acknowledged by the broker; `stats` says how many."""

    def __init__(self, message: str, *, stats: PublishStats):
        self.stats = stats
        super().__init__(message)


# ------------------------------------------------------------------ the pure part


_BATCH = re.compile(rb'\{\s*"metrics"\s*:')  # (a batch of one is re-encoded: a batch is never a member)


class Publishable(NamedTuple):
    messages: list[Message]
    rejects: list[Reject]


def messages_of_line(line: bytes | str, *, topic: str = TELEMETRY, jobs_topic: str = JOBS) -> list[Message]:
    """The Kafka messages of one recorded line (what `publishable` sends of it)."""
    return publishable(line, topic=topic, jobs_topic=jobs_topic).messages


def publishable(line: bytes | str, *, topic: str = TELEMETRY, jobs_topic: str = JOBS,
                parser: Parser | None = None) -> Publishable:
    """The Kafka messages of one recorded line (one metric or a `{"metrics": [...]}`
    batch) and the records of it that replay would reject (the same reasons). A line of
    one metric is sent as written; a batch's members are re-encoded from what was read
    (the timestamp in seconds), each a message of its own. A file's reader passes the
    `parser` it owns (its memo of checked tags); a line alone gets a fresh one."""
    metrics, rejects = (parser or Parser()).parse_line(line)
    if len(metrics) == 1 and not rejects:
        raw = line.strip() if line.__class__ is bytes else str(line).strip().encode()
        if raw[:1] == b"{" and not _BATCH.match(raw):  # (not after a BOM: it may join a batch)
            return Publishable([_message(metrics[0], raw, topic, jobs_topic)], [])
    out = []
    for m in metrics:
        value = dumps({"name": m.name, "tags": m.tags, "fields": m.fields, "timestamp": m.ts})
        if len(value) > MAX_MESSAGE_BYTES:  # (re-encoded wider than it was written: rare, never sent)
            rejects.append(Reject("message_too_large", f"{len(value):,} bytes as a message", m.series))
            continue
        out.append(_message(m, value, topic, jobs_topic))
    return Publishable(out, rejects)


def _message(m: Metric, value: bytes, topic: str, jobs_topic: str) -> Message:
    if m.name == JOB_PLACEMENT:  # no host tag: keyed by job id instead
        job_id = _job_id(m)
        return Message(jobs_topic, job_id.encode() if job_id else None, value, m.ts)
    return Message(topic, m.tags["host"].encode(), value, m.ts)


def _job_id(metric: Metric) -> str:
    """The job id of a job_placement record (a field, or a tag), as engine.jobs reads it."""
    fields, tags = metric.fields, metric.tags
    value = fields.get("job_id") if fields.__class__ is dict else None
    if value is None and tags.__class__ is dict:
        value = tags.get("job_id")
    if value is None or value.__class__ in (dict, list, bool):
        return ""
    if value.__class__ is float and value.is_integer():
        return str(int(value))
    return str(value).strip()


def placement_record(*, job: Job, ts: float, cluster: str = "", scheduler: str = "slurm") -> dict:
    """A `job_placement` metric (contract section 2) holding one job snapshot."""
    fields: dict[str, object] = {
        "job_id": job.job_id, "account": job.tenant, "user": job.user,
        "job_state": job.state, "nodes": ",".join(job.hosts),
    }
    if job.storage is not None:
        fields["storage"] = ",".join(job.storage)
    if job.start is not None:
        fields["start_time"] = job.start
    if job.end is not None:
        fields["end_time"] = job.end
    return {"name": "job_placement", "tags": {"scheduler": scheduler, "cluster": cluster},
            "fields": fields, "timestamp": ts}


def job_messages(path: Path, *, jobs_topic: str = JOBS, labels: PodLabels = PodLabels()) -> list[Message]:
    """The jobs topic's messages of a jobs file: `job_placement` JSON Lines as written
    (other measurements skipped), or one record per job of the squeue / pod documents it
    holds (engine.job_sources, by content). The file is read first, so a bad one fails
    (JobError) before anything is sent."""
    found = read_jobs_file(path, labels=labels)
    if found.scheduler_documents:
        taken = Path(path).stat().st_mtime  # for jobs with neither a start nor a document time
        records = (placement_record(job=job, ts=ts or taken, cluster=found.cluster, scheduler=found.scheduler)
                   for ts, job in found.snapshots)
        return [Message(jobs_topic, r["fields"]["job_id"].encode(), dumps(r), r["timestamp"]) for r in records]
    out: list[Message] = []
    for line in open_lines(Path(path)):
        out.extend(m for m in messages_of_line(line, jobs_topic=jobs_topic) if m.topic == jobs_topic)
    return out


# ------------------------------------------------------------------ the adapter


def publish_files(
    files: list[Path],
    *,
    bootstrap: str,
    topic: str = TELEMETRY,
    jobs_file: Path | None = None,
    jobs_topic: str = JOBS,
    speed: float | None = None,
    progress: Callable[[PublishStats], None] | None = None,
    connect_timeout_s: float = 15,
    batch: int = DEFAULT_BATCH,
    security: KafkaSecurity | None = None,
    rejects_path: Path | None = None,
    job_labels: PodLabels = PodLabels(),
) -> PublishStats:
    """Send every metric of `files` (in the order given) to `topic`, keyed by host, after
    the jobs of `jobs_file` (pods' jobs named by `job_labels`); pace event time at
    `speed` x real time when set.

    Metrics of one host within WINDOW_S of event time are sent together as
    `{"metrics": [...]}` messages of up to `batch` metrics (contract section 1), as
    Telegraf's batch format does: a stream processor pays per message, not per metric.
    `batch=1` sends one metric a message.

    Records replay would reject are not sent: they are counted (`stats.rejects`) and
    written to `rejects_path` as replay writes them. A file that breaks part-way is
    sent up to its error and listed in `stats.failed_files`; the next file is read."""
    paths = check_files(files)
    if batch < 1:
        raise ValueError(f"batch must be at least 1, got {batch}")
    bootstrap = parse_bootstrap(bootstrap)
    jobs = job_messages(Path(jobs_file), jobs_topic=jobs_topic, labels=job_labels) if jobs_file is not None else []
    sender = _Sender(bootstrap=bootstrap, jobs_topic=jobs_topic, connect_timeout_s=connect_timeout_s, security=security)
    stats = sender.stats
    batches = _Batches(sender, size=batch)
    try:
        sender.send_all(jobs)
        sender.flush()  # placements first, so a worker knows the jobs when telemetry arrives
        pacer = Pacer(speed) if speed else None
        reader = _Reader(batches=batches, pacer=pacer, progress=progress, writer=RejectWriter(rejects_path),
                         topic=topic, jobs_topic=jobs_topic)
        try:
            for path in paths:
                try:
                    reader.read(path)
                except FileBroken as exc:  # sent up to the error; the next file is read
                    stats.failed_files.append(exc.failure)
        finally:
            reader.writer.close()
        batches.send()
        sender.flush()
    finally:
        sender.close()
    if progress is not None:
        progress(stats)
    if stats.failed:
        raise PublishError(
            f"{stats.failed} of {stats.messages} messages were not acknowledged by "
            f"{bootstrap}: {sender.first_error!r}", stats=stats)
    return stats


@dataclass
class _Reader:
    """Reads one file's lines into the batches: rejects written and counted, progress shown."""

    batches: "_Batches"
    pacer: Pacer | None
    progress: Callable[[PublishStats], None] | None
    writer: RejectWriter
    topic: str
    jobs_topic: str
    last_report: float = 0.0
    parser: Parser = field(default_factory=Parser)

    def read(self, path: Path) -> None:
        batches, pacer, progress = self.batches, self.pacer, self.progress
        stats = batches.sender.stats
        for n, line in numbered_lines(path):
            messages, rejects = publishable(line, topic=self.topic, jobs_topic=self.jobs_topic, parser=self.parser)
            if rejects:
                stats.rejects.update(r.reason for r in rejects)
                self.writer.write(rejects, source=f"{path}:{n}")
            if pacer is not None:
                batches.send()  # what is due goes out before the pacer waits
                _pace(pacer, messages)
            batches.add(messages)
            if n & 255 == 0 and progress is not None:
                now = time.monotonic()
                if now - self.last_report >= PROGRESS_EVERY_S:
                    stats.seconds = now - batches.sender.started
                    progress(stats)
                    self.last_report = now


class _Batches:
    """Per-key batches of telemetry metrics; job and unkeyed messages pass straight on."""

    def __init__(self, sender: "_Sender", *, size: int, total: int = 5000):
        self.sender, self.size, self.total = sender, size, total
        self.pending: dict[tuple[str, bytes], list[bytes]] = {}
        self.nbytes: dict[tuple[str, bytes], int] = {}
        self.count = 0
        self.window_end = float("-inf")
        self.ahead = 0  # records in a row far past the window (one from 2030 must not end windowing)

    def add(self, messages: list[Message]) -> None:
        if self.size == 1:
            self.sender.send_all(messages)
            return
        direct = []
        for m in messages:
            if m.key is None or m.topic == self.sender.jobs_topic:
                direct.append(m)
                continue
            if m.timestamp is not None:
                try:
                    ts = seconds(m.timestamp)
                except ValueError:
                    ts = None
                if ts is not None and ts >= self.window_end + JUMP_S and self.window_end != float("-inf"):
                    self.ahead += 1
                    if self.ahead < JUMP_RUN:
                        direct.append(m)  # alone: the worker quarantines it (future_timestamp)
                        continue
                elif ts is not None:
                    self.ahead = 0
                    if ts < self.window_end - WINDOW_S:
                        # A record older than the window (late in the file): what is pending
                        # goes first, so no record of its partition precedes it that did not
                        # precede it in the file, and the workers' watermark keeps it as
                        # `replay`'s does (a batch holding newer records ahead of it made it
                        # `too_late` for the worker only).
                        self.send()
                if ts is not None and ts >= self.window_end:
                    # A batch holds at most one second of a host's event time, and all
                    # batches go out when the file's time moves on: the partitions keep
                    # (nearly) event-time order, which the workers' watermark relies on.
                    self.send()
                    self.window_end = ts // WINDOW_S * WINDOW_S + WINDOW_S
            key = (m.topic, m.key)
            if self.nbytes.get(key, 0) + len(m.value) > BATCH_BYTES and key in self.pending:
                self._send_key(*key)  # keep every batch well under the message size limit
            self.pending.setdefault(key, []).append(m.value)
            self.nbytes[key] = self.nbytes.get(key, 0) + len(m.value) + 1
            self.count += 1
            if len(self.pending[key]) >= self.size:
                self._send_key(*key)
        if direct:
            self.sender.send_all(direct)
        if self.count >= self.total:
            self.send()

    def _send_key(self, topic: str, key: bytes) -> None:
        values = self.pending.pop((topic, key))
        self.nbytes.pop((topic, key), None)
        self.count -= len(values)
        if len(values) == 1 or sum(map(len, values)) + len(values) + 14 > MAX_MESSAGE_BYTES:
            # One metric, or one too large to batch: alone, so only it can fail.
            self.sender.send_all([Message(topic, key, v, None) for v in values])
            return
        value = b'{"metrics":[' + b",".join(values) + b"]}"
        self.sender.send_all([Message(topic, key, value, None)], records=len(values))

    def send(self) -> None:
        for topic, key in list(self.pending):
            self._send_key(topic, key)


def _pace(pacer: Pacer, messages: list[Message]) -> None:
    for m in messages:
        if m.timestamp is not None:
            try:
                pacer.wait_for(seconds(m.timestamp))
            except ValueError:
                continue  # a bad timestamp does not pace; the workers reject the record
            return


def key_partition(key: bytes, partitions: Iterable[int]) -> int:
    """The partition kafka-python's DefaultPartitioner (and the Java client's) gives a
    keyed message: murmur2 of the key, made positive, modulo the sorted partitions."""
    from kafka.partitioner.default import murmur2

    ordered = sorted(partitions)
    return ordered[(murmur2(key) & 0x7FFFFFFF) % len(ordered)]


class _Sender:
    """A KafkaProducer that counts what it sends and what fails. Keys map to partitions
    as the default partitioner maps them (murmur2), computed once per key."""

    def __init__(self, *, bootstrap: str, jobs_topic: str, connect_timeout_s: float,
                 security: KafkaSecurity | None = None):
        from kafka import KafkaProducer
        from kafka.errors import KafkaError, MessageSizeTooLargeError
        from kafka.record import util as record_util

        if getattr(record_util, "crc32c_c", True) is None:
            log.warning("kafka-python computes CRC32C in pure Python (about 4x slower): "
                        "pip install crc32c")

        self.bootstrap = bootstrap
        self.jobs_topic = jobs_topic
        self._too_large = MessageSizeTooLargeError
        self.stats = PublishStats()
        self.first_error: BaseException | None = None
        self._lock = threading.Lock()
        self._partitions: dict[tuple[str, bytes], int] = {}
        try:
            self.producer = KafkaProducer(
                bootstrap_servers=bootstrap, client_id="fabric-rca-publish",
                acks="all", enable_idempotence=True, linger_ms=20, batch_size=256 * 1024,
                max_request_size=MAX_REQUEST_BYTES, compression_type=None,
                bootstrap_timeout_ms=int(connect_timeout_s * 1000), max_block_ms=30_000, request_timeout_ms=30_000,
                **(security or PLAINTEXT).kafka_python(),
            )
        except KafkaError as exc:
            raise KafkaUnavailable(bootstrap, f"{type(exc).__name__}: {exc}") from exc
        self.started = time.monotonic()

    def send_all(self, messages: Iterable[Message], *, records: int = 1) -> None:
        """Send each message; a telemetry message counts as `records` metrics."""
        stats, send, failed, cache = self.stats, self.producer.send, self._failed, self._partitions
        too_large, jobs_topic = self._too_large, self.jobs_topic
        for topic, key, value, _ in messages:
            stats.messages += 1
            if topic == jobs_topic:
                stats.jobs += 1
            else:
                stats.records += records
            if key is None:
                partition = None
                stats.unkeyed += 1
            else:
                partition = cache.get((topic, key))
                if partition is None:
                    partition = self._partition(topic, key)
            try:
                send(topic, value=value, key=key, partition=partition).add_errback(failed)
            except too_large as exc:  # this message only: count it and go on
                failed(exc)
                continue
            except Exception as exc:  # noqa: BLE001 - the producer cannot go on: say so now
                failed(exc)
                raise PublishError(f"cannot send to {topic} at {self.bootstrap}: "
                                   f"{type(exc).__name__}: {exc}", stats=stats) from exc
            stats.bytes += len(value)

    def _partition(self, topic: str, key: bytes) -> int:
        partition = key_partition(key, self.producer.partitions_for(topic))
        self._partitions[(topic, key)] = partition
        return partition

    def _failed(self, exc: BaseException) -> None:
        """Errback of every send (runs on the producer's I/O thread)."""
        with self._lock:
            self.stats.failed += 1
            if self.first_error is None:
                self.first_error = exc

    def flush(self) -> None:
        from kafka.errors import KafkaError

        try:
            self.producer.flush(timeout=FLUSH_TIMEOUT_S)
        except KafkaError as exc:
            raise PublishError(f"messages still unacknowledged by {self.bootstrap} after "
                               f"{FLUSH_TIMEOUT_S:.0f} s: {exc}", stats=self.stats) from exc
        finally:
            self.stats.seconds = time.monotonic() - self.started

    def close(self) -> None:
        self.producer.close(timeout=10)
