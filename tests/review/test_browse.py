from __future__ import annotations

import re
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from machine_git.rows import rows
from machine_git.store.store import Store
from tests.conftest import git
from tests.helpers import loose
from tests.review.conftest import CSRF
from tests.review.conftest import machine
from tests.review.conftest import same_run_elsewhere
from tests.review.conftest import session


def listed(client: TestClient, query: str = "") -> list[str]:
    page = client.get(f"/browse/table?{query}").text
    return re.findall(r'<a href="/rows/([0-9a-f]{12})', page)


def ids_of(project: Path, kind: str) -> list[str]:
    return [
        line.split()[0]
        for line in machine(project, "tagged", "--kind", kind, "-n", "50").splitlines()
    ]


def test_browse_lists_every_row_newest_first(store: Store, client: TestClient) -> None:
    ids = listed(client)
    assert len(ids) == 9  # 3 tagged, 6 observed
    made = [store.read_row(i)["created_at"] for i in ids]  # type: ignore[index]
    assert made == sorted(made, reverse=True)
    page = client.get("/browse").text
    assert "9 of 9 rows now" in page


@pytest.mark.parametrize(
    ("query", "kinds"),
    [
        ("kind=observed", {"observed"}),
        ("kind=train", {"train"}),
        ("kind=rejected", {"rejected"}),
        ("kind=traces", {"traces"}),
    ],
)
def test_the_kind_filter(
    store: Store, client: TestClient, query: str, kinds: set[str]
) -> None:
    ids = listed(client, query)
    assert ids
    assert {store.read_row(i)["kind"] for i in ids} == kinds  # type: ignore[index]


def test_the_tool_and_error_filters(store: Store, client: TestClient) -> None:
    with_read = listed(client, "tool=read")
    assert with_read
    for row_id in with_read:
        row = store.read_row(row_id)
        assert row is not None
        names = {
            c["name"]
            for r in loose(row)["trajectory"]
            for c in r.get("tool_calls") or []
        }
        assert "read" in names
    failed = listed(client, "errors=1")
    assert failed
    for row_id in failed:
        row = store.read_row(row_id)
        assert row is not None
        assert any(r.get("ok") is False for r in loose(row)["trajectory"])
    # Every row with a failed tool result is found, and no other.
    everything = listed(client)
    expected = {
        i
        for i in everything
        if any(
            r.get("ok") is False
            for r in loose(store.read_row(i) or {}).get("trajectory") or []
        )
    }
    assert set(failed) == expected


def test_search_finds_words_of_user_text_and_answers(
    store: Store, client: TestClient
) -> None:
    by_user = listed(client, "q=nonexistent-dir")
    assert len(by_user) == 2  # the bad row and the observed run of basic.jsonl
    by_answer = listed(client, "q=on-the-branch+printed")
    assert by_answer
    for row_id in by_answer:
        text = str(store.read_row(row_id)).casefold()
        assert "on-the-branch" in text and "printed" in text
    assert listed(client, "q=NONEXISTENT-DIR") == by_user  # any case
    assert listed(client, "q=zebra") == []


def test_note_host_and_date_filters(project: Path, client: TestClient) -> None:
    assert len(listed(client, "note=terse")) == 1
    assert listed(client, "host=pi") == listed(client)
    assert listed(client, "host=claude") == []
    assert listed(client, "from=2000-01-01&to=2999-12-31") == listed(client)
    assert listed(client, "to=2000-01-01") == []
    bad = client.get("/browse?from=yesterday")
    assert bad.status_code == 400
    assert "bad from date &#39;yesterday&#39;: expected YYYY-MM-DD" in bad.text


def test_a_version_shows_the_rows_it_had(project: Path, client: TestClient) -> None:
    at_v1 = listed(client, "at=v1")
    assert len(at_v1) == 3  # tagged before the observed runs
    assert "3 of 3 rows at <code>v1</code>" in client.get("/browse?at=v1").text
    assert client.get("/browse?at=nope").status_code == 404


def test_new_rows_appear_in_the_live_table(
    project: Path, store: Store, client: TestClient
) -> None:
    page = client.get("/browse").text
    assert 'data-live="/browse/table?"' in page
    before = listed(client)
    head = client.get("/api/head").json()
    machine(
        project, "good", "--trace", "--session", same_run_elsewhere(project, "mixed")
    )
    now = client.get("/api/head").json()
    assert now["head"] != head["head"]
    assert now["counts"]["traces"] == head["counts"]["traces"] + 1
    assert len(listed(client)) == len(before) + 1
    # A pinned version does not change under the reader.
    assert "data-live" not in client.get("/browse?at=v1").text


