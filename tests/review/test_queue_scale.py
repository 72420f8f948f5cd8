"""The Queue at scale: its order, pages of 50, filters, bulk labels, undo and redo."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from machine_git.core import jsonio
from machine_git.rows import rows
from machine_git.sessions import pi
from machine_git.store.store import Change
from machine_git.store.store import Redaction
from machine_git.store.store import Snapshot
from machine_git.store.store import Store
from tests.conftest import PI_SESSIONS
from tests.conftest import git
from tests.helpers import loose
from tests.review.conftest import CSRF
from tests.review.conftest import client_for
from tests.review.conftest import machine


def listed(client: TestClient, query: str = "") -> list[str]:
    """The row ids the queue's list shows, in its order."""
    page = client.get(f"/queue/list?{query}").text
    return re.findall(r'<a href="/queue\?[^"]*id=([0-9a-f]{12})"><code>', page)


def total(client: TestClient, query: str = "") -> int:
    page = client.get(f"/queue/list?{query}").text
    found = re.search(r'id="queue-total"><b>(\d+)</b>', page)
    assert found, page
    return int(found.group(1))


def hidden(page: str, form: str, name: str) -> str:
    """Hidden field ``name`` of form ``form`` on ``page``."""
    start = page.index(f'<form id="{form}"')
    found = re.search(rf'name="{name}" value="([^"]*)"', page[start:])
    assert found, (form, name)
    return found.group(1).replace("&amp;", "&")


def made_rows(count: int) -> list[dict[str, Any]]:
    """``count`` observed runs of one real Pi turn, as many sessions: a host,
    a model and a day each, by turns."""
    turn = pi.read_turn(PI_SESSIONS / "basic.jsonl")[0]
    made = []
    for n in range(count):
        row = copy.deepcopy(loose(rows.build(turn, label="observed")))
        session = f"scale-{n:03d}"
        row["source"].update(
            session_id=session,
            host=("pi", "claude")[n % 2],
            model=("model-a", "model-b", "model-c")[n % 3],
        )
        row["created_at"] = f"2026-10-{1 + n % 20:02d}T10:{n % 60:02d}:00.000Z"
        row["id"] = rows.make_id("pi", session, turn.entry_ids, "observed")
        row["trajectory"][1]["content"] = f"task number {n} " + (
            "needle" if n % 5 == 0 else "hay"
        )
        made.append(row)
    return made


def import_rows(store: Store, made: list[dict[str, Any]]) -> None:
    """All of ``made`` in one commit, as an import writes them."""

    def plan(snap: Snapshot) -> Change:
        files: dict[str, bytes | None] = {
            rows.row_path(r["id"]): jsonio.canonical(r) for r in made
        }
        return Change(
            summary=f"import {len(made)} rows",
            files=files,
            trailers={"Action": "import"},
            redaction=Redaction.CHECK,
        )

    store.write(plan)


def test_the_queue_and_machine_observed_agree_on_order(
    project: Path, store: Store, client: TestClient
) -> None:
    def observed() -> list[str]:
        found = json.loads(machine(project, "observed", "-n", "100", "--json"))
        return [r["id"] for r in found]

    assert listed(client) == observed()
    # A rewrite that keeps a row in the queue is its newest change: both put
    # it first, on a server whose order was read before (kept up to date).
    last = observed()[-1]
    machine(project, "rewrite", last, "--as", "a better answer")
    assert observed()[0] == last
    assert listed(client) == observed()
    # A fresh server reads the same order from history.
    assert listed(client_for(store)) == observed()
    # sort=made: by when the run was made, newest first; -asc reverses.
    made = listed(client, "sort=made")
    times = [store.read_row(i)["created_at"] for i in made]  # type: ignore[index]
    assert times == sorted(times, reverse=True)
    assert listed(client, "sort=made-asc") == made[::-1]
    assert client.get("/queue?sort=sideways").status_code == 400


def test_the_queue_pages_50_at_a_time_with_filters_and_a_count(store: Store) -> None:
    import_rows(store, made_rows(120))
    client = client_for(store)
    assert total(client) == 126  # and the six of the store
    first = listed(client)
    assert len(first) == 50
    second = listed(client, "page=2")
    third = listed(client, "page=3")
    assert (len(second), len(third)) == (50, 26)
    assert not set(first) & set(second)
    page = client.get("/queue?page=2").text
    assert f'data-row-id="{second[0]}"' in page  # a page opens at its first row
    assert "Run 51 of 126" in page
    assert 'data-key="]" href="/queue?page=3"' in page
    assert 'data-key="[" href="/queue?page=1"' in page
    # Filters: host, model, label, dates and text; the count follows.
    assert total(client, "host=claude") == 60
    assert total(client, "host=claude&model=model-a") == 20
    assert total(client, "q=needle") == 24
    assert total(client, "from=2026-10-01&to=2026-10-02") == 12
    assert total(client, "kind=traces") == 1
    assert total(client, "kind=any&label=good") == 2
    assert total(client, "kind=any") == 129
    # The card's links keep the view.
    page = client.get("/queue?host=claude&q=needle").text
    assert "Run 1 of 12" in page
    assert re.search(
        r'data-key="n" href="/queue\?host=claude&amp;q=needle&amp;id=', page
    )


