"""The audit: recomputed from history, and remembered only as a shortcut."""

from __future__ import annotations

import json
from typing import Any

from machine_git import hooks
from machine_git import releases
from machine_git.releases import audit
from machine_git.store.store import BRANCH
from machine_git.store.store import WORK
from machine_git.store.store import Change
from machine_git.store.store import Store
from tests.conftest import Run
from tests.conftest import git
from tests.train.conftest import FakeTinker

PATH = "releases/BR-014/prereg.json"


def tamper(store: Store) -> str:
    record = json.loads(git(store.path, "show", f"HEAD:{PATH}"))
    record["title"] = "a better title"
    data = (json.dumps(record, indent=2, sort_keys=True) + "\n").encode()
    return str(store.write(lambda snap: Change("retitle", {PATH: data})))


def fresh(store: Store) -> audit.Audit:
    assert store.head is not None
    return audit.verify(store.repo, [store.head.id])


def test_the_remembered_audit_only_walks_new_commits_and_agrees(
    trained: dict[str, Any], run: Run
) -> None:
    store = Store.open(trained["store"])
    cache = store.path / WORK / audit.CACHE
    assert run("release", "new", "BR-014", "--run", trained["run"]).exit_code == 0
    assert cache.exists() and oct(cache.stat().st_mode & 0o777) == "0o600"
    # The command audited after its commit too (to report tampering elsewhere).
    assert json.loads(cache.read_bytes())["tip"] == str(store.head.id)  # type: ignore[union-attr]
    assert releases.audit_store(store).tampered == []
    assert json.loads(cache.read_bytes())["tip"] == str(store.head.id)  # type: ignore[union-attr]
    edit = tamper(store)
    found = releases.audit_store(store)
    assert [str(t) for t in found.tampered] == [
        f"{PATH}: $.title changed in commit {edit[:12]} "
        "(release records are append-only)"
    ]
    assert found == fresh(store)


def test_a_damaged_or_stale_memory_means_a_full_walk(
    trained: dict[str, Any], run: Run
) -> None:
    store = Store.open(trained["store"])
    assert run("release", "new", "BR-014", "--run", trained["run"]).exit_code == 0
    edit = tamper(store)
    cache = store.path / WORK / audit.CACHE
    cache.write_bytes(b"{not json")
    assert releases.audit_store(store) == fresh(store)
    assert len(fresh(store).tampered) == 1
    # A memory of a tip the branch no longer descends from is not used.
    assert store.head is not None
    stale = json.loads(cache.read_bytes())
    stale["tampered"] = []
    cache.write_text(json.dumps(stale))
    store.repo.references[BRANCH].set_target(store.head.parents[0].id)
    assert releases.audit_store(store).tampered == []  # the edit is gone
    store.repo.references[BRANCH].set_target(edit)
    cache.write_text(json.dumps({**stale, "tip": str(store.head.parents[0].id)}))
    assert [t.commit for t in releases.audit_store(store).tampered] == [edit]


def test_a_merge_that_joins_two_histories_of_one_release_is_tampering(
    trained: dict[str, Any], run: Run, tmp_path: Any
) -> None:
    from machine_git.sync import sharing as sync
    from tests import helpers
    from tests.sync.test_hooks import put

    def answering(right: bool) -> releases.Sampler:
        def sample(cases: list[Any], base: str, checkpoint: str) -> list[Any]:
            return [
                {"output": c.reference if right else "I do not know."} for c in cases
            ]

        return sample

    a = Store.open(trained["store"])
    assert run("release", "new", "BR-002", "--run", trained["run"]).exit_code == 0
    b = Store.create(tmp_path / "b")
    # A row of its own: B's first commit may be byte-identical to A's.
    put(b, helpers.train_row("b1b1b1b1b1b1"))
    sync.add_remote(b, "a", str(a.path))
    assert sync.pull(b, "a", audit=hooks.audit).status == "merge"
    # Each store checks the same release on its own: A passes and tries it,
    # B fails. Merging keeps B's check 1 but takes A's trial, which names
    # A's check 1 by its sha256.
    assert releases.check(a, "BR-002", answering(True), 64)[0].passed
    assert releases.trial(a, "BR-002").commit is not None
    assert not releases.check(b, "BR-002", answering(False), 64)[0].passed
    pulled = sync.pull(b, "a", prefer="ours", audit=hooks.audit)
    assert pulled.status == "merge"
    shown = releases.show(b, "BR-002")
    assert shown.status == "tampered"
    assert shown.tampered == [
        f"releases/BR-002/trial.json: $.last_check.sha256 joined in merge commit "
        f"{str(pulled.commit)[:12]} to records it does not name (two histories of "
        "one release)"
    ]


def test_a_step_that_also_writes_something_else_taints_its_release(
    trained: dict[str, Any], run: Run, fake: FakeTinker
) -> None:
    from machine_git.core import jsonio
    from machine_git.core.errors import INVALID
    from machine_git.releases import steps
    from machine_git.rows import rows
    from tests.releases.conftest import CHECKPOINT

    store = Store.open(trained["store"])
    assert run("release", "new", "BR-015", "--run", trained["run"]).exit_code == 0
    refs = trained["refs"]
    fake.answers = {"Turn one": refs["Turn one"], "Turn two": refs["Turn two"]}
    assert run("release", "check", "BR-015", "--yes").exit_code == 0
    # The trial record is exactly right; the student it sets is not.
    made = steps.trial(store.snapshot(), "BR-015", rows.now())
    value = json.loads(made.files["settings.json"] or b"")
    files = {**made.files, "settings.json": jsonio.canonical({**value, "student": "x"})}
    forged = store.write(lambda snap: Change(made.summary, files, made.trailers))
    refused = run("release", "activate", "BR-015")
    assert refused.exit_code == INVALID
    assert refused.stderr == (
        "Error: BR-015 was tampered with: settings.json: $.student added in "
        f"commit {str(forged)[:12]}, but release-trial writes "
        f'"{CHECKPOINT}" from the state before it (not "x"); '
        "preregister a new release id\n"
    )