def test_the_row_page_has_its_history_and_versions(
    project: Path, store: Store, client: TestClient
) -> None:
    bad = ids_of(project, "rejected")[0]
    machine(project, "rewrite", bad, "--as", "Say which path failed.")
    machine(project, "version", "v2")
    page = client.get(f"/rows/{bad[:6]}").text  # a prefix is enough
    assert f"Row <code>{bad}</code>" in page
    # The history comes after the page (a walk of every commit since the row
    # was made): the page says where, and its script loads it.
    assert f'<div id="row-history" data-load="/rows/{bad}/history">' in page
    later = client.get(f"/rows/{bad[:6]}/history").text
    history = re.findall(r"<b>([a-z-]+)</b><br>", later)
    assert history == ["rewrite", "tag"]
    assert (
        f'<a href="/rows/{bad}?at=v1">v1</a> <span class="tag ok">contains it' in page
    )
    assert f'<a href="/rows/{bad}?at=v2">v2</a>' in page
    old = client.get(f"/rows/{bad}?at=v1").text
    assert "Say which path failed." not in old
    assert "Say which path failed." in page
    observed = ids_of(project, "observed")[0]
    page = client.get(f"/rows/{observed}").text
    assert '<span class="muted">v1</span> <span class="tag">not in it</span>' in page


def test_a_removed_row_still_has_its_history(project: Path, client: TestClient) -> None:
    row_id = ids_of(project, "train")[0]
    machine(project, "rm", row_id, "--why", "duplicate")
    page = client.get(f"/rows/{row_id}")
    assert page.status_code == 200
    assert "This row is not in the store now" in page.text
    assert re.findall(r"<b>([a-z-]+)</b><br>", page.text) == ["rm", "tag"]
    assert client.get("/rows/abcdefabcdef").status_code == 404
    assert client.get("/rows/xyz").status_code == 400


def test_rewrite_and_label_from_the_row_page(
    project: Path, store: Store, client: TestClient
) -> None:
    row_id = ids_of(project, "train")[0]
    page = client.get(f"/rows/{row_id}").text
    blob = re.search(r'name="blob" value="([0-9a-f]{40})"', page)
    assert blob is not None
    answer = client.post(
        f"/rows/{row_id}/rewrite",
        data={"csrf": CSRF, "blob": blob.group(1), "text": "Shorter."},
        follow_redirects=False,
    )
    assert answer.status_code == 303
    assert rows.final_answer(loose(store.read_row(row_id))) == "Shorter."
    assert "Machine-Action: rewrite" in git(store.path, "log", "-1", "--format=%B")
    # The page's blob is now stale: a second rewrite from it is a conflict.
    again = client.post(
        f"/rows/{row_id}/rewrite",
        data={"csrf": CSRF, "blob": blob.group(1), "text": "Other."},
    )
    assert again.status_code == 409
    assert "changed since this page showed it" in again.text
    observed = ids_of(project, "observed")[0]
    page = client.get(f"/rows/{observed}").text
    blob = re.search(r'name="blob" value="([0-9a-f]{40})"', page)
    assert blob is not None
    client.post(
        f"/rows/{observed}/label",
        data={"csrf": CSRF, "blob": blob.group(1), "verdict": "bad"},
    )
    assert store.read_row(observed)["kind"] == "rejected"  # type: ignore[index]
    nothing = client.post(f"/rows/{observed}/fly", data={"csrf": CSRF, "blob": ""})
    assert nothing.status_code == 400
    assert "no action &#39;fly&#39; on a row" in nothing.text


def test_the_row_page_shows_the_context_its_turn_ran_with(
    project: Path, client: TestClient
) -> None:
    machine(project, "good", "--trace", "--session", session("context"))
    row_id = ids_of(project, "traces")[0]
    page = client.get(f"/rows/{row_id}").text
    summary = re.search(
        r"<summary>Context <code>([0-9a-f]{12})</code>:(.*?)</summary>", page, re.S
    )
    assert summary is not None
    assert " ".join(summary.group(2).split()).startswith("system prompt (")
    assert "2 tools (read, bash)" in summary.group(2)
    assert "<h3>Tool <code>bash</code></h3>" in page
    assert "Current working directory: /tmp/machine-fixture/proj" in page
    # a turn whose agent kept no context says so
    plain = ids_of(project, "train")[0]
    assert "Context: not recorded" in client.get(f"/rows/{plain}").text


def test_a_rewrite_whose_body_cuts_an_escape_in_half_from_the_row_page(
    project: Path, store: Store, client: TestClient
) -> None:
    # The commit body of a rewrite shows the old answer as JSON cut at 40
    # characters: here inside its \u001b escape ("...\u00… -> "Shorter.""),
    # which the secret scan used to fail on, and the page said HTTP 500.
    row_id = ids_of(project, "train")[0]
    answer = "x" * 35 + "\x1b[31mred\x1b[0m, then the answer."
    machine(project, "rewrite", row_id, "--as", answer)
    page = client.get(f"/rows/{row_id}")
    assert page.status_code == 200
    blob = re.search(r'name="blob" value="([0-9a-f]{40})"', page.text)
    assert blob is not None
    answer_page = client.post(
        f"/rows/{row_id}/rewrite",
        data={"csrf": CSRF, "blob": blob.group(1), "text": "Shorter."},
        follow_redirects=False,
    )
    assert answer_page.status_code == 303, answer_page.text[-300:]
    assert rows.final_answer(loose(store.read_row(row_id))) == "Shorter."
    body = git(store.path, "log", "-1", "--format=%b").splitlines()[0]
    assert body.endswith(' "' + "x" * 35 + '\\u0… -> "Shorter."')
    assert client.get(f"/rows/{row_id}").status_code == 200
    assert client.get(f"/rows/{row_id}/history").status_code == 200
