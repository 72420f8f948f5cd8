from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import markupsafe
from starlette.testclient import TestClient

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
from tests.review.conftest import small_store


def esc(text: str) -> str:
    """``text`` as the pages print it (Jinja's autoescape)."""
    return str(markupsafe.escape(text))


def queue_ids(client: TestClient) -> list[str]:
    page = client.get("/queue/list").text
    return re.findall(r'href="/queue\?id=([0-9a-f]{12})"', page)


def shown(page: str, name: str) -> str:
    """The value of hidden field ``name`` in the first form that has it."""
    found = re.search(rf'name="{name}" value="([^"]*)"', page)
    assert found, name
    return html.unescape(found.group(1))


def last_message(store: Store) -> str:
    return git(store.path, "log", "-1", "--format=%B")


def label(client: TestClient, row_id: str, verdict: str, **extra: str) -> Any:
    page = client.get(f"/queue?id={row_id}").text
    form = {
        "csrf": CSRF,
        "id": row_id,
        "blob": shown(page, "blob"),
        "next": shown(page, "next"),
        "verdict": verdict,
        **extra,
    }
    return client.post("/queue/label", data=form, follow_redirects=False)


def test_the_queue_shows_observed_rows_newest_first(
    project: Path, store: Store, client: TestClient
) -> None:
    ids = queue_ids(client)
    listed = json.loads(machine(project, "observed", "-n", "50", "--json"))
    assert len(ids) == 6
    assert sorted(ids) == sorted(r["id"] for r in listed)
    made = [store.read_row(i)["created_at"] for i in ids]  # type: ignore[index]
    assert made == sorted(made, reverse=True)
    page = client.get("/queue").text
    assert "Run 1 of 6" in page
    assert f'data-row-id="{ids[0]}"' in page


def test_a_run_is_shown_with_its_calls_results_errors_and_answer(
    store: Store, client: TestClient
) -> None:
    row_id = rows.make_id("pi", _session("basic"), _turn("basic").entry_ids, "observed")
    page = client.get(f"/queue?id={row_id}").text
    assert "Now two-tools: read notes.md and list /nonexistent-dir." in page
    assert '<b class="tool-name">read</b>' in page
    assert '<b class="tool-name">bash</b>' in page
    assert esc('"command": "ls /nonexistent-dir"') in page  # args, indented
    assert '<span class="tag error">error</span>' in page  # the failed ls
    assert "Error: ls: cannot access &#39;/nonexistent-dir&#39;" in page
    assert '<div class="who">final answer</div>' in page
    assert esc('notes.md starts with "# Notes".') in page


def test_labeling_good_is_the_clis_commit_and_moves_to_the_next_row(
    project: Path, store: Store, client: TestClient, tmp_path: Path
) -> None:
    ids = queue_ids(client)
    answer = label(client, ids[0], "good")
    assert answer.status_code == 303
    assert answer.headers["location"] == f"/queue?id={ids[1]}"
    after = store.read_row(ids[0])
    assert after is not None and (after["kind"], after["tag"]) == ("traces", "good")
    # The same label from the shell, in a store made the same way: the same
    # commit message, trailers and all.
    twin = tmp_path / "twin"
    twin.mkdir()
    twin_store = small_store(twin)
    machine(twin, "label", ids[0], "good")
    assert last_message(store) == last_message(twin_store)
    assert last_message(store).endswith(
        f"Machine-Action: label\nMachine-Row: {ids[0]}\nMachine-Kind: traces\n"
        "Machine-Tag: good\nMachine-From: observed\n\n"
    )
    log = machine(project, "log", "-n", "1")
    assert f"  label  label {ids[0]} observed -> traces" in log
    assert queue_ids(client) == ids[1:]


def test_labeling_bad_keeps_the_row_out_of_training(
    store: Store, client: TestClient
) -> None:
    row_id = queue_ids(client)[2]
    assert label(client, row_id, "bad").status_code == 303
    after = store.read_row(row_id)
    assert after is not None and (after["kind"], after["tag"]) == ("rejected", "bad")
    assert "Machine-Kind: rejected\nMachine-Tag: bad\n" in last_message(store)


