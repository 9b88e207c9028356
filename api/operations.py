"""What an operator adds to the API: notifications, maintenance windows, feedback, /metrics.

Kept out of `api/app.py` so the app factory only calls `new_watcher` and
`include_operations`."""
from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import PlainTextResponse
from sqlalchemy.engine import Engine

from api.auth import OperatorDep
from api.notify_watch import StoreWatcher
from api.routes import AUTH

metrics_router = APIRouter()


def new_watcher(engine: Engine, notify) -> StoreWatcher | None:
    """The store watcher notifying per `notify` (`notify.NotifySettings`), or None."""
    if notify is None or not notify.enabled:
        return None
    from notify import Notifier

    return StoreWatcher(engine, Notifier(notify))


def include_operations(app: FastAPI) -> None:
    from api.feedback import router as feedback_router
    from api.maintenance import router as maintenance_router
    from api.tokens import router as tokens_router

    app.include_router(maintenance_router)
    app.include_router(feedback_router)
    app.include_router(metrics_router)
    app.include_router(tokens_router)


_JSON_ERROR = {"application/json": {"schema": {"type": "object", "properties": {"detail": {}}, "required": ["detail"]}}}


@metrics_router.get("/metrics", response_class=PlainTextResponse, summary="Prometheus metrics",
                    responses={code: {"description": r["description"], "content": _JSON_ERROR} for code, r in AUTH.items()},
                    description="Field precision per cause from operator feedback, feedback counts, and the "
                                "notifier's delivery counters (when the server notifies).")
def metrics(request: Request, _principal: OperatorDep) -> PlainTextResponse:
    from api.feedback import feedback_metrics_text
    from notify.metrics import render_notify

    notifier = request.app.state.notifier
    text = feedback_metrics_text(request.app.state.store)
    if notifier is not None:
        text += render_notify(notifier.figures())
    return PlainTextResponse(text, media_type="text/plain; version=0.0.4")
