"""The Queue: rows judged one at a time from the keyboard, 50 listed a page.

By default it holds the observed rows in ``machine observed``'s order (newest
change first); filters (kind, host, model, label, dates, text) and a sort
choose others. ``g`` and ``b`` label (``observe.label``), ``r`` rewrites the
answer and saves it with the label chosen (``label --as``) or as a plain
rewrite that leaves the row in the queue (``edits.rewrite``), ``u`` undoes the
newest commit (``edits.undo``) and ``U`` redoes (``edits.redo``). Each form
carries what the page showed (the row's blob, or the head for undo and redo),
and :class:`~machine_git.review.guard.Guarded` refuses the write if that
changed meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl
from urllib.parse import urlencode

from pygit2 import Commit
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from machine_git.agents import observe
from machine_git.core import models
from machine_git.core.errors import ConflictError
from machine_git.core.errors import MachineError
from machine_git.core.errors import UsageError
from machine_git.history import history
from machine_git.review import view
from machine_git.review.drafts import posted_text
from machine_git.review.guard import Guarded
from machine_git.review.index import Filters
from machine_git.review.index import Summary
from machine_git.review.index import select
from machine_git.review.pictures import Pictures
from machine_git.review.pictures import pictures
from machine_git.review.web import Banner
from machine_git.review.web import Site
from machine_git.review.web import back_to
from machine_git.review.web import form
from machine_git.review.web import form_pairs
from machine_git.review.web import redirect
from machine_git.rows.schemas import KINDS
from machine_git.store.store import Store
from machine_git.tagging import edits
from machine_git.tagging import labels as labeling

VERDICTS = ("good", "bad")
PAGE = 50  # rows listed beside the card
SORTS = {
    "recorded": "newest change first",
    "recorded-asc": "oldest change first",
    "made": "newest run first",
    "made-asc": "oldest run first",
}
_KEYS = ("kind", "host", "model", "label", "q", "from", "to", "sort")


@dataclass(frozen=True)
class View:
    """Which rows the Queue holds, and in which order: its query string."""

    params: dict[str, str]

    @property
    def kind(self) -> str:
        # No kind given: the observed runs, which is what waits for a label.
        return self.params.get("kind", "observed")

    @property
    def sort(self) -> str:
        return self.params.get("sort", "recorded")

    def filters(self) -> Filters:
        p = self.params
        return Filters(
            kind=self.kind if self.kind != "any" else "",
            host=p.get("host", ""),
            model=p.get("model", ""),
            tag=p.get("label", ""),
            query=p.get("q", ""),
            since=p.get("from", ""),
            until=p.get("to", ""),
        )

    def query(self, **extra: str) -> str:
        """The view's query string, with ``extra`` (an id, a page) added."""
        return urlencode({**self.params, **{k: v for k, v in extra.items() if v}})


def view_of(params: Mapping[str, str]) -> View:
    """The view a query string names (unknown keys and empty values dropped)."""
    kept = {k: params[k] for k in _KEYS if params.get(k)}
    if kept.get("sort", "recorded") not in SORTS:
        raise UsageError(f"no sort {kept['sort']!r}: use one of {', '.join(SORTS)}")
    if kept.get("kind", "observed") not in (*KINDS, "any"):
        raise UsageError(f"no kind {kept['kind']!r}")
    return View(kept)


def posted_view(fields: Mapping[str, str]) -> View:
    """The view a form came from (its ``view`` field, a query string)."""
    return view_of(dict(parse_qsl(fields.get("view", ""))))


def selection(
    site: Site, store: Store, chosen: View, at: Commit | None = None
) -> list[Summary]:
    """The rows the view holds at ``at`` (default: the head), in its order."""
    head = at if at is not None else store.head
    if head is None:
        return []
    recorded = chosen.sort.startswith("recorded")
    if recorded:
        site.cache.recorded(store, head)  # the order of machine observed, known
    index = site.cache.at(store, head)
    found = select(index, site.searched(store, head, chosen.filters()), recorded)
    return found[::-1] if chosen.sort.endswith("-asc") else found


