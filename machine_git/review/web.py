"""What every page shares: the store, the templates, forms, errors and redirects."""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field
from dataclasses import replace
from pathlib import Path
from typing import Any
from typing import TypedDict
from urllib.parse import parse_qsl

import jinja2
import markupsafe
from pygit2 import Commit
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.responses import RedirectResponse

from machine_git.core import errors
from machine_git.core import models
from machine_git.core.models import LabelField
from machine_git.history import history
from machine_git.review import search
from machine_git.review.index import Cache
from machine_git.review.index import Filters
from machine_git.review.security import form_fields
from machine_git.store import stats
from machine_git.store.store import Store
from machine_git.tagging import edits
from machine_git.tagging import labels as labeling

# A MachineError's exit code says what kind of failure it was; a page says the
# same with its HTTP status.
STATUS = {
    errors.USAGE: 400,
    errors.NOT_FOUND: 404,
    errors.INVALID: 422,
    errors.CONFLICT: 409,
    errors.IO: 507,
    errors.DAMAGED: 500,
}


# Every key the pages' script binds (app.js), listed by ``?``. The test of
# the overlay checks each one listed here is bound.
SHORTCUTS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    (
        "Queue: judge the row shown",
        (
            ("g", "label good (observed -> traces)"),
            ("b", "label bad (observed -> rejected)"),
            ("r", "rewrite the answer in the editor"),
            ("Ctrl+Enter", "save the rewrite (in the editor)"),
            ("N", "write a note for the next label (Enter: label good)"),
            ("t", "show or hide thinking"),
        ),
    ),
    (
        "Queue: move",
        (
            ("n", "next row"),
            ("p", "previous row"),
            ("s", "skip to the next row"),
            ("]", "next 50 rows"),
            ("[", "previous 50 rows"),
            ("/", "type in the text filter"),
        ),
    ),
    (
        "Queue: many rows at once",
        (
            ("x", "tick or untick the row shown"),
            ("A", "choose all rows the filters match"),
            ("G", "label the ticked (or all matching) rows good"),
            ("B", "label the ticked (or all matching) rows bad"),
        ),
    ),
    (
        "Everywhere",
        (
            ("u", "undo the newest change"),
            ("U", "redo the newest undo"),
            ("?", "show or hide this list"),
            ("Esc", "close the editor, the note or this list"),
        ),
    ),
)


class Banner(TypedDict):
    level: str  # info | conflict | error
    text: str


@dataclass
class Site:
    """One server's state: where the store is, its tokens, its row indexes."""

    location: Path
    project: str
    csrf: str
    cache: Cache = field(default_factory=Cache)
    templates: jinja2.Environment = field(init=False)
    search: search.Index = field(init=False)

    def __post_init__(self) -> None:
        self.search = search.Index(self.location)
        # autoescape everywhere: rows hold tool output and answers, shown as
        # text; a <script> in them is printed, never run.
        self.templates = jinja2.Environment(
            loader=jinja2.PackageLoader("machine_git.review", "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.templates.filters["short"] = lambda text: str(text)[:12]

    def warm(self) -> None:
        """Build the row index of the head now, before the first page asks."""
        try:
            store = self.store()
            head = store.head
            if head is not None:
                self.cache.recorded(store, head)
                self.search.update(store, head)
        except Exception as e:  # re-raised unless the first page can say it in a line
            if errors.user_message(e) is None:
                raise

    def searched(self, store: Store, at: Commit, filters: Filters) -> Filters:
        """``filters`` with its text query answered by the full-text index.

        The index follows the head; at an older revision the query matches
        the user text and answers of the in-memory summaries instead.
        """
        head = store.head
        if not filters.query.strip() or head is None or head.id != at.id:
            return filters
        self.search.update(store, head)
        return replace(filters, found=frozenset(self.search.ids(filters.query)))

    def schema(self, store: Store) -> list[LabelField]:
        """The project's label schema (settings.json ``labels``) at the head."""
        return labeling.schema(store)

    def body_limit(self) -> int:
        """The largest form post: room for the largest row the store holds,
        percent-encoded (at most three bytes for one), whole in a rewrite."""
        return 3 * self.cache.largest() + 64 * 1024

    def store(self) -> Store:
        """The store, opened for this request (pygit2 objects stay in one thread)."""
        return Store.open(self.location)

    def render(
        self,
        request: Request,
        name: str,
        context: dict[str, Any],
        *,
        store: Store | None = None,
        status: int = 200,
    ) -> HTMLResponse:
        """A page (or a fragment, for a name starting with ``_``)."""
        values = dict(context)
        if not name.startswith("_"):
            values.update(self._chrome(store or self.store()))
            values.setdefault("banner", None)
            values.setdefault("row_id", "")
            values.setdefault("row_blob", "")
            values.setdefault("reload", False)
        values.update(csrf=self.csrf, path=request.url.path)
        values.setdefault("back", request.url.path)
        values["shortcuts"] = SHORTCUTS
        html = self.templates.get_template(name).render(values)
        return HTMLResponse(html, status_code=status)

    def _chrome(self, store: Store) -> dict[str, Any]:
        head = store.head
        # What the undo key takes back: the newest change, or after undos the
        # step before them (machine undo's own choice).
        step = edits.next_undo(store, head) if head is not None else None
        undone = edits.next_redo(store, head) if head is not None else None
        fields = self.schema(store)
        return {
            "label_shortcuts": [
                (key, f"{name} = {value}" if value != "" else f"{name}")
                for key, (name, value) in models.label_keys(fields).items()
            ],
            "project": self.project,
            "head_id": str(head.id) if head is not None else "",
            "newest": history.entry(step) if step is not None else None,
            "redoable": history.entry(undone) if undone is not None else None,
            "counts": stats.counts(store),
        }

    def status_of(self, e: Exception) -> int:
        """The HTTP status that says what kind of failure ``e`` was."""
        return STATUS.get(errors.exit_code(e), 500)

    def failure(self, request: Request, e: Exception) -> HTMLResponse:
        """A MachineError (or a damaged read) as a page with one line."""
        why = errors.user_message(e)
        if why is None:  # a bug: Starlette logs its traceback in the terminal
            why = f"internal error ({type(e).__name__}); the terminal has the details"
            status = 500
        else:
            status = STATUS.get(errors.exit_code(e), 500)
        try:
            store: Store | None = self.store()
        except errors.MachineError:
            store = None
        if store is None:
            html = f"<!doctype html><title>machine review</title><p>Error: {_esc(why)}"
            return HTMLResponse(html, status_code=status)
        return self.render(
            request,
            "error.html",
            {"page": "error", "message": why},
            store=store,
            status=status,
        )


async def form(request: Request) -> dict[str, str]:
    """The posted form (the security middleware has checked its CSRF token)."""
    return form_fields(await request.body())


async def form_pairs(request: Request) -> list[tuple[str, str]]:
    """The posted form's fields in order, a repeated name (checkboxes) each time."""
    body = await request.body()
    return parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True)


def back_to(path: str, default: str) -> str:
    """A local path to return to; anything else (another site) is ``default``."""
    if path.startswith("/") and not path.startswith("//") and "\\" not in path:
        return path
    return default


def redirect(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303)


def _esc(text: str) -> str:
    return str(markupsafe.escape(text))
