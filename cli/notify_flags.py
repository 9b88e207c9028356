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


def add_notify_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("notifications (docs/operations.md)")
    g.add_argument("--alertmanager", metavar="URL",
                   help="push incidents to this Alertmanager (its API v2), one alert per incident "
                        "(or $FABRIC_RCA_ALERTMANAGER)")
    g.add_argument("--webhook", metavar="URL",
                   help="POST each incident change, as the API serves it, signed with HMAC-SHA256 "
                        "(or $FABRIC_RCA_WEBHOOK)")
    g.add_argument("--webhook-secret-file", type=Path, metavar="FILE",
                   help="the webhook's signing secret (or $FABRIC_RCA_WEBHOOK_SECRET)")
    g.add_argument("--console-url", metavar="URL",
                   help="base URL of the console for the alerts' links (or $FABRIC_RCA_CONSOLE_URL; "
                        "default: the API's address)")
    g.add_argument("--fabric-name", metavar="NAME",
                   help="the alerts' fabric label (or $FABRIC_RCA_FABRIC_NAME; default: the topology "
                        "file's name without extension)")
    g.add_argument("--resend-s", type=positive, metavar="S",
                   help=f"re-send an open incident's alert every S wall seconds (default {DEFAULT_RESEND_S:.0f}; "
                        "or $FABRIC_RCA_RESEND_S)")


def notify_settings_from(args: argparse.Namespace, *, console_default: str, topology: Path | None,
                         env: Mapping[str, str] = os.environ):
    """`notify.NotifySettings`, or None when no receiver is named. ValueError names the flag at fault."""
    alertmanager = args.alertmanager or env.get("FABRIC_RCA_ALERTMANAGER") or None
    webhook = args.webhook or env.get("FABRIC_RCA_WEBHOOK") or None
    if not (alertmanager or webhook):
        return None
    from notify import notify_settings

    resend = args.resend_s or _env_positive(env, "FABRIC_RCA_RESEND_S") or DEFAULT_RESEND_S
    fabric = args.fabric_name or env.get("FABRIC_RCA_FABRIC_NAME") or (Path(topology).stem if topology else "default")
    return notify_settings(alertmanager=alertmanager, webhook=webhook, secret_file=args.webhook_secret_file, env=env,
                           fabric=fabric, console_url=args.console_url or env.get("FABRIC_RCA_CONSOLE_URL")
                           or console_default, resend_s=resend)


def _env_positive(env: Mapping[str, str], name: str) -> float | None:
    text = env.get(name)
    if not text:
        return None
    try:
        return positive(text)
    except argparse.ArgumentTypeError as exc:
        raise ValueError(f"${name}: {exc}") from None
