from __future__ import annotations

from pathlib import Path

import pytest
from pygit2 import Commit

from machine_git.core.errors import UsageError
from machine_git.history import revs
from machine_git.review.index import Cache
from machine_git.review.index import Filters
from machine_git.review.index import select
from machine_git.review.index import summarize
from machine_git.store.store import Store
from tests.helpers import traces_row
from tests.review.conftest import machine
from tests.review.conftest import same_run_elsewhere


def test_a_summary_holds_what_browse_filters_on() -> None:
    row = traces_row(note="Slow but right", original_answer="Fixd.")
    row["trajectory"][4]["ok"] = False
    summary = summarize(row, "b" * 40)
    assert summary["kind"] == "traces" and summary["host"] == "pi"
    assert summary["tools"] == ["bash"]
    assert summary["error"] is True
    assert summary["note"] == "Slow but right"
    assert summary["words"] == "fix it"
    # user text, the answer and the agent's original answer, for search
    assert summary["text"] == "fix it\nfixed.\nfixd."


def test_an_error_is_a_failed_result_or_the_error_prefix() -> None:
    row = traces_row()
    assert summarize(row, "")["error"] is False
    row["trajectory"][4]["content"] = "Error: exit 1"
    del row["trajectory"][4]["ok"]
    assert summarize(row, "")["error"] is True


def test_an_index_brought_up_to_date_equals_one_built_afresh(
    project: Path, store: Store
) -> None:
    cache = Cache()
    old = cache.at(store, revs.resolve(store, None))
    observed = machine(project, "tagged", "--kind", "observed").split()[0]
    machine(project, "label", observed, "good")
    train = machine(project, "tagged", "--kind", "train").split()[0]
    machine(project, "rm", train)
    machine(
        project, "good", "--trace", "--session", same_run_elsewhere(project, "mixed")
    )
    head = revs.resolve(store, None)
    updated = cache.at(store, head)
    fresh = Cache().at(store, head)
    assert updated.rows == fresh.rows
    assert updated.ordered == fresh.ordered
    assert train in old.rows and train not in updated.rows
    assert updated.rows[observed]["kind"] == "traces"
    assert len(updated.rows) == len(old.rows)  # -1 removed, +1 tagged
    # Going back to an older commit works from the newest index too.
    before = store.repo.revparse_single(old.commit).peel(Commit)
    assert cache.at(store, before).rows == old.rows


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        (Filters(), 9),
        (Filters(kind="observed"), 6),
        (Filters(kind="observed", tool="bash"), 4),
        (Filters(errors=True), 1),
        (Filters(query="notes nonexistent-dir"), 2),
        (Filters(query="nonexistent-dir", kind="rejected"), 1),
        (Filters(note="TERSE"), 1),
        (Filters(since="2999-01-01"), 0),
    ],
)
def test_filters(store: Store, filters: Filters, expected: int) -> None:
    index = Cache().at(store, revs.resolve(store, None))
    assert len(select(index, filters)) == expected


def test_bad_dates_are_refused() -> None:
    with pytest.raises(UsageError, match="bad to date '1/2/2026': expected YYYY-MM-DD"):
        Filters(until="1/2/2026")
