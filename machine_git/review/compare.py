"""Diff (any two revisions, side by side) and Versions (what each holds)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response

from machine_git.history import diff as diffs
from machine_git.history import history
from machine_git.history import revs
from machine_git.history import versions
from machine_git.review import charts
from machine_git.review import diffview
from machine_git.review import pictures
from machine_git.review.web import Site
from machine_git.rows.schemas import KINDS
from machine_git.store.store import Store
from machine_git.train import runs


def revision_choices(store: Store) -> list[dict[str, str]]:
    """Names a revision field suggests: versions, run ids, recent commits."""
    head = store.head
    found = [{"value": v.name, "label": "version"} for v in versions.listing(store)]
    found += [{"value": str(r["id"]), "label": "run"} for r in runs.all_runs(store)]
    if head is not None:
        found += [
            {"value": e.short, "label": e.summary}
            for e in history.log(store, head, limit=15)
        ]
    return found


def diff_context(store: Store, request: Request) -> dict[str, Any]:
    q = request.query_params
    a, b = q.get("a", "").strip(), q.get("b", "").strip()
    kind = q.get("kind", "")
    if not a:
        # As `machine diff`: what one commit (default: the last) changed.
        newer = revs.resolve(store, b or None)
        older = newer.parents[0] if newer.parents else None
    else:
        older = revs.resolve(store, a)
        newer = revs.resolve(store, b or None)  # `machine diff A`: A -> now
    result = diffs.diff_commits(store, older, newer, [kind] if kind in KINDS else None)
    try:
        page = max(1, int(q.get("page", "1")))
    except ValueError:
        page = 1
    pages = max(1, (len(result.rows) + diffview.PAGE - 1) // diffview.PAGE)
    page = min(page, pages)
    shown = result.rows[(page - 1) * diffview.PAGE : page * diffview.PAGE]
    return {
        "page": "diff",
        "a": a,
        "b": b,
        "kind": kind,
        "kinds": KINDS,
        "older": older,
        "newer": newer,
        "older_entry": history.entry(older) if older is not None else None,
        "newer_entry": history.entry(newer),
        "summary": diffview.summary(result),
        "changes": diffview.row_views(
            shown,
            lambda change: pictures.changed(
                change.id,
                change.old,
                change.new,
                (str(older.id), store.snapshot(older).read)
                if older is not None
                else None,
                (str(newer.id), store.snapshot(newer).read),
            ),
        ),
        "changed": len(result.rows),
        "other_files": result.other_files,
        "page_number": page,
        "pages": pages,
        "query_string": urlencode(
            {k: v for k, v in (("a", a), ("b", b), ("kind", kind)) if v}
        ),
        "choices": revision_choices(store),
    }


def diff_page(site: Site, request: Request) -> Response:
    store = site.store()
    return site.render(request, "diff.html", diff_context(store, request), store=store)


def versions_page(site: Site, request: Request) -> Response:
    store = site.store()
    chart, table = charts.composition(store)
    named = versions.listing(store)
    rows_of = {entry["name"]: entry["counts"] for entry in table}
    listed = [
        {
            "name": v.name,
            "commit": str(v.commit.id),
            "when": history.entry(v.commit).when,
            "message": v.message,
            "counts": rows_of.get(v.name, {}),
            "previous": named[i - 1].name if i > 0 else "",
        }
        for i, v in enumerate(named)
    ]
    return site.render(
        request,
        "versions.html",
        {
            "page": "versions",
            "versions": listed,
            "now": rows_of.get("now", {}),
            "kinds": [s["label"] for s in chart["series"]],
            "charts": [chart],
        },
        store=store,
    )
