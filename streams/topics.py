"""Topic names of the pipeline and their creation on a broker.

One name per stream, shared by the publisher, the workers and the CLI. Creating a topic
is idempotent: a topic that already exists is left as it is (its partition count too).
"""
from __future__ import annotations

import re

from streams.security import PLAINTEXT, KafkaSecurity

TELEMETRY = "fabric.telemetry"
JOBS = "fabric.jobs"
SYMPTOMS = "fabric.symptoms"
INCIDENTS = "fabric.incidents"
DLQ = "fabric.telemetry.dlq"
STATE = "fabric.state"  # worker checkpoints, compacted: the latest snapshot per stage

DEFAULT_PARTITIONS = 4

ALL_TOPICS = (TELEMETRY, JOBS, SYMPTOMS, INCIDENTS, DLQ, STATE)
# A large fabric's stage snapshot, an incident of a pause tree with hundreds of symptoms
# (each with its samples: about 5 KB a symptom), a stage's symptoms of a few seconds: over
# the broker's default max.message.bytes (1 MiB), which would refuse them (the producer
# allows 16 MiB: streams/app.py). Topics created here take them.
LARGE_MESSAGES = {"max.message.bytes": str(16 * 1024 * 1024)}
COMPACTED = {"cleanup.policy": "compact", "segment.ms": "60000", "min.cleanable.dirty.ratio": "0.1",
             **LARGE_MESSAGES}


def pipeline_topics(prefix: str = "", partitions: int = DEFAULT_PARTITIONS) -> dict[str, int]:
    """Every topic of the pipeline with its partition count: the symptoms topic has one
    partition (correlation sees the whole fabric in one order), the state topic one."""
    return {prefix + t: 1 if t in (SYMPTOMS, STATE) else partitions for t in ALL_TOPICS}

_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")
_HOST = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\]")


class KafkaUnavailable(RuntimeError):
    """No broker answered at `bootstrap`."""

    def __init__(self, bootstrap: str, reason: str):
        self.bootstrap = bootstrap
        self.reason = reason
        super().__init__(
            f"no Kafka broker reachable at {bootstrap} ({reason}); "
            f"start one with `scripts/kafka-dev start` and pass the address it prints"
        )


class TopicError(RuntimeError):
    """The broker refused to create a topic for a reason other than its existence."""


