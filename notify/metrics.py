"""The notifier's figures as Prometheus metric families (for the worker's and the API's /metrics)."""
from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

_FIGURES = (
    ("sent", CounterMetricFamily, "fabric_rca_notifications_sent_total",
     "Notifications delivered (alerts posted to Alertmanager, webhook calls answered 2xx), per receiver."),
    ("failures", CounterMetricFamily, "fabric_rca_notification_failures_total",
     "Delivery attempts that failed (unreachable, 5xx) and were retried with backoff, per receiver."),
    ("refused", CounterMetricFamily, "fabric_rca_notifications_refused_total",
     "Notifications the receiver refused (4xx) and that were dropped, per receiver."),
    ("dropped", CounterMetricFamily, "fabric_rca_notifications_dropped_total",
     "Notifications dropped because the receiver's queue was full, per receiver."),
    ("pending", GaugeMetricFamily, "fabric_rca_notifications_pending",
     "Notifications waiting for delivery, per receiver."),
)


def notify_families(figures: dict[str, dict[str, int]]) -> Iterator[Metric]:
    """One family per figure, one sample per receiver; nothing when no receiver is set."""
    if not figures:
        return
    for key, family_type, name, help_ in _FIGURES:
        family = family_type(name, help_, labels=["receiver"])
        for receiver, values in sorted(figures.items()):
            family.add_metric([receiver], values[key])
        yield family


class _Collector:
    def __init__(self, figures: dict[str, dict[str, int]]):
        self._figures = figures

    def collect(self) -> Iterator[Metric]:
        return notify_families(self._figures)


def render_notify(figures: dict[str, dict[str, int]]) -> str:
    """The text exposition (0.0.4) of the notifier's figures: appended to a /metrics page."""
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(figures))  # type: ignore[arg-type]
    return generate_latest(registry).decode()
