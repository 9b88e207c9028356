from streams.metrics import WorkerMetrics, render
from testkit.metrics import samples as _samples


def test_render_is_valid_exposition_with_labels():
    text = render(WorkerMetrics(records=10, rejects={"bad_json": 2, "missing_host": 1}, symptoms=3,
                                consumer_lag={"fabric.telemetry:0": 5}, newest_event_time=110.0,
                                applied_event_time=100.0))
    s = _samples(text)
    assert s["fabric_rca_records_total"] == 10
    assert s['fabric_rca_rejects_total{reason="bad_json"}'] == 2
    assert s['fabric_rca_rejects_total{reason="missing_host"}'] == 1
    assert s['fabric_rca_consumer_lag_messages{partition="fabric.telemetry:0"}'] == 5
    assert s["fabric_rca_processing_delay_seconds"] == 10.0
    # every sample has HELP and TYPE lines for its family
    families = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")}
    assert {name.split("{")[0] for name in s} <= families


def test_values_are_exact():
    """Counters past a million and Unix times keep every digit (`:g` kept six)."""
    s = _samples(render(WorkerMetrics(records=123_456_789, first_read_at=1764400000.125, last_read_at=1764400012.5)))
    assert s["fabric_rca_records_total"] == 123_456_789
    assert s["fabric_rca_first_read_timestamp_seconds"] == 1764400000.125
    assert s["fabric_rca_last_read_timestamp_seconds"] == 1764400012.5
    assert _samples(render(WorkerMetrics()))["fabric_rca_last_read_timestamp_seconds"] == 0


def test_delay_is_never_negative_and_zero_before_data():
    assert _samples(render(WorkerMetrics()))["fabric_rca_processing_delay_seconds"] == 0
    s = _samples(render(WorkerMetrics(newest_event_time=5.0, applied_event_time=9.0)))
    assert s["fabric_rca_processing_delay_seconds"] == 0


def test_names_types_and_help_are_the_contract():
    """prometheus-client strips a counter's _total and adds it back: the exposed names,
    types and label sets stay exactly as the hand-written exposition had them."""
    from prometheus_client.parser import text_string_to_metric_families

    text = render(WorkerMetrics(rejects={"bad_json": 1}))
    types = dict(line.split()[2:4] for line in text.splitlines() if line.startswith("# TYPE"))
    counters = ["records", "rejects", "dead_lettered", "dead_letter_truncated", "dead_letter_failed", "duplicates",
                "late_superseded", "symptoms", "incidents_opened", "incidents_resolved", "incidents_reopened", "incident_changes",
                "incident_changes_unpublished", "symptom_messages_unpublished", "snapshots_undelivered",
                "checkpoints_refused",
                "stages_restored", "state_rebuilt_records", "late_events", "unused"]
    gauges = ["store_available", "store_pending_changes", "consumer_lag_messages", "idle_partitions",
              "processing_delay_seconds", "first_read_timestamp_seconds", "last_read_timestamp_seconds",
              "detect_in_flight_messages"]
    assert types == {**{f"fabric_rca_{c}_total": "counter" for c in counters},
                     **{f"fabric_rca_{g}": "gauge" for g in gauges}}
    assert set(_samples(text)) == {f"fabric_rca_{c}_total" for c in counters if c not in ("rejects", "unused")} | {
        'fabric_rca_rejects_total{reason="bad_json"}', 'fabric_rca_consumer_lag_messages{partition="none"}',
        'fabric_rca_unused_total{example="",reason="none"}'} | {
        f"fabric_rca_{g}" for g in gauges if g != "consumer_lag_messages"}
    assert "_created" not in text
    assert "# HELP fabric_rca_rejects_total Unreadable records, by reason.\n" in text
    assert len(list(text_string_to_metric_families(text))) == len(types)


def test_registry_reads_the_counters_at_scrape_time():
    from streams.metrics import render_registry, worker_registry

    live = WorkerMetrics()
    registry = worker_registry(lambda: live)
    assert _samples(render_registry(registry))["fabric_rca_records_total"] == 0
    live.records = 7
    assert _samples(render_registry(registry))["fabric_rca_records_total"] == 7
    other = worker_registry(lambda: WorkerMetrics(records=1))  # registries do not share collectors
    assert _samples(render_registry(other))["fabric_rca_records_total"] == 1


def test_worker_logs_are_json_lines():
    import json
    import logging

    from streams.logs import JsonFormatter, logging_config

    record = logging.LogRecord("fabric_rca.worker", logging.WARNING, __file__, 1, "lag %d", (5,), None)
    doc = json.loads(JsonFormatter().format(record))
    assert doc["level"] == "warning" and doc["msg"] == "lag 5" and doc["logger"] == "fabric_rca.worker"
    assert logging_config(level="warning", fmt="json")["root"]["level"] == "WARNING"


def test_unused_records_are_counted_by_reason_with_an_example():
    s = _samples(render(WorkerMetrics(unused={"unknown_device": [20, "ghost"], "unknown_field": [3, "switch_port.bogus"]})))
    assert s['fabric_rca_unused_total{example="ghost",reason="unknown_device"}'] == 20
    assert s['fabric_rca_unused_total{example="switch_port.bogus",reason="unknown_field"}'] == 3