def test_a_rewrite_is_saved_as_the_label_with_the_new_answer(
    store: Store, client: TestClient
) -> None:
    row_id = queue_ids(client)[0]
    before = store.read_row(row_id)
    assert before is not None
    original = next(
        r["content"]
        for r in reversed(loose(before)["trajectory"])
        if r["role"] == "assistant" and r.get("content")
    )
    page = client.get(f"/queue?id={row_id}").text
    # prefilled, after the newline HTML drops (so a leading one would stay)
    assert f'data-base="answer">\n{esc(original)}</textarea>' in page
    answer = client.post(
        "/queue/rewrite",
        data={
            "csrf": CSRF,
            "id": row_id,
            "blob": shown(page, "blob"),
            "next": "",
            "verdict": "bad",
            "text": "Say which file failed, then stop.\r\n",
        },
        follow_redirects=False,
    )
    assert answer.status_code == 303
    after = store.read_row(row_id)
    assert after is not None and after["kind"] == "rejected"
    assert rows.final_answer(after) == "Say which file failed, then stop.\n"
    assert after["original_answer"] == original
    assert f"Machine-Action: label\nMachine-Row: {row_id}" in last_message(store)


def test_a_rewrite_can_leave_the_row_in_the_queue(
    store: Store, client: TestClient
) -> None:
    row_id = queue_ids(client)[1]
    page = client.get(f"/queue?id={row_id}").text
    client.post(
        "/queue/rewrite",
        data={
            "csrf": CSRF,
            "id": row_id,
            "blob": shown(page, "blob"),
            "verdict": "keep",
            "text": "A better answer.",
        },
    )
    after = store.read_row(row_id)
    assert after is not None and after["kind"] == "observed"
    assert rows.final_answer(after) == "A better answer."
    assert f"Machine-Action: rewrite\nMachine-Row: {row_id}" in last_message(store)
    assert row_id in queue_ids(client)


def test_undo_reverts_the_newest_commit_and_shows_its_row_again(
    store: Store, client: TestClient
) -> None:
    row_id = queue_ids(client)[0]
    label(client, row_id, "good")
    labeled = git(store.path, "rev-parse", "HEAD").strip()
    page = client.get("/queue").text
    assert shown(page, "head") == labeled
    answer = client.post(
        "/undo",
        data={"csrf": CSRF, "head": labeled, "back": "/queue"},
        follow_redirects=False,
    )
    assert answer.headers["location"] == f"/queue?id={row_id}"
    assert last_message(store).startswith(f"undo: label {row_id} observed -> traces")
    assert f"Machine-Reverts: {labeled}" in last_message(store)
    assert store.read_row(row_id)["kind"] == "observed"  # type: ignore[index]


def test_a_second_undo_takes_back_the_change_before(
    store: Store, client: TestClient
) -> None:
    first, second = queue_ids(client)[:2]
    label(client, first, "good")
    label(client, second, "bad")
    for row_id in (second, first):
        page = client.get("/queue").text
        taken = r"undo takes back:</span> <code>\w+</code> label · "
        assert re.search(taken + re.escape(esc(f"label {row_id} observed -> ")), page)
        client.post(
            "/undo",
            data={"csrf": CSRF, "head": shown(page, "head"), "back": "/queue"},
            follow_redirects=False,
        )
        assert store.read_row(row_id)["kind"] == "observed"  # type: ignore[index]
    assert last_message(store).startswith(f"undo: label {first} observed -> traces")


def test_two_tabs_never_lose_a_label(store: Store, client: TestClient) -> None:
    row_id = queue_ids(client)[0]
    first_tab = client.get(f"/queue?id={row_id}").text
    second_tab = client_for(store).get(f"/queue?id={row_id}").text
    assert label(client, row_id, "good").status_code == 303
    stale = client.post(
        "/queue/label",
        data={
            "csrf": CSRF,
            "id": row_id,
            "blob": shown(second_tab, "blob"),
            "verdict": "bad",
        },
    )
    assert stale.status_code == 409
    why = f"row {row_id} changed since this page showed it (now traces: label"
    assert esc(why) in stale.text
    assert "nothing was written" in stale.text
    assert store.read_row(row_id)["kind"] == "traces"  # type: ignore[index]
    assert shown(first_tab, "blob") == shown(second_tab, "blob")


