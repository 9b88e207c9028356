"""The faust-streaming app: thin agents around the two stages of the pure core.

    fabric.telemetry (keyed by host) --detect--> fabric.symptoms (1 partition)
    fabric.jobs ---------------------jobs-----^          |
    unreadable records --> fabric.telemetry.dlq     --correlate--> store + fabric.incidents
    stage snapshots <-----------------------------> fabric.state (compacted)

`detect` keeps one `DetectStage` per telemetry partition (state follows the partition);
`correlate` runs the one `CorrelateStage`. Agents decode, call the core, encode; no
diagnosis logic lives here. Delivery is at least once: input is acked only after a
snapshot covering it has been delivered (see `streams.state`), and what a restarted
stage reads twice is dropped downstream or rewritten idempotently.

This module wires the parts: `new_app` (the faust app and its client settings),
`build_app` (topics, `streams.checkpoints`, `streams.agents`, `streams.health`) and
`run_worker`.
"""
from __future__ import annotations

import dataclasses
import sys
from typing import Callable

import faust

from compose import EngineParts, build_engine
from streams import agents as agent_loops
from streams import health, state
from streams.checkpoints import Checkpoints
from streams.detect_child import DetectChild
from streams.rebuild import broker_rebuilder
from streams.store import LazySink
from streams.settings import WorkerSettings
from streams.topics import partition_counts
from streams.transport import Transport


def new_app(settings: WorkerSettings) -> faust.App:
    """The faust app with the worker's broker, producer and consumer settings and no agents:
    `build_app` adds the stages; the Kafka benchmark's raw consumer adds a counting agent,
    so both read through exactly the same client stack."""
    app = faust.App(
        settings.app_id,
        broker=f"kafka://{settings.bootstrap}",
        store="memory://",
        datadir=str(settings.data_dir),
        topic_partitions=settings.partitions,
        topic_replication_factor=1,
        consumer_auto_offset_reset="earliest",
        web_enabled=True,
        web_port=settings.web_port,
        web_bind=settings.web_bind,
        web_host=settings.web_bind,
        key_serializer="raw",
        value_serializer="raw",
        # Input stays unacked until a snapshot covers it, so faust must not wait for
        # "in-flight" events on rebalance or shutdown: the next owner re-reads them.
        stream_wait_empty=False,
        producer_max_request_size=16 * 1024 * 1024,  # stage snapshots of a large fabric
        # Stage events go out as the detect stage ticks, about a hundred a second for a busy
        # worker; sent one request each, the sends took 5% of the worker's time (py-spy).
        # 50 ms batches them (Kafka Streams lingers 100 ms); snapshots are delivered as late.
        producer_linger=0.05,
        # A killed worker's partitions move to the others after this long, not a minute.
        broker_session_timeout=settings.session_timeout_s,
        broker_heartbeat_interval=max(1.0, settings.session_timeout_s / 4),
        **settings.kafka_security.faust(),
    )
    app.transport = Transport(app.conf.broker_consumer, app)  # see streams.transport
    return app


def build_app(settings: WorkerSettings, *, parts: EngineParts | None = None,
              read_snapshots: Callable[[], dict[str, tuple[int, bytes]]] | None = None,
              read_partitions: Callable[[], dict[str, int]] | None = None) -> faust.App:
    """The worker app. `parts` (the engine's rules, topology, models, config) defaults to
    `compose.build_engine(settings.engine)`; `read_snapshots` (key -> (offset, snapshot))
    defaults to reading the state topic, `read_partitions` (telemetry topic -> partitions)
    to asking the broker; broker-free tests pass their own."""
    if parts is None:
        parts = build_engine(settings.engine)
    # Forked now, before the store's and faust's threads: it inherits the engine's parts.
    children = [DetectChild(parts) for _ in range(settings.detect_processes)]
    if parts.maintenance is None:  # the store's maintenance windows, re-read in a thread of their own
        from api.maintenance import StoreWindows
        parts = dataclasses.replace(parts, maintenance=StoreWindows(settings.db_url))
    notifier = None
    if settings.notify is not None and settings.notify.enabled:
        from notify import Notifier
        notifier = Notifier(settings.notify)
    sink = LazySink(settings.db_url, topology=parts.topology.to_dict(), notifier=notifier)

    app = new_app(settings)
    topics = agent_loops.Topics(app, settings)
    reader = read_snapshots or (lambda: state.read_latest(bootstrap=settings.bootstrap, topic=settings.state_topic,
                                                          security=settings.kafka_security))
    partitions = read_partitions or (lambda: partition_counts(bootstrap=settings.bootstrap, security=settings.kafka_security,
                                                              topics=list(settings.telemetry_topics)))
    checkpoints = Checkpoints(app, settings, topics.state, reader)
    rebuilder = broker_rebuilder(bootstrap=settings.bootstrap, security=settings.kafka_security,
                                 max_records=settings.rebuild_max_records, max_bytes=settings.rebuild_max_bytes)
    agents = agent_loops.Agents(settings, topics, checkpoints, sink=sink, parts=parts, read_partitions=partitions,
                                rebuilder=rebuilder, children=children)
    agent_loops.register(app, agents)
    health.register(app, agents)
    app.fabric_checkpoints = checkpoints  # for tests and health
    app.fabric_sink = sink
    app.fabric_notifier = notifier
    app.fabric_agents = agents
    return app


def run_worker(settings: WorkerSettings) -> None:
    """Create missing topics, then run until SIGTERM/SIGINT (blocking)."""
    from faust.worker import Worker

    from streams.logs import logging_config
    from streams.topics import ensure_topics

    ensure_topics(bootstrap=settings.bootstrap, topics=settings.topics(), security=settings.kafka_security)
    app = build_app(settings)
    worker = Worker(app, loglevel=settings.loglevel, quiet=True, redirect_stdouts=False,
                    logging_config=logging_config(level=settings.loglevel, fmt=settings.log_format))
    if not sys.stdout.isatty():
        # faust's start-up spinner writes cursor escape codes even into a file or a
        # container's log, where they would precede the first JSON line
        worker.spinner = None
    worker.execute_from_commandline()
