from __future__ import annotations

import contextlib
import re
import time
from datetime import datetime
from pathlib import Path

import pytest

from machine_git.core.errors import BadRevisionError
from machine_git.core.errors import UsageError
from machine_git.history import revs
from machine_git.history import versions
from machine_git.store.store import Store
from tests import helpers


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store.create(tmp_path / "s")
    for n in range(3):
        row = helpers.train_row(f"{n:012x}")
        helpers.commit_row(s, row)
    return s


def test_head_and_ancestors(store: Store) -> None:
    head = store.head
    assert head is not None
    assert revs.resolve(store, None).id == head.id
    assert revs.resolve(store, "HEAD~1").id == head.parents[0].id
    assert revs.resolve(store, str(head.id)[:7]).id == head.id


def test_a_named_version(store: Store) -> None:
    head = store.head
    assert head is not None
    versions.create(store, "v1", head.parents[0])
    assert revs.resolve(store, "v1").id == head.parents[0].id


def test_a_date_is_the_dataset_as_it_was_then(store: Store) -> None:
    head = store.head
    assert head is not None
    assert revs.resolve(store, "@{2999-01-01}").id == head.id
    with pytest.raises(
        BadRevisionError, match=re.escape("no commit at or before @{2000-01-01}")
    ):
        revs.resolve(store, "@{2000-01-01}")
    with pytest.raises(UsageError, match=re.escape("bad date @{soon}")):
        revs.resolve(store, "@{soon}")


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("nope", BadRevisionError),
        ("HEAD~99", BadRevisionError),
        ("..", BadRevisionError),
        ("a\x00b", UsageError),
        ("x" * 300, UsageError),
    ],
)
def test_bad_revisions_are_one_line(
    store: Store, text: str, error: type[Exception]
) -> None:
    with pytest.raises(error) as e:
        revs.resolve(store, text)
    assert "\n" not in str(e.value)


def test_end_of_day_for_a_bare_date() -> None:
    assert (
        revs.parse_date("2026-11-01").isoformat() == "2026-11-01T23:59:59.999999+00:00"
    )
    assert (
        revs.parse_date("2026-11-01T12:00:00Z").isoformat()
        == "2026-11-01T12:00:00+00:00"
    )


def test_relative_dates_are_read_by_git() -> None:
    now = time.time()
    assert abs(revs.parse_date("2.days.ago").timestamp() - (now - 2 * 86400)) < 60
    assert abs(revs.parse_date("1 week ago").timestamp() - (now - 7 * 86400)) < 60
    assert abs(revs.parse_date("now").timestamp() - now) < 60
    noon = datetime.fromtimestamp(revs.parse_date("noon").timestamp())
    assert (noon.hour, noon.minute) == (12, 0)  # local time, as git reads it


@pytest.mark.parametrize("text", ["never", "false", "soon", "a\nb", "", "-1", "42"])
def test_what_git_would_not_take_as_a_date_is_refused(text: str) -> None:
    with pytest.raises(UsageError, match=r"^bad date @\{"):
        revs.parse_date(text)


def test_a_commit_dated_before_its_parent_is_never_older_than_it(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pygit2

    from machine_git.core import jsonio
    from machine_git.store.store import BRANCH

    said: list[str] = []
    monkeypatch.setattr(revs, "report", said.append)
    head = store.head
    assert head is not None
    # A row added by a commit that claims June 2020 (author and committer).
    row = helpers.train_row("0000000000ff")
    blob = store.repo.create_blob(jsonio.canonical(row))
    builder = store.repo.TreeBuilder(head.tree)
    builder.insert("backdated.json", blob, pygit2.enums.FileMode.BLOB)
    when = pygit2.Signature("mallory", "m@example.com", 1_590_969_600, 0)
    forged = store.repo.create_commit(
        BRANCH, when, when, "backdated", builder.write(), [head.id]
    )
    with pytest.raises(BadRevisionError) as caught:
        revs.resolve(store, "@{2020-06-01}")
    assert str(caught.value).startswith("no commit at or before @{2020-06-01} ")
    assert said == [
        f"commit {str(forged)[:12]} is dated 2020-06-01 00:00 UTC, before its "
        f"parent ({datetime.utcfromtimestamp(head.commit_time):%Y-%m-%d %H:%M} UTC); "
        "it is taken as no older than its parent"
    ]
    # Taken at its parent's date: a date after the parent finds it, none before.
    after = datetime.utcfromtimestamp(head.commit_time + 60).strftime("%Y-%m-%d %H:%M")
    assert revs.resolve(store, f"@{{{after}}}").id == forged
    before = datetime.utcfromtimestamp(head.commit_time - 1).isoformat() + "+00:00"
    # (None at all if every commit of the fixture was made in the same second.)
    with contextlib.suppress(BadRevisionError):
        assert revs.resolve(store, f"@{{{before}}}").id != forged
