"""Full-text search: an FTS5 index in the store's cache folder, kept up to date."""

from __future__ import annotations

import re
import stat
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from machine_git.review import search
from machine_git.store.layout import WORK
from machine_git.store.store import Store
from tests.helpers import traces_row
from tests.review.conftest import machine
from tests.review.conftest import same_run_elsewhere


def ids_in(page: str) -> list[str]:
    return re.findall(r'<a href="/rows/([0-9a-f]{12})(?:\?[^"]*)?"><code>', page)


def test_a_row_is_one_document_with_a_field_per_part() -> None:
    row = traces_row()
    row["note"] = "too slow"
    fields = search.documents(row)
    assert fields["user"] == "fix it"
    assert fields["tool"] == "bash"
    assert fields["args"] == '{"command":"ls"}'
    assert fields["result"] == "a.py"
    assert fields["thinking"] == "look first"
    assert fields["answer"] == "Fixed."
    assert fields["note"] == "too slow"


@pytest.mark.parametrize(
    ("query", "expression"),
    [
        ("ls tmp", '"ls" AND "tmp"'),
        ('"cannot access" foo', '"cannot access" AND "foo"'),
        ('args:"ls /tmp" tool:bash', 'args : "ls /tmp" AND tool : "bash"'),
        ("http://x.example", '"http://x.example"'),
        ('a"b NEAR( * ) AND', '"a""b" AND "NEAR(" AND "AND"'),
        ('"unclosed phrase', '"unclosed phrase"'),
        ("*** ()", ""),
    ],
)
def test_a_query_never_reaches_fts5_syntax(query: str, expression: str) -> None:
    assert search.match_expression(query) == expression


def test_the_index_finds_tool_arguments_results_and_phrases(store: Store) -> None:
    index = search.Index(store.path)
    head = store.head
    assert head is not None
    assert index.update(store, head) == 9  # every row, the first time
    target = store.path / WORK / search.FILE
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    in_args = index.ids("args:nonexistent")
    assert len(in_args) == 1  # the observed basic run: `ls /nonexistent-dir`
    (observed,) = in_args
    # The tagged bad turn of the same run holds the words only in its answer.
    answered = index.ids("answer:cannot") - in_args
    assert len(answered) == 1
    assert index.ids('"cannot access"') == in_args | answered
    assert index.ids('"access cannot"') == set()  # a phrase keeps its order
    assert index.ids("result:cannot") == {observed}
    assert index.ids("user:cannot") == set()  # the field filter holds
    assert observed in index.ids("tool:bash")
    assert index.ids("") == set()
    assert index.update(store, head) == 0  # up to date: nothing read


def test_the_index_follows_each_commit_and_is_rebuilt_when_missing(
    project: Path, store: Store
) -> None:
    index = search.Index(store.path)
    head = store.head
    assert head is not None
    index.update(store, head)
    assert len(index.ids("mixed-answer")) == 1  # the observed run
    machine(
        project, "good", "--trace", "--session", same_run_elsewhere(project, "mixed")
    )
    newest = store.head
    assert newest is not None
    assert index.update(store, newest) == 1  # only the new row is read
    assert len(index.ids("mixed-answer")) == 2
    index.close()
    target = store.path / WORK / search.FILE
    target.unlink()
    again = search.Index(store.path)
    assert again.update(store, newest) == 10
    assert len(again.ids("mixed-answer")) == 2
    again.close()
    target.write_bytes(b"not a database at all" * 100)
    garbled = search.Index(store.path)
    assert garbled.update(store, newest) == 10
    assert len(garbled.ids("mixed-answer")) == 2


def test_browse_searches_tool_arguments_with_the_match_marked(
    store: Store, client: TestClient
) -> None:
    page = client.get("/browse?q=args:nonexistent").text
    assert len(ids_in(page)) == 1
    assert "<mark>nonexistent</mark>" in page
    phrase = client.get('/browse?q="No such file or directory"').text
    assert len(ids_in(phrase)) == 2 and ids_in(page)[0] in ids_in(phrase)
    # At an old revision the query matches user text and answers, as before.
    old = client.get("/browse?q=nonexistent&at=v1").text
    assert len(ids_in(old)) == 1
    # The queue's text filter is the same search.
    listing = client.get('/queue/list?q="cannot access"').text
    assert 'id="queue-total"><b>1</b> row<' in listing  # observed only
    listing = client.get('/queue/list?q="cannot access"&kind=any').text
    assert 'id="queue-total"><b>2</b> rows<' in listing