def context(
    site: Site,
    store: Store,
    wanted: str | None,
    chosen: View | None = None,
    banner: Banner | None = None,
    *,
    list_page: int | None = None,
    draft: str | None = None,
) -> dict[str, Any]:
    """The queue page: the current row, its neighbours, a page of the list."""
    chosen = chosen or View({})
    found = selection(site, store, chosen)
    ids = [s["id"] for s in found]
    where = {row_id: i for i, row_id in enumerate(ids)}
    if wanted is None and list_page is not None and found:
        position = min((list_page - 1) * PAGE, len(found) - 1)  # a page's first
    else:
        position = where.get(wanted or "", 0)
    if wanted and wanted not in where and banner is None:
        banner = Banner(
            level="info", text=f"row {wanted} is no longer in the queue (labeled?)"
        )
    current = found[position] if found else None
    outside = False
    if draft is not None and wanted and wanted not in where:
        # A rewrite that failed because its row left the view (labeled from
        # elsewhere): the editor stays on that row, with the text typed.
        index = site.cache.at(store, store.head) if store.head is not None else None
        if index is not None and wanted in index.rows:
            current, outside = index.rows[wanted], True
    row = store.read_row(current["id"]) if current is not None else None
    pages = max(1, (len(found) + PAGE - 1) // PAGE)
    shown_page = min(max(1, list_page or position // PAGE + 1), pages)
    host = site.cache.at(store, store.head) if store.head is not None else None
    return {
        "page": "queue",
        "queue": found[(shown_page - 1) * PAGE : shown_page * PAGE],
        "total": len(found),
        "list_page": shown_page,
        "list_pages": pages,
        "view": chosen.params,
        "view_query": chosen.query(),
        "back": f"/queue?{chosen.query()}",
        "kind": chosen.kind,
        "sort": chosen.sort,
        "sorts": SORTS,
        "kinds": KINDS,
        "hosts": host.hosts() if host else [],
        "models": host.models() if host else [],
        "tags": host.tags() if host else [],
        "position": position,
        "outside": outside,
        "current": current,
        "current_id": current["id"] if current is not None else "",
        "row": row,
        "items": view.items(row, _pictures(store, current["id"]))
        if row is not None and current is not None
        else [],
        "answer": view.answer(row) if row is not None else "",
        "schema": (schema := site.schema(store)),
        "keys_of": {v: k for k, v in models.label_keys(schema).items()},
        "row_labels": (row.get("labels") or {}) if row is not None else {},
        "marks": view.marked(row) if row is not None else None,
        "draft": draft,
        "prev_id": ids[position - 1] if position > 0 and not outside else "",
        "next_id": ids[position + 1] if position + 1 < len(ids) and not outside else "",
        "banner": banner,
        "row_id": current["id"] if current is not None else "",
        "row_blob": current["blob"] if current is not None else "",
        "reload": not found,
    }


def _pictures(store: Store, row_id: str) -> Pictures:
    """The card's images, served at the head the page shows."""
    head = store.head
    if head is None:
        return lambda record: []
    return pictures(row_id, str(head.id), store.snapshot(head).read)


def _page_number(text: str) -> int | None:
    try:
        return max(1, int(text))
    except ValueError:
        return None


def page(site: Site, request: Request) -> Response:
    store = site.store()
    q = request.query_params
    chosen = view_of(q)
    values = context(
        site,
        store,
        q.get("id") or None,
        chosen,
        list_page=_page_number(q.get("page", "")),
    )
    return site.render(request, "queue.html", values, store=store)


def listing(site: Site, request: Request) -> Response:
    """The queue's list alone, refreshed by the page when the head moves."""
    store = site.store()
    q = request.query_params
    values = context(
        site,
        store,
        q.get("id") or None,
        view_of(q),
        list_page=_page_number(q.get("page", "")),
    )
    return site.render(request, "_queue_list.html", values)


async def label(site: Site, request: Request) -> Response:
    fields = await form(request)
    row_id, verdict = fields.get("id", ""), fields.get("verdict", "")

    def act(store: Store) -> object:
        if verdict not in VERDICTS:
            raise UsageError(f"label must be good or bad, not {verdict!r}")
        guarded = Guarded(store, row_id=row_id, blob=fields.get("blob", ""))
        return observe.label(guarded, row_id, verdict, note=fields.get("note") or None)

    return await _act(site, request, act, row_id, fields)


async def rewrite(site: Site, request: Request) -> Response:
    fields = await form(request)
    row_id, verdict = fields.get("id", ""), fields.get("verdict", "good")

    def act(store: Store) -> object:
        text = posted_text(store, fields)
        guarded = Guarded(store, row_id=row_id, blob=fields.get("blob", ""))
        if verdict == "keep":
            return edits.rewrite(guarded, row_id, text)
        if verdict not in VERDICTS:
            raise UsageError(f"save as good, bad or keep, not {verdict!r}")
        return observe.label(guarded, row_id, verdict, rewrite=text)

    return await _act(site, request, act, row_id, fields, keeps_text=True)


async def _act(
    site: Site,
    request: Request,
    act: Callable[[Store], object],
    row_id: str,
    fields: dict[str, str],
    *,
    keeps_text: bool = False,
) -> Response:
    """Run one write; a conflict or a refusal shows the queue with a banner.

    A rewrite that fails comes back with its text in the editor, never lost.
    """
    after = fields.get("next", "") or row_id

    def run() -> Response:
        store = site.store()
        try:
            chosen = posted_view(fields)
        except MachineError:
            chosen = View({})
        try:
            act(store)
        except MachineError as e:
            conflict = isinstance(e, ConflictError)
            if not conflict and not keeps_text:
                return site.failure(request, e)
            draft = _draft(store, fields) if keeps_text else None
            banner = Banner(level="conflict" if conflict else "error", text=str(e))
            values = context(site, store, row_id, chosen, banner, draft=draft)
            status = 409 if conflict else site.status_of(e)
            return site.render(
                request, "queue.html", values, store=store, status=status
            )
        return redirect(f"/queue?{chosen.query(id=after)}")

    return await run_in_threadpool(run)


def _draft(store: Store, fields: Mapping[str, str]) -> str:
    """The text the editor held, as well as it can be rebuilt."""
    try:
        return posted_text(store, fields)
    except MachineError:
        return fields.get("middle", "")


async def set_labels(site: Site, request: Request) -> Response:
    """Set (or clear) one field of the project's label schema on the row shown.

    One commit (``labels.apply``), guarded by the row's blob; the page stays
    on the row, so several fields are set one key at a time.
    """
    fields = await form(request)
    row_id, name = fields.get("id", ""), fields.get("field", "")

    def act(store: Store) -> object:
        guarded = Guarded(store, row_id=row_id, blob=fields.get("blob", ""))
        if fields.get("clear"):
            return labeling.apply(guarded, row_id, {}, [name])
        if "start" in fields:
            value: object = {
                "start": _number(fields.get("start", "")),
                "end": _number(fields.get("end", "")),
                "label": fields.get("label") or None,
            }
        else:
            value = fields.get("value", "")
        return labeling.apply(guarded, row_id, {name: value})

    return await _act(site, request, act, row_id, {**fields, "next": row_id})


def _number(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


async def bulk(site: Site, request: Request) -> Response:
    """Label the rows picked, or every row the view matches, in one commit.

    The rows are the ones the page showed (at the head it was rendered at),
    and the write checks each is still what it was there.
    """
    pairs = await form_pairs(request)
    fields = dict(pairs)
    picked = [v for k, v in pairs if k == "pick"]
    verdict = fields.get("verdict", "")
    chosen = posted_view(fields)

    def run() -> Response:
        store = site.store()
        try:
            seen = _commit_seen(store, fields.get("head", ""))
            index = site.cache.at(store, seen)
            if fields.get("scope") == "all":
                ids = [s["id"] for s in selection(site, store, chosen, seen)]
            else:
                ids = picked
            missing = [i for i in ids if i not in index.rows]
            if missing:
                raise UsageError(
                    f"no row {missing[0]} on the page; nothing was written"
                )
            blobs = {i: index.rows[i]["blob"] for i in ids}
            observe.label_many(
                Guarded(store, blobs=blobs), ids, verdict, fields.get("note") or None
            )
        except ConflictError as e:
            banner = Banner(level="conflict", text=str(e))
            values = context(site, store, None, chosen, banner)
            return site.render(request, "queue.html", values, store=store, status=409)
        except MachineError as e:
            return site.failure(request, e)
        return redirect(f"/queue?{chosen.query()}")

    return await run_in_threadpool(run)


def _commit_seen(store: Store, head: str) -> Commit:
    """The commit a page was rendered at (its ``head`` field)."""
    try:
        found = store.repo.get(head) if head else None
    except ValueError:
        found = None
    if found is None or found.type_str != "commit":
        raise UsageError("the page did not say which commit it showed; reload it")
    return found.peel(Commit)


async def undo(site: Site, request: Request) -> Response:
    """Undo the newest commit, only if it is still the one the page showed."""
    return await _take_back(site, request, edits.undo)


async def redo(site: Site, request: Request) -> Response:
    """Redo the newest undo, only if the head is still the one the page showed."""
    return await _take_back(site, request, edits.redo)


async def _take_back(
    site: Site, request: Request, how: Callable[[Store], edits.Undone]
) -> Response:
    fields = await form(request)
    back = back_to(fields.get("back", ""), "/queue")

    def run() -> Response:
        store = site.store()
        try:
            target, _ = how(Guarded(store, head=fields.get("head", "")))
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
        touched = history.entry(target).trailers.get("Row")
        if back.startswith("/queue") and touched:
            path, _, query = back.partition("?")
            kept = {k: v for k, v in parse_qsl(query) if k != "id"}
            return redirect(f"{path}?{urlencode({**kept, 'id': touched})}")
        return redirect(back)

    return await run_in_threadpool(run)
