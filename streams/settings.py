"""One settings object for a worker process, built in `main` from flags and environment.
The engine's part of it is `compose.EngineSettings`, the same object `replay` builds."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from compose import EngineSettings
from notify import NotifySettings
from streams.security import PLAINTEXT, KafkaSecurity
from streams.topics import DLQ, INCIDENTS, JOBS, STATE, SYMPTOMS, TELEMETRY


@dataclass(frozen=True)
class WorkerSettings:
    bootstrap: str
    db_url: str = field(repr=False)  # may hold a password: never in a log line or traceback
    engine: EngineSettings  # topology, jobs, rules, models and tunables: what compose.build_engine builds
    app_id: str = "fabric-rca"
    telemetry_topics: tuple[str, ...] = (TELEMETRY,)
    jobs_topic: str = JOBS
    symptoms_topic: str = SYMPTOMS
    incidents_topic: str = INCIDENTS
    dlq_topic: str = DLQ
    state_topic: str = STATE
    checkpoint_every_s: float = 2.0  # wall time between snapshots of a busy stage
    session_timeout_s: float = 10.0  # a silent group member is replaced after this long
    # Correlation waits for every telemetry partition to tick; one that has sent nothing for
    # this long while others did (no hosts hashed to it, its collectors down) is not waited for.
    idle_partition_s: float = 30.0
    partitions: int = 4
    # N > 0: the detect stages run in N child processes, beside faust, correlation and the
    # store (streams.detect_child; the `worker` command's default is 4 with two cores or more); 0: here.
    detect_processes: int = 0
    # A dead letter's value is the refused record's bytes, cut to this (and marked so) when larger.
    dlq_max_bytes: int = 900_000
    # A stage whose checkpoint is refused re-reads at most this much of its partition (streams.rebuild).
    rebuild_max_records: int = 1_000_000
    rebuild_max_bytes: int = 1 << 30
    web_port: int = 9108
    web_bind: str = "127.0.0.1"
    data_dir: Path = Path(".fabric-rca-worker")
    loglevel: str = "WARNING"
    log_format: str = "json"  # or "text"
    kafka_security: KafkaSecurity = PLAINTEXT  # TLS and SASL of every client (streams.security)
    notify: NotifySettings | None = None  # Alertmanager / webhook of the stored incident changes

    def topics(self) -> dict[str, int]:
        """Every topic this worker reads or writes, with the partitions to create it with."""
        out = {t: self.partitions for t in (*self.telemetry_topics, self.jobs_topic, self.incidents_topic,
                                            self.dlq_topic)}
        return out | {self.symptoms_topic: 1, self.state_topic: 1}

    @classmethod
    def with_prefix(cls, prefix: str, **kw) -> "WorkerSettings":
        """Every topic and the app id under one prefix (tests, several deployments on one broker)."""
        return cls(
            app_id=f"{prefix}fabric-rca", telemetry_topics=(prefix + TELEMETRY,), jobs_topic=prefix + JOBS,
            symptoms_topic=prefix + SYMPTOMS, incidents_topic=prefix + INCIDENTS, dlq_topic=prefix + DLQ,
            state_topic=prefix + STATE, **kw,
        )
