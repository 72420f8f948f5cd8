"""The text a rewrite saves, sent whole or as the one part that changed.

The editor starts with the row's whole answer. Posting it back whole costs a
request as large as the answer (2 MB and more for a long one), so the page's
script sends only the change: how many characters of the answer's start and
end it kept, and the text between them. The form carries the blob of the row
the page showed, and the write checks (``Guarded``) that the row is still that
blob; so the answer the change applies to is exactly the one the editor held.
A page without its script posts the whole text, as a plain form does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from pygit2 import Blob

from machine_git.core import jsonio
from machine_git.core.errors import UsageError
from machine_git.rows import rows
from machine_git.store.store import Store

# A textarea's value has its line breaks as "\n" (HTML: CRLF and CR become
# LF), so the counts the script sends are of the answer read that way.
_BREAKS = re.compile(r"\r\n?")


def as_typed(text: str) -> str:
    """``text`` with its line breaks as an editor holds them."""
    return _BREAKS.sub("\n", text)


def posted_text(store: Store, fields: Mapping[str, str]) -> str:
    """The rewrite a form carries: its ``text``, or the splice of the shown answer."""
    if "text" in fields:
        return as_typed(fields["text"])
    try:
        start = int(fields.get("keep_start", ""))
        end = int(fields.get("keep_end", ""))
        length = int(fields.get("base_length", ""))
    except ValueError:
        raise UsageError(
            "the rewrite came without its text; nothing was written"
        ) from None
    base = as_typed(_answer_of(store, fields.get("blob", "")))
    if len(base) != length or start < 0 or end < 0 or start + end > length:
        raise UsageError(
            "the page's copy of the answer differs from the store's; "
            "reload it (your text stays in the editor); nothing was written"
        )
    return base[:start] + fields.get("middle", "") + base[length - end :]


def _answer_of(store: Store, blob: str) -> str:
    """The final answer of the row stored as ``blob`` (the one the page showed)."""
    try:
        found = store.repo.get(blob)
    except ValueError:
        found = None
    if not isinstance(found, Blob):
        raise UsageError(f"no row blob {blob!r} in the store; nothing was written")
    row = jsonio.loads(found.data)
    if not isinstance(row, dict):
        raise UsageError(f"blob {blob} is not a row; nothing was written")
    return rows.final_answer(row) or ""  # type: ignore[arg-type]
