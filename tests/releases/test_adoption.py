"""Adopting a store written before signing (``machine release signers adopt``).

The old store is made the way the previous machine wrote it: every command
run with signing off (no signature, no ``allowed_signers``), and the audit
then run as today's machine runs it. Adoption is one signed commit; it
never covers a record forged after anything was signed.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from machine_git.core import jsonio
from machine_git.core.errors import INVALID
from machine_git.releases import adoption
from machine_git.releases import steps
from machine_git.releases import trust
from machine_git.releases.audit import CACHE
from machine_git.store import signing
from machine_git.store.store import WORK
from machine_git.store.store import Change
from machine_git.store.store import Store
from tests.conftest import Run
from tests.conftest import git
from tests.releases.conftest import CHECKPOINT
from tests.releases.conftest import git_in
from tests.releases.conftest import head
from tests.releases.test_attacks import make_clone
from tests.releases.test_attacks import push
from tests.releases.test_attacks import without_hook
from tests.releases.test_signing import UNSIGNED
from tests.releases.test_signing import check_at
from tests.releases.test_signing import forge
from tests.releases.test_signing import passing
from tests.train.conftest import FakeTinker


@pytest.fixture
def old_machine(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """Commands write as the machine before signing until the returned upgrade()."""
    wanted, reason = signing.wanted, trust.Walk._reason
    monkeypatch.setattr(signing, "wanted", lambda snap, change: False)
    monkeypatch.setattr(trust.Walk, "_reason", lambda self, commit, parent: None)

    def upgrade() -> None:
        monkeypatch.setattr(signing, "wanted", wanted)
        monkeypatch.setattr(trust.Walk, "_reason", reason)

    return upgrade


@pytest.fixture
def old(
    old_machine: Callable[[], None],
    trained: dict[str, Any],
    run: Run,
    fake: FakeTinker,
) -> dict[str, Any]:
    """A store with a run record, a release and its passing check, all unsigned."""
    store = trained["store"]
    assert run("release", "new", "BR-004", "--run", trained["run"]).exit_code == 0
    passing(run, fake, trained["refs"], "BR-004")
    old_machine()
    (store / WORK / CACHE).unlink()  # the new machine's audit starts over
    assert git(store, "log", "--format=%G?").split() == ["N"] * len(
        git(store, "log", "--format=%h").split()
    )
    return trained


def unsigned_commits(store: Path) -> list[str]:
    """The commits that wrote runs/ or releases/, oldest first."""
    found = git(store, "log", "--reverse", "--format=%H", "--", "runs", "releases")
    return found.split()


def test_an_old_store_is_adopted_then_trial_and_activate_work(
    old: dict[str, Any], run: Run
) -> None:
    store, rid = old["store"], old["run"]
    made = unsigned_commits(store)
    assert len(made) > 3  # the run record (as it trained), new, check
    refused = run("release", "trial", "BR-004")
    assert refused.exit_code == INVALID
    assert f"which is not signed by an allowed signer{trust.HINT}" in refused.stderr
    # The review: every unsigned commit and what it wrote; nothing written.
    before = head(store)
    listed = run("release", "signers", "adopt")
    assert listed.exit_code == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert [line.split("  ")[0] for line in lines[:-1]] == [c[:12] for c in made]
    assert lines[-3] == f"{made[-2][:12]}  releases/BR-004/prereg.json"
    assert lines[-2] == f"{made[-1][:12]}  releases/BR-004/checks/001.json"
    assert {line.split("  ")[1] for line in lines[:-3]} == {f"runs/{rid}.json"}
    assert lines[-1] == f"to vouch for these {len(made)} commits: add --yes"
    assert head(store) == before
    adopted = run("release", "signers", "adopt", "--yes")
    assert adopted.exit_code == 0, adopted.stderr
    commit = head(store)
    assert adopted.stdout.splitlines()[-1] == (
        f"adopted {len(made)} commits, signed by you ({commit[:12]})"
    )
    # One signed commit: the record names each commit and its tree, and the
    # adopter's key became the first allowed signer.
    record = orjson.loads(git(store, "show", "HEAD:adopted.json"))
    trees = [git(store, "rev-parse", f"{c}^{{tree}}").strip() for c in made]
    assert [(e["commit"], e["tree"]) for e in record["adopted"]] == list(
        zip(made, trees, strict=True)
    )
    signers = run("release", "signers").stdout.splitlines()
    assert signers[0].endswith("  (you, first)")
    name = signers[0].split("  ")[0]
    assert signers[1:] == [
        f"{len(made)} commits written before signing: adopted by {name} "
        f"in commit {commit[:12]}"
    ]
    assert "\ngpgsig -----BEGIN SSH SIGNATURE-----" in git(
        store, "cat-file", "commit", "HEAD"
    )
    clean = run("validate", "--store")
    assert clean.exit_code == 0, clean.stdout
    assert run("release", "signers", "adopt").stdout == (
        "nothing to adopt: every signed record is signed\n"
    )
    trial = run("release", "trial", "BR-004")
    assert trial.exit_code == 0, trial.stderr
    activated = run("release", "activate", "BR-004")
    assert activated.exit_code == 0, activated.stderr
    assert run("student").stdout.splitlines()[0] == f"student BR-004 = {CHECKPOINT}"
    assert run("lineage", "BR-004").exit_code == 0


def test_a_forgery_after_adoption_is_tampering_and_cannot_be_adopted(
    old: dict[str, Any], run: Run, tmp_path: Path
) -> None:
    store = old["store"]
    assert run("release", "signers", "adopt", "--yes").exit_code == 0
    clone = make_clone(run, tmp_path / "clone")
    real = check_at(store, "BR-004", 1)
    snap = Store.open(store).snapshot()
    change = steps.trial(snap, "BR-004", "2026-01-01T00:00:00Z")
    forged = forge(clone, change)
    line = f"releases/BR-004/trial.json: added in commit {forged[:12]}, {UNSIGNED}"
    without_hook(store)
    assert push(clone)[0] == 0
    assert real.passed
    refused = run("release", "activate", "BR-004")
    assert refused.exit_code == INVALID
    assert refused.stderr == (
        f"Error: BR-004 was tampered with: {line}; preregister a new release id\n"
    )
    # The attack adoption prevents: laundering the forgery with one --yes.
    laundered = run("release", "signers", "adopt", "--yes")
    assert laundered.exit_code == INVALID
    assert laundered.stdout.splitlines() == [
        f"{forged[:12]}  releases/BR-004/trial.json  (not adoptable: it is not "
        f"older than signed commit {git(store, 'rev-parse', 'HEAD~1').strip()[:12]}"
        ": machine signed everything since, so it is forged)"
    ]
    assert laundered.stderr.startswith(f"Error: commit {forged[:12]} cannot be ")
    assert head(store) == forged
    assert run("release", "activate", "BR-004").exit_code == INVALID


def test_an_adoption_without_a_trusted_key_adopts_nothing(
    old: dict[str, Any], run: Run, tmp_path: Path
) -> None:
    store = old["store"]
    made = unsigned_commits(store)
    clone = make_clone(run, tmp_path / "clone")
    entries = [
        {
            "commit": c,
            "tree": git(store, "rev-parse", f"{c}^{{tree}}").strip(),
            "wrote": [],
        }
        for c in made
    ]
    change = Change(
        summary="signers adopt: by hand",
        files={"adopted.json": jsonio.canonical({"adopted": entries})},
        trailers={"Action": "adopt"},
    )
    forged = forge(clone, change)
    without_hook(store)
    assert push(clone)[0] == 0
    checked = run("validate", "--store")
    assert checked.exit_code == INVALID
    assert (
        f"adopted.json:1: $: added in commit {forged[:12]}, {UNSIGNED}"
        in checked.stdout.splitlines()
    )
    # Every old record is still reported: the unsigned adoption vouches for none.
    assert f"added in commit {made[-2][:12]}, {UNSIGNED}" in checked.stdout
    assert run("release", "trial", "BR-004").exit_code == INVALID
    # And one signed by a key the store never allowed: the same.
    key = tmp_path / "mallory_ed25519"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True
    )
    (clone / "adopted.json").write_bytes(
        jsonio.canonical({"adopted": entries, "again": True})
    )
    signed = git_in(
        clone,
        *("-c", "gpg.format=ssh", "-c", f"user.signingkey={key}"),
        *("commit", "-q", "-S", "-am", "signers adopt: mallory"),
    )
    assert signed.returncode == 0, signed.stderr
    assert push(clone)[0] == 0
    mallory = head(clone)
    checked = run("validate", "--store")
    assert checked.exit_code == INVALID
    assert (
        f"adopted.json:1: $: changed in commit {mallory[:12]}, signed by SHA256:"
        in (checked.stdout)
    )
    assert f"added in commit {made[-2][:12]}, {UNSIGNED}" in checked.stdout
    assert run("release", "trial", "BR-004").exit_code == INVALID


def test_an_adoption_whose_tree_differs_from_the_commit_vouches_for_nothing(
    old: dict[str, Any], run: Run
) -> None:
    store = old["store"]
    made = unsigned_commits(store)
    wrong = adoption.Entry(made[-1], "0" * 40, ("releases/BR-004/checks/001.json",))
    written = adoption.adopt(Store.open(store), [wrong])  # signed by an allowed key
    assert written is not None
    checked = run("validate", "--store")
    assert checked.exit_code == INVALID
    lines = checked.stdout.splitlines()
    assert (
        f"adopted.json:1: $: adopts commit {made[-1][:12]}, whose tree is not "
        "the 000000000000 it recorded"
    ) in lines
    assert (
        f"releases/BR-004/checks/001.json:1: $: added in commit {made[-1][:12]}, "
        f"{UNSIGNED}"
    ) in lines
