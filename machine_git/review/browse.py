"""Browse: every row at a revision, filtered and searched; and one row's page."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote
from urllib.parse import urlencode

from pygit2 import Commit
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from machine_git.agents import observe
from machine_git.core.errors import ConflictError
from machine_git.core.errors import MachineError
from machine_git.core.errors import RowNotFoundError
from machine_git.core.errors import UsageError
from machine_git.history import history
from machine_git.history import lookup
from machine_git.history import revs
from machine_git.history import versions
from machine_git.review import view
from machine_git.review.guard import Guarded
from machine_git.review.guard import row_blob
from machine_git.review.index import Filters
from machine_git.review.index import select
from machine_git.review.pictures import pictures
from machine_git.review.web import Banner
from machine_git.review.web import Site
from machine_git.review.web import form
from machine_git.review.web import redirect
from machine_git.rows import rows
from machine_git.rows.schemas import KINDS
from machine_git.store.store import Store
from machine_git.tagging import edits

PAGE = 50
_FILTERS = ("kind", "host", "tool", "note", "q", "errors", "from", "to", "at")


def filters_of(request: Request) -> Filters:
    q = request.query_params
    return Filters(
        kind=q.get("kind", ""),
        host=q.get("host", ""),
        tool=q.get("tool", ""),
        note=q.get("note", ""),
        query=q.get("q", ""),
        errors=q.get("errors", "") == "1",
        since=q.get("from", ""),
        until=q.get("to", ""),
    )


def _number(text: str, default: int) -> int:
    try:
        return max(1, int(text))
    except ValueError:
        return default


def context(site: Site, store: Store, request: Request) -> dict[str, Any]:
    q = request.query_params
    at = q.get("at", "").strip()
    commit = revs.resolve(store, at or None)
    index = site.cache.at(store, commit)
    filters = site.searched(store, commit, filters_of(request))
    found = select(index, filters)
    page = _number(q.get("page", "1"), 1)
    pages = max(1, (len(found) + PAGE - 1) // PAGE)
    page = min(page, pages)
    kept = {k: q[k] for k in _FILTERS if q.get(k)}
    shown = found[(page - 1) * PAGE : page * PAGE]
    return {
        "page": "browse",
        "rows": shown,
        "snippets": site.search.snippets(filters.query, [s["id"] for s in shown])
        if filters.found is not None
        else {},
        "total": len(found),
        "all": len(index.rows),
        "page_number": page,
        "pages": pages,
        "query": kept,
        "query_string": urlencode(kept),
        "at": at,
        "commit": commit,
        "kinds": KINDS,
        "hosts": index.hosts(),
        "tools": index.tools(),
        "versions": [v.name for v in versions.listing(store)],
        "live": not at,
    }


def page(site: Site, request: Request) -> Response:
    store = site.store()
    return site.render(
        request, "browse.html", context(site, store, request), store=store
    )


def table(site: Site, request: Request) -> Response:
    """The table alone, refreshed when new rows arrive."""
    store = site.store()
    return site.render(request, "_browse_table.html", context(site, store, request))


# -- one row -------------------------------------------------------------------


def full_id(store: Store, prefix: str, at: Commit) -> str:
    """The row ``prefix`` names, at ``at`` or now; a full id names a removed row."""
    if len(rows.check_prefix(prefix)) == rows.ID_LENGTH:
        return prefix
    for commit in (at, None):
        found = lookup.matching_ids(store, prefix, commit)
        if len(found) == 1:
            return found[0]
    return lookup.resolve_id(store, prefix, at)  # raises: none, or ambiguous


def row_context(site: Site, store: Store, prefix: str, at: str) -> dict[str, Any]:
    head = revs.resolve(store, None)
    commit = revs.resolve(store, at or None)
    row_id = full_id(store, prefix, commit)
    snapshot = store.snapshot(commit)
    row = snapshot.row(row_id)
    # A row's history is a walk of every commit since it was made (seconds at
    # 100,000 rows for an old one): the page loads it after it is shown,
    # unless it is what says whether the row ever existed.
    entries = None
    if row is None and store.read_row(row_id, head) is None:
        entries = history.log(store, head, limit=500, row_id=row_id)
        if not entries:
            raise RowNotFoundError(f"no row {prefix!r} in the store or its history")
    present = [
        {"name": v.name, "has": rows.row_path(row_id) in v.commit.tree}
        for v in versions.listing(store)
    ]
    return {
        "page": "row",
        "id": row_id,
        "row": row,
        "context": view.context_of(row, store.snapshot(commit).read),
        "items": view.items(row, pictures(row_id, str(commit.id), snapshot.read))
        if row is not None
        else [],
        "answer": view.answer(row) if row is not None else "",
        "at": at,
        "commit": commit,
        "at_head": commit.id == head.id,
        "entries": entries,
        "versions": present,
        "row_id": row_id if commit.id == head.id and row is not None else "",
        "row_blob": row_blob(store.snapshot(head), row_id) or "",
    }


def row_page(site: Site, request: Request) -> Response:
    store = site.store()
    prefix = str(request.path_params["row"])
    at = request.query_params.get("at", "").strip()
    return site.render(
        request, "row.html", row_context(site, store, prefix, at), store=store
    )


def row_history(site: Site, request: Request) -> Response:
    """A row's history (``machine log --id``), the part its page loads after."""
    store = site.store()
    head = revs.resolve(store, None)
    row_id = full_id(store, str(request.path_params["row"]), head)
    entries = history.log(store, head, limit=500, row_id=row_id)
    return site.render(request, "_row_history.html", {"id": row_id, "entries": entries})


async def row_action(site: Site, request: Request) -> Response:
    """Label (observed rows) or rewrite a row from its page."""
    row_id = str(request.path_params["row"])
    action = str(request.path_params["action"])
    fields = await form(request)

    def run() -> Response:
        store = site.store()
        guarded = Guarded(store, row_id=row_id, blob=fields.get("blob", ""))
        try:
            rows.check_id(row_id)
            if action == "label":
                observe.label(guarded, row_id, fields.get("verdict", ""))
            elif action == "rewrite":
                edits.rewrite(
                    guarded, row_id, fields.get("text", "").replace("\r\n", "\n")
                )
            else:
                raise UsageError(f"no action {action!r} on a row")
        except ConflictError as e:
            return site.render(
                request,
                "row.html",
                {
                    **row_context(site, store, row_id, ""),
                    "banner": Banner(level="conflict", text=str(e)),
                },
                store=store,
                status=409,
            )
        except MachineError as e:
            return site.failure(request, e)
        return redirect(f"/rows/{quote(row_id)}")

    return await run_in_threadpool(run)
