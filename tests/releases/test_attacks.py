"""Playing the adversary: someone who wants a release to pass, with a clone and push.

Every attack goes through a real ``machine clone`` and the ``git`` CLI. With
the store's pre-receive hook in place the push is refused; with the hook gone
(a store whose hooks were never installed, or removed) the push lands, and
then every release command refuses the tampered release, ``release show`` and
``validate --store`` name the file and the commit, and nothing is activated.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from machine_git import hooks
from machine_git.core import jsonio
from machine_git.core.errors import INVALID
from machine_git.rows import rows
from machine_git.store.store import Store
from tests import helpers
from tests.conftest import Run
from tests.conftest import git
from tests.releases.conftest import CHECKPOINT
from tests.releases.conftest import git_in
from tests.releases.conftest import head
from tests.train.conftest import FakeTinker

APPEND_ONLY = "(release records are append-only)"
UNSIGNED = (
    "which is not signed by an allowed signer"
    " (written before signing? see: machine release signers adopt)"
)


@pytest.fixture
def clone(trained: dict[str, Any], run: Run, tmp_path: Path) -> Path:
    """Where the test clones the store, once its own commands are done."""
    return tmp_path / "clone"


def make_clone(run: Run, target: Path) -> Path:
    done = run("clone", str(target))
    assert done.exit_code == 0, done.stderr
    return target


def commit_all(where: Path, message: str, *extra: str) -> str:
    done = git_in(where, "commit", "-q", "-a", "-m", message, *extra)
    assert done.returncode == 0, done.stdout + done.stderr
    return git_in(where, "rev-parse", "HEAD").stdout.strip()


def push(where: Path) -> tuple[int, list[str]]:
    """Push the clone; the hook's own lines (git prefixes them ``remote:``)."""
    done = git_in(where, "push", "-q", "origin", "main")
    said = [
        line.removeprefix("remote: ").rstrip()
        for line in done.stderr.splitlines()
        if line.startswith("remote: ")
    ]
    return done.returncode, said


def without_hook(store: Path) -> None:
    """A store whose pre-receive hook is gone: pushes are no longer checked."""
    (store / "hooks" / "pre-receive").unlink()


def edit_json(path: Path, change: Any) -> None:
    """Edit a record the way a person would: json, not machine's writer."""
    value = json.loads(path.read_text())
    change(value)
    path.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n")


def failing_check(run: Run, fake: FakeTinker, refs: dict[str, str], rid: str) -> None:
    """Check ``rid`` with a candidate that regresses on turn one: FAIL."""
    fake.answers = {"Turn two": refs["Turn two"], "Turn three": refs["Turn three"]}
    checked = run("release", "check", rid, "--yes")
    assert checked.exit_code == 1, checked.stderr
    assert checked.stdout.startswith(f"{rid} check 1: FAIL (")


def settings(store: Path) -> dict[str, Any]:
    return dict(orjson.loads(git(store, "show", "HEAD:settings.json") or "{}"))


def student_of(store: Path) -> Any:
    listed = git(store, "ls-tree", "--name-only", "HEAD", "settings.json")
    return settings(store).get("student_release") if listed else None


# -- re-registering an id after deleting it ------------------------------------------


