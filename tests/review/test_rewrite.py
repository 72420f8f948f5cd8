"""Rewrites from the Queue: sent as the part that changed, never lost on failure."""

from __future__ import annotations

import copy
import html
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from machine_git.review.security import MAX_BODY
from machine_git.rows import rows
from machine_git.sessions import pi
from machine_git.store.store import Redaction
from machine_git.store.store import Store
from machine_git.tagging import turns
from tests.conftest import PI_SESSIONS
from tests.conftest import git
from tests.helpers import loose
from tests.review.conftest import CSRF
from tests.review.conftest import client_for
from tests.review.conftest import machine
from tests.review.test_queue import queue_ids
from tests.review.test_queue import shown

LONG = 2 * 1024 * 1024


def long_row(answer: str) -> Any:
    """An observed run of a real Pi turn whose answer is ``answer``."""
    turn = pi.read_turn(PI_SESSIONS / "basic.jsonl")[0]
    row = copy.deepcopy(loose(rows.build(turn, label="observed")))
    row["source"]["session_id"] = "long-answer"
    row["id"] = rows.make_id("pi", "long-answer", turn.entry_ids, "observed")
    row["trajectory"][-1]["content"] = answer
    return row


def long_answer() -> str:
    # Line breaks as a file has them (CRLF too) and a character outside the
    # BMP: the counts the page sends are of the answer as its editor holds it.
    line = "The answer 🙂 explains every step of the repair in detail.\r\n"
    return (line * (LONG // len(line) + 1))[:LONG].rstrip("\r")


def splice_fields(
    page: str, start: int, end: int, middle: str, length: int
) -> dict[str, str]:
    return {
        "csrf": CSRF,
        "id": shown(page, "id"),
        "blob": shown(page, "blob"),
        "next": "",
        "verdict": "good",
        "keep_start": str(start),
        "keep_end": str(end),
        "base_length": str(length),
        "middle": middle,
    }


def test_a_rewrite_sent_as_its_changed_part_saves_the_whole_answer(
    store: Store,
) -> None:
    answer = long_answer()
    row = long_row(answer)
    turns.commit(store, row, Redaction.CHECK)
    client = client_for(store)
    page = client.get(f"/queue?id={row['id']}").text
    typed = answer.replace("\r\n", "\n")
    # The editor holds the whole answer; the page sends only what changed.
    cut = typed.index("every step") + len("every ")
    fields = splice_fields(page, cut, len(typed) - cut - 4, "other ", len(typed))
    posted = client.post("/queue/rewrite", data=fields, follow_redirects=False)
    assert posted.status_code == 303, posted.text[-300:]
    saved = store.read_row(row["id"])
    assert saved is not None and saved["kind"] == "traces"
    assert rows.final_answer(saved) == typed[:cut] + "other " + typed[cut + 4 :]
    assert saved["original_answer"] == answer  # the agent's, as it was stored


def test_a_whole_rewrite_as_large_as_the_largest_row_fits_the_limit(
    store: Store,
) -> None:
    text = "é" * (LONG // 2)  # 2 MB of UTF-8, 6 MB percent-encoded
    client = client_for(store)
    first = queue_ids(client)[0]
    page = client.get(f"/queue?id={first}").text
    fields = {"csrf": CSRF, "id": first, "blob": shown(page, "blob"), "text": text}
    # A store of small rows keeps the least limit (1 MiB).
    assert client.post("/queue/rewrite", data=fields).status_code == 413
    row = long_row(long_answer())
    turns.commit(store, row, Redaction.CHECK)
    page = client.get(f"/queue?id={row['id']}").text  # the index has read it
    fields.update(id=row["id"], blob=shown(page, "blob"), verdict="keep")
    assert len(fields["text"].encode()) > MAX_BODY
    posted = client.post("/queue/rewrite", data=fields, follow_redirects=False)
    assert posted.status_code == 303
    assert rows.final_answer(store.read_row(row["id"])) == text  # type: ignore[arg-type]


def test_a_splice_of_another_answer_is_refused_and_the_text_kept(
    store: Store, client: TestClient
) -> None:
    row_id = queue_ids(client)[0]
    page = client.get(f"/queue?id={row_id}").text
    before = git(store.path, "rev-parse", "HEAD").strip()
    fields = splice_fields(page, 0, 0, "My whole new answer.", 999_999)
    answer = client.post("/queue/rewrite", data=fields)
    assert answer.status_code == 400
    assert git(store.path, "rev-parse", "HEAD").strip() == before
    text = html.unescape(answer.text)
    assert "Not saved: the page's copy of the answer differs from the store's" in text
    assert 'data-base="draft">\nMy whole new answer.</textarea>' in answer.text
    assert (
        '<form id="rewrite" class="editor" method="post" action="/queue/rewrite">'
        in (answer.text)
    )  # open, not hidden


def test_a_conflicting_rewrite_comes_back_with_its_text_in_the_editor(
    project: Path, store: Store, client: TestClient
) -> None:
    row_id = queue_ids(client)[0]
    page = client.get(f"/queue?id={row_id}").text
    machine(project, "label", row_id, "bad")  # from the shell meanwhile
    answer = client.post(
        "/queue/rewrite",
        data={
            "csrf": CSRF,
            "id": row_id,
            "blob": shown(page, "blob"),
            "verdict": "good",
            "text": "Typed with care <b>and</b> not to be lost.",
        },
    )
    assert answer.status_code == 409
    assert (
        'data-base="draft">\nTyped with care &lt;b&gt;and&lt;/b&gt; not to be lost.'
        "</textarea>"
    ) in answer.text
    assert f"Not saved: row {row_id} changed since this page showed it" in answer.text
    assert store.read_row(row_id)["kind"] == "rejected"  # type: ignore[index]
