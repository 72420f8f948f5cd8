"""The project's own label fields in the Queue: each a commit, shown on the row."""

from __future__ import annotations

import re

from starlette.testclient import TestClient

from machine_git.store.store import Store
from machine_git.tagging import labels as labeling
from tests.conftest import git
from tests.review.conftest import CSRF
from tests.review.test_queue import queue_ids
from tests.review.test_queue import shown

SCHEMA = [
    {"name": "quality", "type": "rating"},
    {
        "name": "topic",
        "type": "category",
        "choices": ["bugfix", "docs"],
        "keys": ["q", "w"],
    },
    {"name": "why", "type": "note", "keys": ["y"]},
    {"name": "wrong", "type": "spans", "choices": ["made-up"], "keys": ["h"]},
]


def post(client: TestClient, row_id: str, **values: str) -> object:
    page = client.get(f"/queue?id={row_id}").text
    return client.post(
        "/queue/labels",
        data={"csrf": CSRF, "id": row_id, "blob": shown(page, "blob"), **values},
        follow_redirects=False,
    )


def test_without_a_schema_the_queue_is_good_bad_and_rewrite(
    store: Store, client: TestClient
) -> None:
    page = client.get("/queue").text
    assert 'id="label-fields"' not in page
    assert "This project&#39;s labels" not in page


def test_each_field_is_a_key_and_a_commit_with_its_trailer(
    store: Store, client: TestClient
) -> None:
    labeling.set_schema(store, SCHEMA)
    row_id = queue_ids(client)[0]
    page = client.get(f"/queue?id={row_id}").text
    keys = re.findall(r'<form id="set-[^"]+" [^>]*data-key="([^"]*)"', page)
    assert keys == ["1", "2", "3", "4", "5", "q", "w", "y", "h"]
    # The shortcut list names them too.
    assert "<td><kbd>4</kbd></td><td>quality = 4</td>" in page
    assert "<td><kbd>w</kbd></td><td>topic = docs</td>" in page
    answer = post(client, row_id, field="quality", value="4")
    assert answer.status_code == 303  # type: ignore[attr-defined]
    assert answer.headers["location"] == f"/queue?id={row_id}"  # type: ignore[attr-defined]
    post(client, row_id, field="topic", value="docs")
    message = git(store.path, "log", "-1", "--format=%B")
    assert message == (
        f"labels {row_id}: topic=docs\n\nMachine-Action: labels\n"
        f"Machine-Row: {row_id}\nMachine-Label-topic: docs\n\n"
    )
    row = store.read_row(row_id)
    assert row is not None and row["kind"] == "observed"  # still to judge
    assert row["labels"] == {"quality": 4, "topic": "docs"}
    page = client.get(f"/queue?id={row_id}").text
    assert (
        '<button type="submit" class="chosen" aria-pressed="true"><kbd>4</kbd> 4'
        in (page)
    )
    # A span of the answer, then it is marked where the answer is shown.
    answer_text = labeling.answer_text(row)
    start = answer_text.index("/nonexistent-dir")
    post(
        client,
        row_id,
        field="wrong",
        start=str(start),
        end=str(start + 16),
        label="made-up",
    )
    page = client.get(f"/queue?id={row_id}").text
    assert '<mark class="span" title="made-up">/nonexistent-dir</mark>' in page
    # clear
    post(client, row_id, field="topic", clear="1")
    row = store.read_row(row_id)
    assert row is not None and "topic" not in row["labels"]


def test_a_value_outside_the_schema_is_refused_and_nothing_written(
    store: Store, client: TestClient
) -> None:
    labeling.set_schema(store, SCHEMA)
    row_id = queue_ids(client)[0]
    before = git(store.path, "rev-parse", "HEAD")
    for values, problem in (
        ({"field": "quality", "value": "9"}, "quality is a rating from 1 to 5"),
        ({"field": "mood", "value": "1"}, "no label field &#39;mood&#39;"),
        ({"field": "wrong", "start": "5", "end": "2"}, "wrong: the span 5-2"),
    ):
        answer = post(client, row_id, **values)
        assert answer.status_code == 400, values  # type: ignore[attr-defined]
        assert problem in answer.text, values  # type: ignore[attr-defined]
    assert git(store.path, "rev-parse", "HEAD") == before