def test_deleting_a_failed_release_to_reuse_its_id_is_refused(
    trained: dict[str, Any], run: Run, fake: FakeTinker, clone: Path
) -> None:
    store = trained["store"]
    assert run("release", "new", "BR-005", "--run", trained["run"]).exit_code == 0
    prereg_commit = head(store)
    failing_check(run, fake, trained["refs"], "BR-005")
    before = head(store)
    make_clone(run, clone)
    assert git_in(clone, "rm", "-r", "-q", "releases/BR-005").returncode == 0
    removal = commit_all(clone, "start BR-005 over")
    code, said = push(clone)
    assert code != 0
    assert said == [
        f"commit {removal[:12]}: start BR-005 over",
        f"releases/BR-005/checks/001.json: removed in commit {removal[:12]} "
        + APPEND_ONLY,
        f"releases/BR-005/prereg.json: removed in commit {removal[:12]} " + APPEND_ONLY,
        f"releases/BR-005/checks/001.json: removed in commit {removal[:12]}, "
        + UNSIGNED,
        "machine: push rejected: 1 commit changes release records that only "
        "machine's release commands write; nothing was stored",
    ]
    assert head(store) == before
    # The same push into a store without the hook lands; the id stays taken.
    without_hook(store)
    assert push(clone)[0] == 0
    assert head(store) == removal
    loose = clone.parent / "loose.json"
    loose.write_text(json.dumps({"metrics": [{"metric": "exact", "min_delta": -1}]}))
    again = run("release", "new", "BR-005", "--run", trained["run"], "--gates", loose)
    assert again.exit_code == INVALID
    assert again.stderr == (
        "Error: BR-005 was tampered with: releases/BR-005/checks/001.json: removed "
        f"in commit {removal[:12]} {APPEND_ONLY}; preregister a new release id\n"
    )
    assert head(store) == removal
    shown = run("release", "show", "BR-005")
    assert shown.exit_code == INVALID
    assert shown.stdout.splitlines()[-4:] == [
        "state: tampered",
        f"tampered: releases/BR-005/checks/001.json: removed in commit "
        f"{removal[:12]} {APPEND_ONLY}",
        f"tampered: releases/BR-005/prereg.json: removed in commit "
        f"{removal[:12]} {APPEND_ONLY}",
        f"tampered: releases/BR-005/checks/001.json: removed in commit "
        f"{removal[:12]}, {UNSIGNED}",
    ]
    listed = run("release", "list")
    assert listed.stdout == "BR-005  tampered      -  (no prereg.json)\n"
    checked = run("validate", "--store")
    assert checked.exit_code == INVALID
    assert checked.stdout.splitlines() == [
        f"releases/BR-005/checks/001.json:1: $: removed in commit {removal[:12]} "
        + APPEND_ONLY,
        f"releases/BR-005/prereg.json:1: $: removed in commit {removal[:12]} "
        + APPEND_ONLY,
        f"releases/BR-005/checks/001.json:1: $: removed in commit {removal[:12]}, "
        + UNSIGNED,
    ]
    assert checked.stderr == "checked 6 rows: all valid; 1 release tampered with\n"
    as_json = orjson.loads(run("validate", "--store", "--json").stdout)
    assert (as_json["invalid"], len(as_json["tampered"])) == (0, 3)
    assert as_json["tampered"][0]["file"] == "releases/BR-005/checks/001.json"
    # A fresh id is still fine, and the first registration is what history says.
    fresh = run("release", "new", "BR-007", "--run", trained["run"])
    assert fresh.exit_code == 0, fresh.stderr
    assert git(store, "log", "--format=%H", "-1", prereg_commit) != ""


def test_a_release_id_is_never_reused_even_when_its_removal_was_clean(
    trained: dict[str, Any], run: Run
) -> None:
    # Even a store writer that bypasses every hook (machine's own Store.write,
    # as a script might) cannot make an id free again.
    from machine_git.store.store import Change

    store = Store.open(trained["store"])
    assert run("release", "new", "BR-008", "--run", trained["run"]).exit_code == 0
    first = head(trained["store"])
    gone = store.write(
        lambda snap: Change("drop BR-008", {"releases/BR-008/prereg.json": None})
    )
    again = run("release", "new", "BR-008", "--run", trained["run"])
    assert again.exit_code == INVALID
    assert again.stderr == (
        "Error: BR-008 was tampered with: releases/BR-008/prereg.json: removed in "
        f"commit {str(gone)[:12]} {APPEND_ONLY}; preregister a new release id\n"
    )
    assert first in git(trained["store"], "log", "--format=%H")


# -- a forged trailer after a gate edit ---------------------------------------------