def test_a_row_changed_from_the_shell_is_a_conflict_not_an_overwrite(
    project: Path, store: Store, client: TestClient
) -> None:
    row_id = queue_ids(client)[0]
    page = client.get(f"/queue?id={row_id}").text
    machine(project, "rewrite", row_id, "--as", "edited in the shell")
    answer = client.post(
        "/queue/rewrite",
        data={
            "csrf": CSRF,
            "id": row_id,
            "blob": shown(page, "blob"),
            "verdict": "good",
            "text": "from the page",
        },
    )
    assert answer.status_code == 409
    after = store.read_row(row_id)
    assert after is not None and after["kind"] == "observed"
    assert rows.final_answer(after) == "edited in the shell"


def test_undo_of_a_commit_the_page_did_not_show_is_refused(
    project: Path, store: Store, client: TestClient
) -> None:
    seen = shown(client.get("/queue").text, "head")
    row_id = queue_ids(client)[0]
    machine(project, "label", row_id, "good")  # from the shell meanwhile
    newest = git(store.path, "rev-parse", "HEAD").strip()
    answer = client.post("/undo", data={"csrf": CSRF, "head": seen, "back": "/queue"})
    assert answer.status_code == 409
    assert "the store changed since this page showed it" in answer.text
    assert git(store.path, "rev-parse", "HEAD").strip() == newest


def test_a_label_that_is_not_good_or_bad_is_refused(
    store: Store, client: TestClient
) -> None:
    row_id = queue_ids(client)[0]
    answer = label(client, row_id, "meh")
    assert answer.status_code == 400
    assert "Error: label must be good or bad, not &#39;meh&#39;" in answer.text


def test_an_empty_queue_says_so_and_reloads_when_rows_arrive(
    project: Path,
) -> None:
    machine(project, "good", "--session", str(PI_SESSIONS / "basic.jsonl"))
    store = Store.open(Path(git_dir(project)))
    client = client_for(store)
    page = client.get("/queue").text
    assert "Nothing to review" in page
    assert 'data-reload="on-change"' in page


def test_tool_output_with_markup_is_shown_as_text_never_run(
    store: Store, client: TestClient
) -> None:
    row = hostile_row()
    turns.commit(store, row, Redaction.CHECK)
    for path in (f"/queue?id={row['id']}", f"/rows/{row['id']}", "/browse", "/diff"):
        page = client.get(path).text
        assert "<script>alert" not in page, path
        assert "<img src=x" not in page, path
    page = client.get(f"/queue?id={row['id']}").text
    assert "&lt;script&gt;alert(&#39;tool&#39;)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "&lt;/textarea&gt;&lt;script&gt;" in page  # the editor cannot be closed
    assert 'name="&lt;b&gt;bold&lt;/b&gt;"' not in page
    assert "&lt;b&gt;bold&lt;/b&gt;" in page  # a tool name with markup


# -- helpers ---------------------------------------------------------------------


def _turn(name: str) -> Any:
    return pi.read_turn(PI_SESSIONS / f"{name}.jsonl")[0]


def _session(name: str) -> str:
    return str(_turn(name).session_id)


def git_dir(project: Path) -> str:
    from machine_git.core import paths

    return str(paths.store_path(project))


def hostile_row() -> Any:
    """An observed run whose tool output, answer and tool name carry markup."""
    turn = _turn("basic")
    row = loose(rows.build(turn, label="observed"))
    row["source"]["session_id"] = "hostile-session"
    row["id"] = rows.make_id("pi", "hostile-session", turn.entry_ids, "observed")
    calls = row["trajectory"][2]["tool_calls"]
    calls[0]["name"] = "<b>bold</b>"
    row["trajectory"][3]["content"] = "<script>alert('tool')</script>"
    row["trajectory"][-1]["content"] = (
        "<img src=x onerror=alert(1)></textarea><script>alert(2)</script>"
    )
    row["trajectory"][1]["content"] = "<script>alert('user')</script> fix it"
    return row


def test_a_label_can_carry_a_note(store: Store, client: TestClient) -> None:
    row_id = queue_ids(client)[0]
    answer = label(client, row_id, "bad", note="ignored the failing ls")
    assert answer.status_code == 303
    after = store.read_row(row_id)
    assert after is not None and after["note"] == "ignored the failing ls"
    assert last_message(store).startswith(f"label {row_id} observed -> rejected: ")
    assert "\n\nignored the failing ls\n\nMachine-Action: label\n" in (
        last_message(store)
    )
