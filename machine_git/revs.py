"""Revisions: how a user names a version of the dataset.

Accepted anywhere a command takes a revision:

- a commit id or a unique prefix of one (4+ hex characters), ``HEAD``,
  ``HEAD~N``, ``HEAD^``, and any other git revision syntax of one commit;
- a named version (``machine version NAME``), i.e. a tag;
- a date, ``@{2026-11-01}`` or ``@{2026-11-01 12:00}``: the dataset as it was
  then (a date alone means the end of that day, UTC);
- a training run id (``run/<id>`` refs, once runs exist).
"""

from __future__ import annotations

import re
from datetime import UTC
from datetime import datetime
from datetime import timedelta

import pygit2
from pygit2 import Commit

from machine_git import history
from machine_git.errors import BadRevisionError
from machine_git.errors import UsageError
from machine_git.store import BRANCH
from machine_git.store import Store

_AT = re.compile(r"^@\{(?P<when>[^}]+)\}$")
RUN_REFS = "refs/runs/"


def resolve(store: Store, text: str | None) -> Commit:
    """The commit ``text`` names (default: the newest); one line if it names none."""
    head = store.head
    if head is None:
        raise BadRevisionError("the store has no commits yet")
    if text is None or text in ("", "HEAD", "main"):
        return head
    if "\x00" in text or len(text) > 200:
        raise UsageError("bad revision: too long or contains a NUL byte")
    at = _AT.match(text.strip())
    if at:
        return at_date(store, at.group("when"))
    for ref in (f"refs/tags/{text}", f"{RUN_REFS}{text}"):
        if _valid_ref_name(ref) and ref in store.repo.references:
            return store.repo.references[ref].peel(Commit)
    try:
        obj = store.repo.revparse_single(text)
        return obj.peel(Commit)
    except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError):
        pass
    raise BadRevisionError(
        f"unknown revision {text!r} (a commit id, HEAD~N, a version name, "
        "a run id or @{DATE})"
    )


def at_date(store: Store, when: str) -> Commit:
    """The newest commit made at or before ``when``, whichever parent brought it."""
    moment = parse_date(when).timestamp()
    head = store.repo.references[BRANCH].peel(Commit)
    for commit in history.walk(store, head):
        if commit.commit_time <= moment:
            return commit
    raise BadRevisionError(f"the store has no commit at or before {when}")


def parse_date(when: str) -> datetime:
    """``2026-11-01`` (end of day), ``2026-11-01 12:00``, or full ISO 8601."""
    text = when.strip()
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
            day = datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=UTC)
            return day + timedelta(days=1) - timedelta(microseconds=1)
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"bad date {when!r}: expected YYYY-MM-DD or an ISO 8601 time"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _valid_ref_name(ref: str) -> bool:
    try:
        return bool(pygit2.reference_is_valid_name(ref))
    except (ValueError, TypeError):
        return False
