"""Revisions: how a user names a version of the dataset.

Accepted anywhere a command takes a revision:

- a commit id or a unique prefix of one (4+ hex characters), ``HEAD``,
  ``HEAD~N``, ``HEAD^``, and any other git revision syntax of one commit;
- a named version (``machine version NAME``), i.e. a tag;
- a date, ``@{2026-11-01}`` or ``@{2026-11-01 12:00}``: the dataset as it was
  then (a date alone means the end of that day, UTC), or any date git's own
  ``@{...}`` accepts (``@{yesterday}``, ``@{2.days.ago}``, ``@{1 week ago}``,
  ``@{noon}``, ``@{last friday}``), read by git itself in the local time zone;
- a training run id (``run/<id>`` refs, once runs exist).

Every command reads revisions here, so a bad date or a date before the first
commit is the same one line whatever the command.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC
from datetime import datetime
from datetime import timedelta

import pygit2
from pygit2 import Commit

from machine_git.core.errors import BadRevisionError
from machine_git.core.errors import UsageError
from machine_git.store.store import BRANCH
from machine_git.store.store import Store

RUN_REFS = "refs/runs/"
_ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
_ISO_TIME = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?"
)
_EXPIRY = ("--type=expiry-date", "--get", "machine.when")
_GIT_NOW = 2**64 - 1  # what git's expiry-date parser gives for "now"
_FORMS = (
    "expected YYYY-MM-DD, an ISO 8601 time or a date git understands "
    "(yesterday, 2.days.ago, 1 week ago, noon, last friday)"
)


def resolve(store: Store, text: str | None) -> Commit:
    """The commit ``text`` names (default: the newest); one line if it names none."""
    head = store.head
    if head is None:
        raise BadRevisionError("the store has no commits yet")
    if text is None or text in ("", "HEAD", "main"):
        return head
    if "\x00" in text or len(text) > 200:
        raise UsageError("bad revision: too long or contains a NUL byte")
    if is_date(text):
        return at_date(store, text.strip())
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


def is_date(text: str) -> bool:
    """True if ``text`` is meant as a date, ``@{...}`` (well formed or not)."""
    return text.strip().startswith("@{")


def at_date(store: Store, text: str) -> Commit:
    """The newest commit made at or before ``@{when}``, whichever parent brought it.

    By committer date, and a commit is never older than its parents: a
    commit cannot have been made before the ones it names. So a commit dated
    before a parent (a hand-made backdated commit, or a clock that went back)
    is taken at its newest parent's date, never makes newer rows look old,
    and is reported (:data:`report`). Every commit is read once, parents first.
    """
    if not text.endswith("}"):
        raise UsageError(f"bad date {text}: no closing brace; {_FORMS}")
    moment = parse_date(text[2:-1], text).timestamp()
    head = store.repo.references[BRANCH].peel(Commit)
    order = pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.REVERSE
    taken: dict[pygit2.Oid, int] = {}  # commit -> the date it is taken at
    found: tuple[int, Commit] | None = None
    first: int | None = None
    for commit in store.repo.walk(head.id, order):
        dates = [taken[p] for p in commit.parent_ids if p in taken]
        newest = max(dates, default=commit.commit_time)
        if commit.commit_time < newest:
            report(
                f"commit {str(commit.id)[:12]} is dated {_utc(commit.commit_time)}, "
                f"before its parent ({_utc(newest)}); it is taken as no older "
                "than its parent"
            )
        when = taken[commit.id] = max(commit.commit_time, newest)
        first = when if first is None else first
        if when <= moment and (found is None or when >= found[0]):
            found = (when, commit)  # a later one of the same second: the child
    if found is not None:
        return found[1]
    raise BadRevisionError(
        f"no commit at or before {text} ({_utc(moment)}): the "
        f"store's first commit is from {_utc(first or head.commit_time)}"
    )


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


# Where a backdated commit is reported (the CLI's stderr by default).
report: Callable[[str], None] = _warn


def parse_date(when: str, shown: str | None = None) -> datetime:
    """``2026-11-01`` (end of day, UTC), ``2026-11-01 12:00`` or ISO 8601 (UTC
    unless it says otherwise), else whatever git's ``@{...}`` accepts.

    ``shown`` is how errors name the date (default: ``@{when}``).
    """
    shown = shown or f"@{{{when}}}"
    text = when.strip()
    try:
        if _ISO_DAY.fullmatch(text):
            day = datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=UTC)
            return day + timedelta(days=1) - timedelta(microseconds=1)
        if _ISO_TIME.fullmatch(text):
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
            return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    except ValueError:
        raise UsageError(f"bad date {shown}: {_FORMS}") from None
    if re.fullmatch(r"-?\d{1,8}", text):
        # git reads @{3} as a position in the reflog and @{-1} as a branch
        raise UsageError(
            f"bad date {shown}: a small number is a reflog position in git, "
            "not a date (HEAD~N counts commits back)"
        )
    return datetime.fromtimestamp(_git_date(text, shown), tz=UTC)


def _git_date(text: str, shown: str) -> float:
    """The time git's date parser (approxidate, as in ``@{...}``) gives ``text``.

    Asked of git itself, so every form git accepts is accepted, and nothing
    it refuses. ``git config --type=expiry-date`` is the one command that
    prints the time and fails on text it does not understand.
    """
    if not text or text in ("never", "false") or any(c < " " for c in text):
        raise UsageError(f"bad date {shown}: {_FORMS}")
    environment = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("GIT_") and k not in ("LANG", "LANGUAGE")
    }
    environment.update(
        LC_ALL="C", GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull
    )
    try:
        done = subprocess.run(
            [*("git", "-c", f"machine.when={text}", "config"), *_EXPIRY],
            capture_output=True,
            text=True,
            env=environment,
            cwd=os.path.abspath(os.sep),
            stdin=subprocess.DEVNULL,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise UsageError(f"cannot read the date {shown}: git failed ({e})") from None
    try:
        value = int(done.stdout.strip())
    except ValueError:
        raise UsageError(f"bad date {shown}: {_FORMS}") from None
    return time.time() if value == _GIT_NOW else float(value)


def _utc(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def _valid_ref_name(ref: str) -> bool:
    try:
        return bool(pygit2.reference_is_valid_name(ref))
    except (ValueError, TypeError):
        return False
