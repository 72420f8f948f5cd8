"""The review application: its routes, behind the security middleware."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Awaitable
from collections.abc import Callable
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.responses import Response
from starlette.routing import Mount
from starlette.routing import Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from machine_git.core.errors import MachineError
from machine_git.review import browse
from machine_git.review import compare
from machine_git.review import pictures
from machine_git.review import queue
from machine_git.review import training
from machine_git.review.guard import row_blob
from machine_git.review.security import Guard
from machine_git.review.web import Site
from machine_git.review.web import redirect
from machine_git.store import stats

Page = Callable[[Site, Request], Response]
Action = Callable[[Site, Request], Awaitable[Response]]


def head(site: Site, request: Request) -> Response:
    """What the pages poll: the head commit, the counts, one row's blob."""
    store = site.store()
    newest = store.head
    body: dict[str, object] = {
        "head": str(newest.id) if newest is not None else "",
        "counts": stats.counts(store),
    }
    row_id = request.query_params.get("row", "")
    if row_id:
        try:
            body["row_blob"] = row_blob(store.snapshot(), row_id) or ""
        except MachineError:
            body["row_blob"] = ""
    return JSONResponse(body)


def create_app(
    location: Path,
    *,
    token: str,
    port: int,
    project: str = "",
    csrf: str = "",
    warm: bool = False,
) -> ASGIApp:
    """The application for the store at ``location``, served on ``port``.

    ``warm`` builds the row index in the background at once: on a large store
    (about 11 s at 100,000 rows) it is ready by the time the browser asks.
    """
    site = Site(
        location=location,
        project=project or location.name,
        csrf=csrf or secrets.token_urlsafe(32),
    )
    if warm:
        threading.Thread(target=site.warm, daemon=True).start()

    def page(handler: Page) -> Callable[[Request], Response]:
        def endpoint(request: Request) -> Response:
            return handler(site, request)

        return endpoint

    def action(handler: Action) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            return await handler(site, request)

        return endpoint

    async def failed(request: Request, e: Exception) -> Response:
        return site.failure(request, e)

    routes = [
        Route("/", lambda request: redirect("/queue")),
        Route("/queue", page(queue.page)),
        Route("/queue/list", page(queue.listing)),
        Route("/queue/label", action(queue.label), methods=["POST"]),
        Route("/queue/rewrite", action(queue.rewrite), methods=["POST"]),
        Route("/queue/bulk", action(queue.bulk), methods=["POST"]),
        Route("/queue/labels", action(queue.set_labels), methods=["POST"]),
        Route("/undo", action(queue.undo), methods=["POST"]),
        Route("/redo", action(queue.redo), methods=["POST"]),
        Route("/browse", page(browse.page)),
        Route("/browse/table", page(browse.table)),
        Route("/rows/{row}", page(browse.row_page)),
        Route("/rows/{row}/history", page(browse.row_history)),
        Route("/rows/{row}/images/{sha}", page(pictures.serve)),
        Route("/rows/{row}/{action}", action(browse.row_action), methods=["POST"]),
        Route("/diff", page(compare.diff_page)),
        Route("/versions", page(compare.versions_page)),
        Route("/runs", page(training.runs_page)),
        Route("/runs/{run}", page(training.run_page)),
        Route("/releases", page(training.releases_page)),
        Route("/releases/{release}", page(training.release_page)),
        Route("/api/head", page(head)),
        Mount(
            "/static",
            StaticFiles(packages=[("machine_git.review", "static")]),
            name="static",
        ),
    ]
    # The guard wraps everything, Starlette's own error pages included, so
    # every response carries the security headers.
    app = Starlette(
        routes=routes, exception_handlers={MachineError: failed, Exception: failed}
    )
    return Guard(app, token=token, csrf=site.csrf, port=port, limit=site.body_limit)