def parse_bootstrap(text: str) -> str:
    """`HOST:PORT` (or a comma-separated list of them), normalised; ValueError says why not."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("bootstrap address is empty: expected HOST:PORT, e.g. 127.0.0.1:9092")
    servers = []
    for item in text.split(","):
        item = item.strip()
        host, sep, port = item.rpartition(":")
        if not sep or not host:
            raise ValueError(f"bootstrap address {item!r} is not HOST:PORT (e.g. 127.0.0.1:9092)")
        if not _HOST.fullmatch(host):
            raise ValueError(f"bootstrap address {item!r}: {host!r} is not a host name or IP address")
        if not port.isdigit() or not 1 <= int(port) <= 65535:
            raise ValueError(f"bootstrap address {item!r}: port {port!r} is not a number in 1..65535")
        servers.append(f"{host}:{int(port)}")
    return ",".join(servers)


def ensure_topics(*, bootstrap: str, topics: dict[str, int], timeout_s: float = 30,
                  configs: dict[str, dict[str, str]] | None = None, security: KafkaSecurity | None = None) -> list[str]:
    """Create the topics (name -> partitions, replication 1; optional per-topic broker
    configs) that do not exist yet and wait until they have leaders; return the names
    created, in the order given. A topic whose name ends with the state topic's name is
    created compacted; it and those whose names end with the symptoms' or the incidents'
    take messages of up to 16 MiB (`LARGE_MESSAGES`)."""
    for name, partitions in topics.items():
        if not _TOPIC_NAME.fullmatch(name) or name in (".", ".."):
            raise ValueError(f"{name!r} is not a valid Kafka topic name ([A-Za-z0-9._-], 1..249 characters)")
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
            raise ValueError(f"topic {name!r}: partitions must be a positive integer, got {partitions!r}")
    admin = admin_client(bootstrap=bootstrap, timeout_s=timeout_s, security=security)
    try:
        from kafka.errors import KafkaError

        try:
            existing = set(admin.list_topics())
            configs = dict(configs or {})
            for n in topics:
                if n.endswith(STATE):
                    configs.setdefault(n, COMPACTED)
                elif n.endswith((SYMPTOMS, INCIDENTS)):
                    configs.setdefault(n, LARGE_MESSAGES)
            wanted = {n: {"num_partitions": p, "replication_factor": 1, **({"configs": configs[n]} if n in configs else {})}
                      for n, p in topics.items() if n not in existing}
            if not wanted:
                return []
            result = admin.create_topics(wanted, timeout_ms=int(timeout_s * 1000), raise_errors=False)
        except KafkaError as exc:
            raise KafkaUnavailable(bootstrap, f"{type(exc).__name__}: {exc}") from exc
        created = _created(result, wanted=wanted)
        try:
            admin.wait_for_topics(created, timeout_ms=int(timeout_s * 1000))
        except KafkaError as exc:
            raise TopicError(f"topics {', '.join(created)} were created at {bootstrap} "
                             f"but have no leader yet: {exc}") from exc
        return [n for n in topics if n in created]
    finally:
        admin.close()


def _created(result: dict, *, wanted: dict) -> list[str]:
    """Names the broker created; a concurrent creation (TopicAlreadyExists) is fine."""
    from kafka.errors import TopicAlreadyExistsError, for_code

    created = []
    for entry in result.get("topics", ()):
        code = entry.get("error_code", 0)
        if code == 0:
            created.append(entry["name"])
        elif for_code(code) is not TopicAlreadyExistsError:
            spec = wanted.get(entry["name"], {})
            raise TopicError(
                f"cannot create topic {entry['name']!r} with {spec.get('num_partitions')} partitions: "
                f"{for_code(code).__name__}: {entry.get('error_message') or 'no message'}"
            )
    return created


def admin_client(*, bootstrap: str, timeout_s: float = 30, security: KafkaSecurity | None = None):
    """A connected KafkaAdminClient; KafkaUnavailable when no broker answers in time."""
    from kafka.admin import KafkaAdminClient
    from kafka.errors import KafkaError

    ms = max(1000, int(timeout_s * 1000))
    try:
        return KafkaAdminClient(bootstrap_servers=parse_bootstrap(bootstrap), client_id="fabric-rca-admin",
                                bootstrap_timeout_ms=ms, request_timeout_ms=ms, **(security or PLAINTEXT).kafka_python())
    except KafkaError as exc:
        raise KafkaUnavailable(bootstrap, f"{type(exc).__name__}: {exc}") from exc


def partition_counts(*, bootstrap: str, topics: list[str], timeout_s: float = 30,
                     security: KafkaSecurity | None = None) -> dict[str, int]:
    """How many partitions each of `topics` has on the broker; TopicError names a missing one."""
    from kafka.errors import KafkaError

    admin = admin_client(bootstrap=bootstrap, timeout_s=timeout_s, security=security)
    try:
        try:
            described = admin.describe_topics(list(topics))
        except KafkaError as exc:
            raise KafkaUnavailable(bootstrap, f"{type(exc).__name__}: {exc}") from exc
    finally:
        admin.close()
    counts = {t["name"]: len(t.get("partitions") or ()) for t in described if not t.get("error_code")}
    missing = [t for t in topics if not counts.get(t)]
    if missing:
        raise TopicError(f"topic(s) {', '.join(missing)} not found at {bootstrap}: "
                         f"create them with `fabric-rca topics create`")
    return {t: counts[t] for t in topics}
