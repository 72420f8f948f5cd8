from __future__ import annotations

import json
import re
from pathlib import Path

from starlette.testclient import TestClient

from machine_git.store.store import Store
from tests.helpers import loose
from tests.review.conftest import machine
from tests.review.test_queue import esc


def changes(page: str) -> list[tuple[str, str]]:
    """(status, row id) of each row change on a diff page, in order."""
    return re.findall(
        r'<section class="change (\w+)" id="change-([0-9a-f]{12})">', page
    )


def test_the_diff_of_two_versions_matches_machine_diff(
    project: Path, client: TestClient
) -> None:
    bad = machine(project, "tagged", "--kind", "rejected").split()[0]
    machine(project, "rewrite", bad, "--as", "notes.md has a '# Notes' header.")
    machine(project, "version", "v2")
    page = client.get("/diff?a=v1&b=v2").text
    cli = json.loads(machine(project, "diff", "v1", "v2", "--json"))
    assert changes(page) == [(r["status"], r["id"]) for r in cli["rows"]]
    assert f'<p id="diff-total">{len(cli["rows"])} rows changed</p>' in page
    # The summary per kind.
    assert (
        '<span class="kind kind-observed">observed</span></td><td class="ins">+6'
        in page
    )
    # The rewritten answer: its JSON path, the old and new words marked.
    modified = page[page.index(f'id="change-{bad}"') :]
    modified = modified[: modified.index("</section>")]
    paths = re.findall(r'<td class="path"><code>([^<]+)</code>', modified)
    assert paths == [
        f["path"] for r in cli["rows"] if r["id"] == bad for f in r["fields"]
    ]
    assert "$.messages[1].content" in paths and "$.original_answer" in paths
    assert '<span class="del">starts with &#34;</span># Notes' in modified
    assert '<span class="ins">has a &#39;</span># Notes' in modified
    assert '<span class="ins">&#39; header</span>.' in modified
    assert '<span class="absent">(absent)</span>' in modified  # no original before


def test_the_default_diff_is_the_last_commit(project: Path, client: TestClient) -> None:
    observed = machine(project, "tagged", "--kind", "observed").split()[0]
    machine(project, "label", observed, "good")
    page = client.get("/diff").text
    assert changes(page) == [("moved", observed)]
    assert "observed → traces" in page
    # One commit named by b alone: what that commit changed.
    assert changes(client.get("/diff?b=HEAD~1").text) != changes(page)


def test_a_trajectory_change_is_aligned_record_by_record(
    project: Path, store: Store, client: TestClient
) -> None:
    row_id = machine(project, "tagged", "--kind", "observed").split()[0]
    row = loose(store.read_row(row_id))
    assert row is not None
    inserted = {
        "role": "assistant",
        "content": "Let me check first.",
        "timestamp": row["trajectory"][1]["timestamp"],
    }
    row["trajectory"].insert(2, inserted)
    edited = project / "row.json"
    edited.write_text(json.dumps(row))
    from machine_git.tagging import edits

    edits.replace(store, row_id, row)
    page = client.get("/diff").text
    paths = re.findall(r"<br><code>([^<]+)</code></td>", page)
    assert paths == ["$.trajectory[2]"]  # one added record, not every later index
    assert '<td class="path"><span class="label">record 2</span><br>' in page
    # Shown as a record (who said it, its text), not as JSON.
    assert re.search(
        r'<div class="record ins rec-assistant">\s*<div class="who">assistant</div>'
        r'\s*<pre class="text">Let me check first.</pre>',
        page,
    )
    assert esc('"role": "assistant"') not in page


def test_a_diff_by_run_id_and_date(client: TestClient, store: Store) -> None:
    assert client.get("/diff?a=@{2000-01-01}").status_code == 404
    page = client.get("/diff?a=@{2999-01-01}&b=HEAD")
    assert page.status_code == 200
    assert "0 rows changed" in page.text
    wrong = client.get("/diff?a=no-such-version")
    assert wrong.status_code == 404
    assert "unknown revision &#39;no-such-version&#39;" in wrong.text


def test_versions_show_rows_per_kind_and_the_chart(
    project: Path, client: TestClient
) -> None:
    machine(project, "version", "v2")
    page = client.get("/versions").text
    chart = re.search(
        r'<script type="application/json" id="composition-data">(.*?)</script>', page
    )
    assert chart is not None
    data = json.loads(chart.group(1))
    assert data["xnames"] == ["v1", "v2", "now"]
    values = {s["label"]: s["values"] for s in data["series"]}
    assert values == {
        "train": [1.0, 1.0, 1.0],
        "traces": [1.0, 1.0, 1.0],
        "rejected": [1.0, 1.0, 1.0],
        "observed": [0.0, 6.0, 6.0],
    }
    assert '<a href="/diff?a=v1&amp;b=v2">diff from v1</a>' in page
    assert '<script src="/static/vendor/uPlot.iife.min.js" defer></script>' in page
