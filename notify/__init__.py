"""Notifications: incidents to Prometheus Alertmanager and to a signed generic webhook.

An adapter: the core never imports it; `api.store.sink` and the API's store watcher call
`Notifier.submit` with incident changes (contract JSON)."""
from notify.notifier import Notifier, NotifySettings, notify_settings

__all__ = ["Notifier", "NotifySettings", "notify_settings"]
