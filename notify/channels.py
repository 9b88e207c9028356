"""The two receivers: Alertmanager's API v2 and a signed generic webhook.

Each turns submitted incidents into keyed items for its `Outbox` (`accept`) and delivers
a batch of them over HTTP (`send`). Both run in their outbox's thread.
"""
from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from typing import Any, Hashable

import httpx
import orjson

from notify.alerts import AlertSettings, Labels, alert, transition
from notify.outbox import Refused
from notify.webhook import DELIVERY_HEADER, EVENT_HEADER, SIGNATURE_HEADER, signature

TIMEOUT_S = 10.0
REMEMBERED = 50_000  # incidents whose last sent body the webhook keeps, to skip repeats


def _check(response: httpx.Response, what: str) -> None:
    if 200 <= response.status_code < 300:
        return
    text = response.text.strip().replace("\n", " ")[:200]
    problem = f"{what} answered {response.status_code}: {text}"
    if 400 <= response.status_code < 500 and response.status_code not in (408, 429):
        raise Refused(problem)
    raise RuntimeError(problem)


class AlertmanagerChannel:
    """POSTs alerts to `{url}/api/v2/alerts`; re-sends each open incident's alert every
    `settings.resend_s` wall seconds (so Alertmanager never lets it expire while open)."""

    def __init__(self, url: str, settings: AlertSettings, *, client: httpx.Client | None = None) -> None:
        self.name = "alertmanager"
        self.url = url.rstrip("/") + "/api/v2/alerts"
        self.settings = settings
        self._client = client or httpx.Client(timeout=TIMEOUT_S)
        self._lock = threading.Lock()
        self._firing: dict[str, Labels] = {}  # incident id -> the label set posted firing
        self._open: dict[str, dict] = {}  # incident id -> its latest open state (for resends)
        self._next_resend = 0.0

    def accept(self, incidents: list[dict], now: float) -> list[tuple[Hashable, Any]]:
        items = []
        with self._lock:
            for inc in incidents:
                iid = str(inc["id"])
                alerts, firing = transition(inc, self._firing.get(iid), now=now, settings=self.settings)
                if firing is None:
                    self._firing.pop(iid, None)
                    self._open.pop(iid, None)
                else:
                    self._firing[iid], self._open[iid] = firing, inc
                items += [(tuple(sorted(a["labels"].items())), a) for a in alerts]
            if self._open and not self._next_resend:
                self._next_resend = now + self.settings.resend_s
        return items

    def tick(self, now: float) -> list[tuple[Hashable, Any]]:
        with self._lock:
            if not self._next_resend or now < self._next_resend:
                return []
            self._next_resend = now + self.settings.resend_s if self._open else 0.0
            return [(labels, alert(self._open[iid], labels, now=now, settings=self.settings, resolved=False))
                    for iid, labels in self._firing.items()]

    @property
    def open_alerts(self) -> int:
        with self._lock:
            return len(self._firing)

    def send(self, batch: list[Any]) -> None:
        _check(self._client.post(self.url, content=orjson.dumps(batch),
                                 headers={"Content-Type": "application/json"}), "Alertmanager")


class WebhookChannel:
    """POSTs each incident change, as the API serves it, signed (`notify.webhook`).

    Incidents in maintenance are not sent (a change that puts an incident already sent into
    maintenance is, once, so the receiver sees it marked); an unchanged state is not sent
    twice."""

    def __init__(self, url: str, secret: bytes, *, client: httpx.Client | None = None) -> None:
        self.name = "webhook"
        self.url, self._secret = url, secret
        self._client = client or httpx.Client(timeout=TIMEOUT_S)
        self._last: OrderedDict[str, bytes] = OrderedDict()  # incident id -> body last queued
        self._lock = threading.Lock()

    def accept(self, incidents: list[dict], now: float) -> list[tuple[Hashable, Any]]:
        items = []
        with self._lock:
            for inc in incidents:
                iid = str(inc["id"])
                prev = self._last.get(iid)
                if inc.get("maintenance") and (prev is None or orjson.loads(prev).get("maintenance")):
                    continue  # never sent, or already sent as marked
                body = orjson.dumps(inc)
                if prev == body:
                    continue
                self._last.pop(iid, None)
                self._last[iid] = body
                if len(self._last) > REMEMBERED:
                    self._last.popitem(last=False)
                items.append((iid, (str(uuid.uuid4()), body)))
        return items

    def tick(self, now: float) -> list[tuple[Hashable, Any]]:
        return []

    def send(self, batch: list[Any]) -> None:
        for delivery, body in batch:  # (its outbox hands over one at a time: a retry repeats only this one)
            headers = {"Content-Type": "application/json", SIGNATURE_HEADER: signature(self._secret, body),
                       DELIVERY_HEADER: delivery, EVENT_HEADER: "incident"}
            _check(self._client.post(self.url, content=body, headers=headers), "webhook")