def test_a_gate_edit_and_a_forged_release_new_trailer_are_refused(
    trained: dict[str, Any], run: Run, fake: FakeTinker, clone: Path
) -> None:
    store = trained["store"]
    assert run("release", "new", "BR-001", "--run", trained["run"]).exit_code == 0
    before = head(store)
    make_clone(run, clone)
    prereg = clone / "releases" / "BR-001" / "prereg.json"
    edit_json(prereg, lambda v: v["gates"].pop("no_regress"))
    edit = commit_all(clone, "loosen gates")
    forged = git_in(
        clone,
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "release new BR-001: re-freeze",
        "--trailer",
        "Machine-Action: release-new",
        "--trailer",
        "Machine-Release: BR-001",
    )
    assert forged.returncode == 0, forged.stderr
    trailer = git_in(clone, "rev-parse", "HEAD").stdout.strip()
    code, said = push(clone)
    assert code != 0
    assert said == [
        f"commit {edit[:12]}: loosen gates",
        f"releases/BR-001/prereg.json: $.gates.no_regress changed in commit "
        f"{edit[:12]} {APPEND_ONLY}",
        f"releases/BR-001/prereg.json: changed in commit {edit[:12]}, {UNSIGNED}",
        f"commit {trailer[:12]}: release new BR-001: re-freeze",
        f"releases/BR-001: release-new claimed by the trailers of commit "
        f"{trailer[:12]}, which writes no release record (a forged trailer)",
        "machine: push rejected: 2 commits change release records that only "
        "machine's release commands write; nothing was stored",
    ]
    assert head(store) == before
    # Without the hook the push lands, and the edited gates are never used.
    without_hook(store)
    assert push(clone)[0] == 0
    fake.answers = {"Turn two": trained["refs"]["Turn two"]}
    fake.calls.clear()
    checked = run("release", "check", "BR-001", "--yes")
    assert checked.exit_code == INVALID
    assert checked.stderr == (
        "Error: BR-001 was tampered with: releases/BR-001/prereg.json: "
        f"$.gates.no_regress changed in commit {edit[:12]} {APPEND_ONLY}; "
        "preregister a new release id\n"
    )
    assert "sample" not in fake.names()
    assert head(store) == trailer
    listed = run("release", "list")
    assert listed.stdout.startswith("BR-001  tampered ")


# -- hand-edited results -------------------------------------------------------------


def test_a_hand_set_pass_and_trial_stamp_activate_nothing(
    trained: dict[str, Any], run: Run, fake: FakeTinker, clone: Path
) -> None:
    store = trained["store"]
    assert run("release", "new", "BR-006", "--run", trained["run"]).exit_code == 0
    failing_check(run, fake, trained["refs"], "BR-006")
    before = head(store)
    make_clone(run, clone)
    folder = clone / "releases" / "BR-006"
    edit_json(folder / "checks" / "001.json", lambda v: v.update(passed=True))
    (folder / "state.json").write_text(
        json.dumps({"status": "trial", "trial": {"checkpoint": CHECKPOINT}}) + "\n"
    )
    assert git_in(clone, "add", "releases").returncode == 0
    forged = commit_all(clone, "it passed, really")
    code, said = push(clone)
    assert code != 0
    assert said == [
        f"commit {forged[:12]}: it passed, really",
        f"releases/BR-006/checks/001.json: $.passed changed in commit "
        f"{forged[:12]} {APPEND_ONLY}",
        f"releases/BR-006/state.json: added in commit {forged[:12]}, "
        "but no release step writes it",
        f"releases/BR-006/checks/001.json: changed in commit {forged[:12]}, "
        + UNSIGNED,
        "machine: push rejected: 1 commit changes release records that only "
        "machine's release commands write; nothing was stored",
    ]
    assert head(store) == before
    without_hook(store)
    assert push(clone)[0] == 0
    for command in ("activate", "trial", "check"):
        refused = run("release", command, "BR-006", *(["--yes"] * (command == "check")))
        assert refused.exit_code == INVALID, command
        assert refused.stderr.startswith(
            "Error: BR-006 was tampered with: releases/BR-006/checks/001.json: "
            f"$.passed changed in commit {forged[:12]} {APPEND_ONLY}"
        )
    assert head(store) == forged
    assert student_of(store) is None


def test_a_forged_passing_check_file_is_recomputed_and_refused(
    trained: dict[str, Any], run: Run, fake: FakeTinker, clone: Path
) -> None:
    # Adding a second check whose verdict does not follow from its own outputs.
    assert run("release", "new", "BR-009", "--run", trained["run"]).exit_code == 0
    failing_check(run, fake, trained["refs"], "BR-009")
    make_clone(run, clone)
    checks = clone / "releases" / "BR-009" / "checks"
    value = json.loads((checks / "001.json").read_text())
    value.update(number=2, passed=True)
    (checks / "002.json").write_text(json.dumps(value, indent=2, sort_keys=True))
    assert git_in(clone, "add", "releases").returncode == 0
    forged = commit_all(
        clone,
        "release check BR-009: pass",
        "--trailer",
        "Machine-Action: release-check",
        "--trailer",
        "Machine-Release: BR-009",
    )
    code, said = push(clone)
    assert code != 0
    assert said[1].startswith(
        f"releases/BR-009/checks/002.json: $.passed added in commit {forged[:12]}, "
        "but release-check writes false from the state before it"
    )


