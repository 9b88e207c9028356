"""The notification flags of `replay`, `serve` and `worker`, and the settings they make.

Each flag falls back to its FABRIC_RCA_* variable, so a worker in a container is set up by
its environment alone."""
from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Mapping

from cli.engine_flags import positive

DEFAULT_RESEND_S = 60.0


# (flag, variable, metavar, type, help): one table for the parser and the fallbacks
FLAGS = (
    ("--alertmanager", "FABRIC_RCA_ALERTMANAGER", "URL", str,
     "push incidents to this Alertmanager (its API v2), one alert per incident"),
    ("--webhook", "FABRIC_RCA_WEBHOOK", "URL", str,
     "POST each incident change, as the API serves it, signed with HMAC-SHA256"),
    ("--webhook-secret-file", None, "FILE", Path, "the webhook's signing secret (or $FABRIC_RCA_WEBHOOK_SECRET)"),
    ("--console-url", "FABRIC_RCA_CONSOLE_URL", "URL", str,
     "base URL of the console for the alerts' links (default: the API's address)"),
    ("--fabric-name", "FABRIC_RCA_FABRIC_NAME", "NAME", str,
     "the alerts' fabric label (default: the topology file's name without extension)"),
    ("--resend-s", "FABRIC_RCA_RESEND_S", "S", positive,
     f"re-send an open incident's alert every S wall seconds (default {DEFAULT_RESEND_S:.0f})"),
)


def add_notify_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("notifications (docs/operations.md)")
    for flag, env, metavar, kind, text in FLAGS:
        g.add_argument(flag, type=kind, metavar=metavar, help=text + (f" (or ${env})" if env else ""))


def _given(args: argparse.Namespace, env: Mapping[str, str]) -> dict:
    """Each flag's value, else its variable's (read with the flag's type), else None."""
    out = {}
    for flag, var, _, kind, _ in FLAGS:
        dest = flag.lstrip("-").replace("-", "_")
        value = getattr(args, dest, None)
        if value is None and var and env.get(var):
            try:
                value = kind(env[var])
            except argparse.ArgumentTypeError as exc:
                raise ValueError(f"${var}: {exc}") from None
        out[dest] = value
    return out


def notify_settings_from(args: argparse.Namespace, *, console_default: str, topology: Path | None,
                         env: Mapping[str, str] = os.environ):
    """`notify.NotifySettings`, or None when no receiver is named. ValueError names the flag at fault."""
    given = _given(args, env)
    if not (given["alertmanager"] or given["webhook"]):
        return None
    from notify import notify_settings

    fabric = given["fabric_name"] or (Path(topology).stem if topology else "default")
    return notify_settings(alertmanager=given["alertmanager"], webhook=given["webhook"],
                           secret_file=given["webhook_secret_file"], env=env, fabric=fabric,
                           console_url=given["console_url"] or console_default,
                           resend_s=given["resend_s"] or DEFAULT_RESEND_S)


def notifier_from(args: argparse.Namespace, *, console_default: str, topology: Path | None):
    """A started `notify.Notifier` for the command's notification flags, or None."""
    settings = notify_settings_from(args, console_default=console_default, topology=topology)
    if settings is None:
        return None
    from notify import Notifier
    return Notifier(settings)
