"""The notifier: incident changes in, Alertmanager alerts and webhook calls out.

`submit` is called at the one place incident changes leave the engine for the store
(`api.store.sink.StoreSink.write`, used by `replay` and the workers) and by the API
server's store watcher (`api.notify_watch`); it never blocks on a receiver and never
raises. Each receiver has its own `Outbox` (thread, bounded queue, retries).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from notify.alerts import AlertSettings
from notify.channels import AlertmanagerChannel, WebhookChannel
from notify.outbox import Outbox

log = logging.getLogger("fabric_rca.notify")


@dataclass(frozen=True)
class NotifySettings:
    alertmanager: str | None = None  # Alertmanager's base URL (…/api/v2/alerts is appended)
    webhook: str | None = None  # URL the signed incident JSON is POSTed to
    webhook_secret: bytes | None = None
    alerts: AlertSettings = AlertSettings()
    max_queue: int = 10_000

    @property
    def enabled(self) -> bool:
        return bool(self.alertmanager or self.webhook)


class Notifier:
    def __init__(self, settings: NotifySettings, *, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.channels: list[AlertmanagerChannel | WebhookChannel] = []
        self.outboxes: list[Outbox] = []
        if settings.alertmanager:
            am = AlertmanagerChannel(settings.alertmanager, settings.alerts)
            self.channels.append(am)
            self.outboxes.append(Outbox(am, max_items=settings.max_queue, clock=clock))
        if settings.webhook:
            if not settings.webhook_secret:
                raise ValueError("a webhook needs a secret to sign with")
            hook = WebhookChannel(settings.webhook, settings.webhook_secret)
            self.channels.append(hook)
            self.outboxes.append(Outbox(hook, max_items=settings.max_queue, batch=1, clock=clock))

    def submit(self, incidents: list[dict]) -> None:
        """Queue what these incident states mean for each receiver; never raises."""
        if not incidents:
            return
        now = self.clock()
        for channel, outbox in zip(self.channels, self.outboxes):
            items = []
            for incident in incidents:
                try:
                    items += channel.accept([incident], now)
                except Exception as exc:  # noqa: BLE001 - one bad change must not stop the others or the diagnosis
                    outbox.stats.failures += 1
                    log.warning("%s: cannot notify incident %r: %s: %s", channel.name,
                                incident.get("id") if isinstance(incident, dict) else incident, type(exc).__name__, exc)
            outbox.put(items)

    def close(self, timeout: float = 10.0) -> dict[str, int]:
        """Deliver what waits (within `timeout` seconds overall), stop; receiver -> items left."""
        deadline = time.monotonic() + timeout
        return {c.name: o.close(max(0.0, deadline - time.monotonic())) for c, o in zip(self.channels, self.outboxes)}

    def figures(self) -> dict[str, dict[str, int]]:
        """receiver -> sent, failures, refused, dropped, pending (for /metrics and summaries)."""
        return {c.name: {"sent": o.stats.sent, "failures": o.stats.failures, "refused": o.stats.refused,
                         "dropped": o.stats.dropped, "pending": o.pending}
                for c, o in zip(self.channels, self.outboxes)}


def notify_settings(*, alertmanager: str | None, webhook: str | None, secret_file: Path | None, env,
                    fabric: str, console_url: str, resend_s: float) -> NotifySettings:
    """The settings from a command's flags (`cli.notify_flags`); ValueError names the flag at fault."""
    from notify.webhook import load_secret

    for flag, url in (("--alertmanager", alertmanager), ("--webhook", webhook), ("--console-url", console_url)):
        if url and not url.startswith(("http://", "https://")):
            raise ValueError(f"{flag} {url!r} is not an http:// or https:// URL")
    secret = load_secret(secret_file, env) if webhook else None
    return NotifySettings(alertmanager=alertmanager, webhook=webhook, webhook_secret=secret,
                          alerts=AlertSettings(fabric=fabric, console_url=console_url, resend_s=resend_s))