# -- activate twice, trial an active release ----------------------------------------


def test_activating_twice_or_trialing_an_active_release_changes_nothing(
    trained: dict[str, Any], run: Run, fake: FakeTinker
) -> None:
    store, refs = trained["store"], trained["refs"]
    assert run("release", "new", "BR-002", "--run", trained["run"]).exit_code == 0
    fake.answers = {"Turn one": refs["Turn one"], "Turn two": refs["Turn two"]}
    assert run("release", "check", "BR-002", "--yes").exit_code == 0
    assert run("release", "trial", "BR-002").exit_code == 0
    activated = run("release", "activate", "BR-002")
    assert activated.exit_code == 0, activated.stderr
    done = head(store)
    stamp = git(store, "show", "HEAD:releases/BR-002/activation.json")
    again = run("release", "activate", "BR-002")
    assert again.exit_code == 0
    assert again.stdout == (
        f"BR-002 is already active (since {done[:12]}); nothing changed\n"
    )
    trial = run("release", "trial", "BR-002")
    assert trial.exit_code == 0
    assert trial.stdout == (
        f"BR-002 is active (since {done[:12]}); a trial would change nothing\n"
    )
    assert head(store) == done
    assert git(store, "show", "HEAD:releases/BR-002/activation.json") == stamp
    assert settings(store)["student_status"] == "default"


def test_a_second_trial_changes_nothing(
    trained: dict[str, Any], run: Run, fake: FakeTinker
) -> None:
    store, refs = trained["store"], trained["refs"]
    assert run("release", "new", "BR-003", "--run", trained["run"]).exit_code == 0
    unchecked = run("release", "trial", "BR-003")
    assert unchecked.exit_code == 1
    assert unchecked.stderr == (
        "Error: BR-003 has not been checked: run 'machine release check BR-003 --yes'\n"
    )
    fake.answers = {"Turn one": refs["Turn one"], "Turn two": refs["Turn two"]}
    assert run("release", "check", "BR-003", "--yes").exit_code == 0
    assert run("release", "trial", "BR-003").exit_code == 0
    done = head(store)
    again = run("release", "trial", "BR-003")
    assert again.exit_code == 0
    assert again.stdout == (
        f"BR-003 is already on trial (since {done[:12]}); nothing changed\n"
    )
    assert head(store) == done


# -- an edited preregistration is never shown as valid ------------------------------


def test_an_edited_preregistration_is_shown_as_tampered(
    trained: dict[str, Any], run: Run
) -> None:
    from machine_git.store.store import Change

    store = Store.open(trained["store"])
    assert run("release", "new", "BR-004", "--run", trained["run"]).exit_code == 0
    path = "releases/BR-004/prereg.json"
    record = json.loads(git(trained["store"], "show", f"HEAD:{path}"))
    record["gates"]["metrics"][0]["min_delta"] = -1.0
    edit = store.write(
        lambda snap: Change(
            "edit gates",
            {path: (json.dumps(record, indent=2, sort_keys=True) + "\n").encode()},
        )
    )
    line = (
        f"releases/BR-004/prereg.json: $.gates.metrics[0].min_delta changed in "
        f"commit {str(edit)[:12]} {APPEND_ONLY}"
    )
    shown = run("release", "show", "BR-004")
    assert shown.exit_code == INVALID
    assert shown.stdout.splitlines()[-2:] == ["state: tampered", f"tampered: {line}"]
    listed = run("release", "list", "--json")
    found = orjson.loads(listed.stdout)
    assert [(r["id"], r["state"]["status"]) for r in found] == [("BR-004", "tampered")]
    assert found[0]["state"]["tampered"] == [line]
    traced = run("lineage", "BR-004")
    assert (traced.exit_code, traced.stdout) == (INVALID, "")
    assert traced.stderr == (
        f"Error: BR-004 was tampered with: {line}; preregister a new release id\n"
    )


# -- what machine writes passes its own hook ----------------------------------------