def test_a_filtered_set_is_labeled_in_one_commit_and_undone_in_one(
    project: Path, store: Store
) -> None:
    made = made_rows(30)
    import_rows(store, made)
    client = client_for(store)
    view = "host=claude&q=needle"
    matching = listed(client, view)
    assert len(matching) == 3
    page = client.get(f"/queue?{view}").text
    before = git(store.path, "rev-parse", "HEAD").strip()
    answer = client.post(
        "/queue/bulk",
        data={
            "csrf": CSRF,
            "head": hidden(page, "bulk", "head"),
            "view": hidden(page, "bulk", "view"),
            "scope": "all",
            "verdict": "bad",
            "note": "ignored the task",
        },
        follow_redirects=False,
    )
    assert answer.status_code == 303
    assert answer.headers["location"] == "/queue?host=claude&q=needle"
    assert git(store.path, "rev-list", "--count", f"{before}..HEAD").strip() == "1"
    message = git(store.path, "log", "-1", "--format=%B")
    assert message.startswith(
        "label 3 rows observed -> rejected: ignored the task\n\nignored the task\n\n"
    )
    assert "\n".join(sorted(matching)) in message
    assert "Machine-Action: label\nMachine-Rows: 3\nMachine-Kind: rejected\n" in message
    for row_id in matching:
        row = store.read_row(row_id)
        assert row is not None and (row["kind"], row["note"]) == (
            "rejected",
            "ignored the task",
        )
    assert listed(client, view) == []
    log = machine(project, "log", "-n", "1")
    assert "label  label 3 rows observed -> rejected" in log
    # One undo takes the three back.
    page = client.get("/queue").text
    client.post(
        "/undo",
        data={"csrf": CSRF, "head": hidden(page, "undo", "head"), "back": "/queue"},
    )
    assert sorted(listed(client, view)) == sorted(matching)
    assert all(store.read_row(i)["kind"] == "observed" for i in matching)  # type: ignore[index]
    # And redo makes them again.
    page = client.get("/queue").text
    assert "redo makes again:" in page
    client.post(
        "/redo",
        data={"csrf": CSRF, "head": hidden(page, "redo", "head"), "back": "/queue"},
    )
    assert all(store.read_row(i)["kind"] == "rejected" for i in matching)  # type: ignore[index]
    assert git(store.path, "log", "-1", "--format=%s").startswith("redo: ")


def test_rows_ticked_are_labeled_and_a_changed_one_refuses_them_all(
    project: Path, store: Store, client: TestClient
) -> None:
    ids = listed(client)
    page = client.get("/queue").text
    form = [
        ("csrf", CSRF),
        ("head", hidden(page, "bulk", "head")),
        ("view", ""),
        ("scope", "picked"),
        ("pick", ids[0]),
        ("pick", ids[2]),
        ("verdict", "good"),
    ]
    machine(project, "label", ids[2], "bad")  # from the shell meanwhile
    before = git(store.path, "rev-parse", "HEAD").strip()
    stale = client.post("/queue/bulk", content=_encoded(form), headers=_FORM)
    assert stale.status_code == 409
    assert f"row {ids[2]} changed since this page showed it" in stale.text
    assert git(store.path, "rev-parse", "HEAD").strip() == before
    page = client.get("/queue").text
    form[1] = ("head", hidden(page, "bulk", "head"))
    form[5] = ("pick", ids[1])
    done = client.post("/queue/bulk", content=_encoded(form), headers=_FORM)
    assert done.status_code == 200  # the queue, after the redirect
    kinds = [store.read_row(i)["kind"] for i in ids[:3]]  # type: ignore[index]
    assert kinds == ["traces", "traces", "rejected"]
    assert git(store.path, "log", "-1", "--format=%s").strip() == (
        "label 2 rows observed -> traces"
    )


def test_a_bulk_label_of_a_row_that_is_not_observed_writes_nothing(
    store: Store, client: TestClient
) -> None:
    page = client.get("/queue?kind=any").text
    tagged = listed(client, "kind=traces")[0]
    before = git(store.path, "rev-parse", "HEAD").strip()
    answer = client.post(
        "/queue/bulk",
        data={
            "csrf": CSRF,
            "head": hidden(page, "bulk", "head"),
            "view": "kind=any",
            "scope": "all",
            "verdict": "bad",
        },
    )
    assert answer.status_code == 400
    refused = re.search(
        r"row ([0-9a-f]{12}) is a (\w+) row, not observed; nothing was written",
        answer.text,
    )
    assert refused, answer.text
    assert refused.group(1) in {tagged, *listed(client, "kind=train")}
    assert git(store.path, "rev-parse", "HEAD").strip() == before


_FORM = {"content-type": "application/x-www-form-urlencoded"}


def _encoded(pairs: list[tuple[str, str]]) -> bytes:
    from urllib.parse import urlencode

    return urlencode(pairs).encode()
