"""The Queue: observed rows, newest first, judged one at a time from the keyboard.

``g`` and ``b`` label (``observe.label``), ``r`` rewrites the answer and saves
it with the label chosen (``label --as``) or as a plain rewrite that leaves
the row in the queue (``edits.rewrite``), ``u`` undoes the newest commit
(``edits.undo``). Each form carries what the page showed (the row's blob, or
the head for undo), and :class:`~machine_git.review.guard.Guarded` refuses the
write if that changed meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from machine_git.agents import observe
from machine_git.core.errors import ConflictError
from machine_git.core.errors import MachineError
from machine_git.core.errors import UsageError
from machine_git.history import history
from machine_git.review import view
from machine_git.review.guard import Guarded
from machine_git.review.index import Summary
from machine_git.review.web import Banner
from machine_git.review.web import Site
from machine_git.review.web import back_to
from machine_git.review.web import form
from machine_git.review.web import redirect
from machine_git.store.store import Store
from machine_git.tagging import edits

VERDICTS = ("good", "bad")


def queue_of(site: Site, store: Store) -> list[Summary]:
    """The observed rows at the head, newest first."""
    head = store.head
    if head is None:
        return []
    return [s for s in site.cache.at(store, head).ordered if s["kind"] == "observed"]


def context(
    site: Site, store: Store, wanted: str | None, banner: Banner | None = None
) -> dict[str, Any]:
    """What the queue page shows: the current row, its neighbours, the list."""
    queue = queue_of(site, store)
    ids = [s["id"] for s in queue]
    position = ids.index(wanted) if wanted in ids else 0
    if wanted and wanted not in ids and banner is None:
        banner = Banner(
            level="info", text=f"row {wanted} is no longer in the queue (labeled?)"
        )
    current = queue[position] if queue else None
    row = store.read_row(current["id"]) if current is not None else None
    return {
        "page": "queue",
        "queue": queue,
        "position": position,
        "current": current,
        "current_id": current["id"] if current is not None else "",
        "row": row,
        "items": view.items(row) if row is not None else [],
        "answer": view.answer(row) if row is not None else "",
        "prev_id": ids[position - 1] if position > 0 else "",
        "next_id": ids[position + 1] if position + 1 < len(ids) else "",
        "banner": banner,
        "row_id": current["id"] if current is not None else "",
        "row_blob": current["blob"] if current is not None else "",
        "reload": not queue,
    }


def page(site: Site, request: Request) -> Response:
    store = site.store()
    wanted = request.query_params.get("id") or None
    return site.render(request, "queue.html", context(site, store, wanted), store=store)


def listing(site: Site, request: Request) -> Response:
    """The queue's list alone, refreshed by the page when the head moves."""
    store = site.store()
    wanted = request.query_params.get("id") or ""
    return site.render(
        request,
        "_queue_list.html",
        {"queue": queue_of(site, store), "current_id": wanted},
    )


async def label(site: Site, request: Request) -> Response:
    fields = await form(request)
    row_id, verdict = fields.get("id", ""), fields.get("verdict", "")

    def act(store: Store) -> object:
        if verdict not in VERDICTS:
            raise UsageError(f"label must be good or bad, not {verdict!r}")
        guarded = Guarded(store, row_id=row_id, blob=fields.get("blob", ""))
        return observe.label(guarded, row_id, verdict)

    return await _act(site, request, act, row_id, fields)


async def rewrite(site: Site, request: Request) -> Response:
    fields = await form(request)
    row_id, verdict = fields.get("id", ""), fields.get("verdict", "good")
    text = fields.get("text", "").replace("\r\n", "\n")

    def act(store: Store) -> object:
        guarded = Guarded(store, row_id=row_id, blob=fields.get("blob", ""))
        if verdict == "keep":
            return edits.rewrite(guarded, row_id, text)
        if verdict not in VERDICTS:
            raise UsageError(f"save as good, bad or keep, not {verdict!r}")
        return observe.label(guarded, row_id, verdict, rewrite=text)

    return await _act(site, request, act, row_id, fields)


async def _act(
    site: Site,
    request: Request,
    act: Callable[[Store], object],
    row_id: str,
    fields: dict[str, str],
) -> Response:
    """Run one write; a conflict or a refusal shows the queue with a banner."""
    after = fields.get("next", "") or row_id

    def run() -> Response:
        store = site.store()
        try:
            act(store)
        except ConflictError as e:
            return _again(site, request, store, row_id, "conflict", str(e), 409)
        except MachineError as e:
            return site.failure(request, e)
        return redirect(f"/queue?id={quote(after)}" if after else "/queue")

    return await run_in_threadpool(run)


def _again(
    site: Site,
    request: Request,
    store: Store,
    row_id: str,
    level: str,
    text: str,
    status: int,
) -> Response:
    return site.render(
        request,
        "queue.html",
        context(site, store, row_id, Banner(level=level, text=text)),
        store=store,
        status=status,
    )


async def undo(site: Site, request: Request) -> Response:
    """Undo the newest commit, only if it is still the one the page showed."""
    fields = await form(request)
    back = back_to(fields.get("back", ""), "/queue")

    def run() -> Response:
        store = site.store()
        try:
            target, _ = edits.undo(Guarded(store, head=fields.get("head", "")))
        except ConflictError as e:
            return site.render(
                request,
                "error.html",
                {
                    "page": "error",
                    "message": str(e),
                    "banner": Banner(level="conflict", text=str(e)),
                },
                store=store,
                status=409,
            )
        except MachineError as e:
            return site.failure(request, e)
        undone = history.entry(target).trailers.get("Row")
        if back.startswith("/queue") and undone:
            return redirect(f"/queue?id={quote(undone)}")
        return redirect(back)

    return await run_in_threadpool(run)