def test_a_store_with_a_whole_release_cycle_pushes_into_a_hooked_store(
    trained: dict[str, Any], run: Run, fake: FakeTinker, tmp_path: Path
) -> None:
    store, refs = trained["store"], trained["refs"]
    assert run("release", "new", "BR-002", "--run", trained["run"]).exit_code == 0
    fake.answers = {"Turn one": refs["Turn one"], "Turn two": refs["Turn two"]}
    assert run("release", "check", "BR-002", "--yes").exit_code == 0
    assert run("release", "trial", "BR-002").exit_code == 0
    assert run("release", "activate", "BR-002").exit_code == 0
    hub = tmp_path / "hub.git"
    assert (
        git_in(tmp_path, "init", "-q", "--bare", "-b", "main", str(hub)).returncode == 0
    )
    from machine_git.sync import hooks

    hooks.install_store_hooks(hub)
    assert run("remote", "add", "hub", str(hub)).exit_code == 0
    pushed = run("push", "hub")
    assert pushed.exit_code == 0, pushed.stderr
    assert head(hub) == head(store)
    # and an unrelated hand edit in a clone still goes through (a row; a
    # file machine does not write, like notes.txt, is refused: issue 25)
    clone = make_clone(run, tmp_path / "clone")
    row = clone / rows.row_path("e0e0e0e0e0e0")
    row.parent.mkdir(parents=True)
    row.write_bytes(jsonio.canonical(helpers.train_row("e0e0e0e0e0e0")))
    assert git_in(clone, "add", "rows").returncode == 0
    commit_all(clone, "a row by hand")
    assert push(clone) == (0, [])
    (clone / "notes.txt").write_text("why BR-002\n")
    assert git_in(clone, "add", "notes.txt").returncode == 0
    commit_all(clone, "a note")
    code, said = push(clone)
    assert code != 0
    assert said[1:] == [
        "notes.txt:1: $: not a file machine writes",
        "machine: push rejected: 1 refused file in 1 commit; nothing was stored",
    ]


# -- history rewritten, undone or merged ---------------------------------------------


def test_a_forced_push_that_drops_release_history_is_refused(
    trained: dict[str, Any], run: Run, fake: FakeTinker, clone: Path
) -> None:
    store = trained["store"]
    assert run("release", "new", "BR-011", "--run", trained["run"]).exit_code == 0
    failing_check(run, fake, trained["refs"], "BR-011")
    before = head(store)
    make_clone(run, clone)
    # Rewind past the failed check and push the shorter history over it.
    assert git_in(clone, "reset", "-q", "--hard", "HEAD~1").returncode == 0
    (clone / "notes.txt").write_text("nothing to see\n")
    assert git_in(clone, "add", "notes.txt").returncode == 0
    rewritten = commit_all(clone, "a note")
    done = git_in(clone, "push", "-q", "--force", "origin", "main")
    assert done.returncode != 0
    assert (
        f"remote: machine: push rejected: refs/heads/main would drop history holding "
        f"release records ({before[:12]} is not an ancestor of {rewritten[:12]}); "
        "release history is append-only" in done.stderr
    )
    assert head(store) == before


def test_undo_cannot_revert_a_release_step(trained: dict[str, Any], run: Run) -> None:
    store = trained["store"]
    assert run("release", "new", "BR-012", "--run", trained["run"]).exit_code == 0
    before = head(store)
    undone = run("undo")
    assert undone.exit_code == 1
    assert undone.stderr == (
        f"Error: the step to take back (release new BR-012: release of "
        f"{trained['run']}) "
        "wrote release records, which are append-only: it cannot be undone\n"
    )
    assert head(store) == before


def test_a_pulled_release_stays_verified_in_the_other_store(
    trained: dict[str, Any], run: Run, fake: FakeTinker, tmp_path: Path
) -> None:
    from machine_git import releases
    from machine_git.sync import sharing as sync
    from tests import helpers
    from tests.sync.test_hooks import put

    refs = trained["refs"]
    assert run("release", "new", "BR-002", "--run", trained["run"]).exit_code == 0
    fake.answers = {"Turn one": refs["Turn one"], "Turn two": refs["Turn two"]}
    assert run("release", "check", "BR-002", "--yes").exit_code == 0
    assert run("release", "trial", "BR-002").exit_code == 0
    assert run("release", "activate", "BR-002").exit_code == 0
    other = Store.create(tmp_path / "other")
    put(other, helpers.train_row("b1b1b1b1b1b1"))
    sync.add_remote(other, "a", str(trained["store"]))
    assert sync.pull(other, "a", audit=hooks.audit).status == "merge"
    shown = releases.show(other, "BR-002")
    assert (shown.status, shown.tampered) == ("active", [])
    assert releases.findings(other) == ([], 0)
