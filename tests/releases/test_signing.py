"""Signed records: the attacks of issue 30, each played through a clone and a push.

Each forgery is made the strongest way: with machine's own step functions,
so its content is exactly what a release command would have written, and
only the signature is missing (or made with a key the store does not list).
With the store's pre-receive hook the push is refused; with the hook gone
(a plain ``git clone --bare`` has none) it lands, and then every release
command and ``validate --store`` report the commit, nothing is activated,
and ``machine student`` never names a forged checkpoint.
"""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from machine_git.core.errors import INVALID
from machine_git.releases import steps
from machine_git.releases.records import Check
from machine_git.releases.records import Sample
from machine_git.releases.records import load
from machine_git.store.signing import Signer
from machine_git.store.store import Change
from machine_git.store.store import Store
from tests.conftest import Run
from tests.conftest import git
from tests.releases.conftest import CHECKPOINT
from tests.releases.conftest import git_in
from tests.releases.conftest import head
from tests.releases.test_attacks import failing_check
from tests.releases.test_attacks import make_clone
from tests.releases.test_attacks import push
from tests.releases.test_attacks import without_hook
from tests.train.conftest import FakeTinker

UNSIGNED = (
    "which is not signed by an allowed signer"
    " (written before signing? see: machine release signers adopt)"
)
RELEASE_REFUSED = (
    "machine: push rejected: 1 commit changes release records that only "
    "machine's release commands write; nothing was stored"
)
SIGNED_REFUSED = (
    "machine: push rejected: 1 commit changes signed records (runs, the student, "
    "allowed signers) without an allowed signer's signature; nothing was stored"
)
EVIL = "tinker://evil-run:train:0/sampler_weights/backdoor"
NO_STUDENT = (
    "no student set; choose one with machine student HANDLE "
    "(e.g. thinkingmachines/Inkling-Small:peft:262144)"
)


@pytest.fixture
def clone(trained: dict[str, Any], tmp_path: Path) -> Path:
    return tmp_path / "clone"


def passing(run: Run, fake: FakeTinker, refs: dict[str, str], rid: str) -> None:
    fake.answers = {"Turn one": refs["Turn one"], "Turn two": refs["Turn two"]}
    checked = run("release", "check", rid, "--yes")
    assert checked.exit_code == 0, checked.stderr


def forge(clone: Path, change: Change, date: str | None = None) -> str:
    """Commit ``change`` by hand in the clone, message and trailers and all."""
    for path, data in change.files.items():
        target = clone / path
        if data is None:
            target.unlink()
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    assert git_in(clone, "add", "-A").returncode == 0
    env = dict(os.environ)
    if date is not None:
        env.update(GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
    done = subprocess.run(
        ["git", "-C", str(clone), "commit", "-q", "-F", "-"],
        input=change.message(),
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return git_in(clone, "rev-parse", "HEAD").stdout.strip()


def check_at(store: Path, rid: str, number: int) -> Check:
    data = git(store, "show", f"HEAD:releases/{rid}/checks/{number:03d}.json")
    return load(Check, data.encode(), "check")


def student_line(run: Run) -> str:
    shown = run("student")
    assert shown.exit_code == 0, shown.stderr
    return shown.stdout.splitlines()[0]


def every_release_command_refuses(run: Run, rid: str, line: str) -> None:
    """What each release command says of a release tampered with by ``line``."""
    refused = f"Error: {rid} was tampered with: {line}; preregister a new release id\n"
    for args in (
        ("release", "trial", rid),
        ("release", "activate", rid),
        ("release", "check", rid, "--yes"),
        ("lineage", rid),
    ):
        done = run(*args)
        assert (done.exit_code, done.stderr) == (INVALID, refused), args
    again = run("release", "new", rid)
    assert again.exit_code == INVALID
    shown = run("release", "show", rid)
    assert shown.exit_code == INVALID
    assert f"tampered: {line}" in shown.stdout.splitlines()
    assert "state: tampered" in shown.stdout.splitlines()
    listed = run("release", "list")
    assert f"{rid}  tampered " in listed.stdout
    assert " active " not in listed.stdout


def validate_reports(run: Run, file: str, message: str) -> None:
    checked = run("validate", "--store")
    assert checked.exit_code == INVALID
    assert f"{file}:1: $: {message}" in checked.stdout.splitlines()


# -- a real passing check, copied into a failed release, digests re-chained ---------


def test_a_copied_passing_check_rechained_into_a_failed_release_is_refused(
    trained: dict[str, Any], run: Run, fake: FakeTinker, clone: Path
) -> None:
    store, refs = trained["store"], trained["refs"]
    assert run("release", "new", "BR-004", "--run", trained["run"]).exit_code == 0
    passing(run, fake, refs, "BR-004")
    assert run("release", "new", "BR-005", "--run", trained["run"]).exit_code == 0
    failing_check(run, fake, refs, "BR-005")
    before = head(store)
    make_clone(run, clone)
    # BR-004's answers, judged on BR-005's frozen gates by machine's own code:
    # every byte is what 'release check' would write, chained to BR-005's records.
    real = check_at(store, "BR-004", 1)
    snap = Store.open(store).snapshot()
    change = steps.check(snap, "BR-005", real.samples(), real.created_at, real.sampling)
    assert change.summary.startswith("release check BR-005: pass")
    forged = forge(clone, change)
    line = f"releases/BR-005/checks/002.json: added in commit {forged[:12]}, {UNSIGNED}"
    code, said = push(clone)
    assert code != 0
    assert said == [f"commit {forged[:12]}: {change.summary}", line, RELEASE_REFUSED]
    assert head(store) == before
    # Without the hook it lands, and is never believed.
    without_hook(store)
    assert push(clone)[0] == 0
    assert head(store) == forged
    fake.calls.clear()
    every_release_command_refuses(run, "BR-005", line)
    assert "sample" not in fake.names()
    validate_reports(run, "releases/BR-005/checks/002.json", line.split(": ", 1)[1])
    assert head(store) == forged
    assert student_line(run) == NO_STUDENT


# -- a hand-made trial, dated 2020 ---------------------------------------------------


def test_a_backdated_hand_made_trial_is_refused_and_activates_nothing(
    trained: dict[str, Any], run: Run, fake: FakeTinker, clone: Path
) -> None:
    store = trained["store"]
    assert run("release", "new", "BR-004", "--run", trained["run"]).exit_code == 0
    passing(run, fake, trained["refs"], "BR-004")
    before = head(store)
    make_clone(run, clone)
    at = "2020-06-01T00:00:00Z"
    change = steps.trial(Store.open(store).snapshot(), "BR-004", at)
    forged = forge(clone, change, date="2020-06-01T00:00:00+0000")
    line = f"releases/BR-004/trial.json: added in commit {forged[:12]}, {UNSIGNED}"
    code, said = push(clone)
    assert code != 0
    assert said == [f"commit {forged[:12]}: {change.summary}", line, RELEASE_REFUSED]
    assert head(store) == before
    without_hook(store)
    assert push(clone)[0] == 0
    every_release_command_refuses(run, "BR-004", line)
    # The student it wrote into settings.json is not the student.
    assert orjson.loads(git(store, "show", "HEAD:settings.json"))["student"] == (
        CHECKPOINT
    )
    assert student_line(run) == NO_STUDENT
    assert head(store) == forged


# -- settings.json alone names a student ------------------------------------------


def test_settings_alone_cannot_name_a_student(
    trained: dict[str, Any], run: Run, fake: FakeTinker, clone: Path
) -> None:
    store = trained["store"]
    assert run("release", "new", "BR-004", "--run", trained["run"]).exit_code == 0
    passing(run, fake, trained["refs"], "BR-004")
    assert run("release", "trial", "BR-004").exit_code == 0
    assert student_line(run) == f"student BR-004 = {CHECKPOINT}"
    before = head(store)
    make_clone(run, clone)
    path = clone / "settings.json"
    value = json.loads(path.read_text())
    value.update(student=EVIL, student_status="default")
    path.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n")
    assert git_in(clone, "commit", "-q", "-am", "student BR-004").returncode == 0
    forged = head(clone)
    line = f"settings.json: changed in commit {forged[:12]}, {UNSIGNED}"
    code, said = push(clone)
    assert code != 0
    assert said == [f"commit {forged[:12]}: student BR-004", line, SIGNED_REFUSED]
    assert head(store) == before
    without_hook(store)
    assert push(clone)[0] == 0
    # The signed trial's student stands; the forged one is reported, never named.
    assert student_line(run) == f"student BR-004 = {CHECKPOINT}"
    assert EVIL not in run("student", "--json").stdout
    listed = run("release", "list")
    assert listed.stdout.splitlines() == [
        f"BR-004  trial         {trained['run']}  release of {trained['run']}",
        f"tampered: {line}",
    ]
    activated = run("release", "activate", "BR-004")
    assert activated.stderr.splitlines()[-1] == f"warning: tampered: {line}"
    validate_reports(run, "settings.json", line.split(": ", 1)[1])


# -- a run record that claims rows it did not train ---------------------------------


def test_an_edited_run_record_claims_nothing(
    trained: dict[str, Any], run: Run, clone: Path
) -> None:
    store, run_id = trained["store"], trained["run"]
    before = head(store)
    make_clone(run, clone)
    path = clone / "runs" / f"{run_id}.json"
    value = json.loads(path.read_text())
    value["dataset"].update(sha256="0" * 64, rows=99)
    path.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n")
    assert git_in(clone, "commit", "-q", "-am", "train-finish").returncode == 0
    forged = head(clone)
    line = f"runs/{run_id}.json: changed in commit {forged[:12]}, {UNSIGNED}"
    code, said = push(clone)
    assert code != 0
    assert said == [f"commit {forged[:12]}: train-finish", line, SIGNED_REFUSED]
    assert head(store) == before
    without_hook(store)
    assert push(clone)[0] == 0
    traced = run("lineage", run_id)
    assert traced.exit_code == INVALID
    assert traced.stderr == (
        f"Error: run {run_id}'s record was tampered with: {line}\n"
    )
    made = run("release", "new", "BR-020", "--run", run_id)
    assert made.exit_code == INVALID
    assert made.stderr == (
        f"Error: BR-020 rests on run {run_id}, whose record was tampered with: {line}\n"
    )
    validate_reports(run, f"runs/{run_id}.json", line.split(": ", 1)[1])
    assert head(store) == forged


# -- what machine writes: signed, one active release, verifiable by git ------------


def test_release_commits_are_signed_for_git_and_one_release_is_active(
    trained: dict[str, Any], run: Run, fake: FakeTinker, tmp_path: Path
) -> None:
    store, refs = trained["store"], trained["refs"]
    for rid in ("BR-004", "BR-006"):
        assert run("release", "new", rid, "--run", trained["run"]).exit_code == 0
        passing(run, fake, refs, rid)
        assert run("release", "trial", rid).exit_code == 0
        assert run("release", "activate", rid).exit_code == 0
    listed = run("release", "list", "--json")
    states = [(r["id"], r["state"]["status"]) for r in orjson.loads(listed.stdout)]
    assert states == [("BR-004", "superseded"), ("BR-006", "active")]
    assert student_line(run) == f"student BR-006 = {CHECKPOINT}"
    # git itself accepts every signature, with the store's allowed_signers.
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(git(store, "show", "HEAD:allowed_signers"))
    config = ("-c", f"gpg.ssh.allowedSignersFile={allowed}")
    signed = git(store, *config, "log", "--format=%G? %s", "--", "releases", "runs")
    marks = {line.split(" ", 1)[0] for line in signed.splitlines()}
    assert marks == {"G"}, signed
    verified = git_in(store, *config, "verify-commit", "HEAD")
    assert verified.returncode == 0, verified.stderr
    # The key: this user's, outside the store, private.
    key = Path(os.environ["MACHINE_DATA_DIR"]) / "keys" / "signing_ed25519"
    assert oct(key.stat().st_mode & 0o777) == "0o600"
    assert oct(key.parent.stat().st_mode & 0o777) == "0o700"
    assert not str(key).startswith(str(store))
    shown = run("release", "signers")
    name, fingerprint, notes = shown.stdout.split("  ")
    assert (name, notes) == ("test@example.com", "(you, first)\n")
    assert fingerprint.startswith("SHA256:")


# -- two people: A adds B; C was never added -----------------------------------------


def test_a_signer_added_by_a_may_check_and_one_never_added_may_not(
    trained: dict[str, Any],
    run: Run,
    fake: FakeTinker,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a_store, refs = trained["store"], trained["refs"]
    a_data = os.environ["MACHINE_DATA_DIR"]
    assert run("release", "new", "BR-004", "--run", trained["run"]).exit_code == 0
    failing_check(run, fake, refs, "BR-004")

    def become(who: str) -> None:
        monkeypatch.setenv(
            "MACHINE_DATA_DIR", a_data if who == "a" else str(tmp_path / who)
        )
        monkeypatch.setenv("GIT_AUTHOR_EMAIL", f"{who}@example.com")

    def join(who: str) -> str:
        become(who)
        assert run("remote", "add", "origin", str(a_store)).exit_code == 0
        pulled = run("pull")
        assert pulled.exit_code == 0, pulled.stderr
        return run("release", "signers", "key").stdout.strip()

    b_key = join("b")
    c_key = join("c")
    # B, not yet added, cannot sign a check: refused before anything is written.
    become("b")
    b_head = head(next((tmp_path / "b").glob("proj-*")))
    fake.answers = {"Turn one": refs["Turn one"], "Turn two": refs["Turn two"]}
    fake.calls.clear()
    refused = run("release", "check", "BR-004", "--yes")
    assert refused.exit_code == INVALID
    fp = b_key.split()[1]
    # Refused before the (billed) sampling: no Tinker call was made.
    assert refused.stderr.startswith("Error: your signing key SHA256:")
    assert "sample" not in fake.names()
    assert f'machine release signers add b@example.com "{fp}' in refused.stderr
    # A setting that leaves the student alone needs no signer.
    assert run("auto", "on").exit_code == 0
    # A adds B (a commit signed by A); B pulls, checks, pushes: accepted.
    become("a")
    added = run("release", "signers", "add", "bob", b_key)
    assert added.exit_code == 0, added.stderr
    assert added.stdout.startswith("added signer bob (SHA256:")
    become("b")
    assert run("pull").exit_code == 0
    assert head(next((tmp_path / "b").glob("proj-*"))) != b_head
    checked = run("release", "check", "BR-004", "--yes")
    assert checked.exit_code == 0, checked.stderr
    pushed = run("push")
    assert pushed.exit_code == 0, pushed.stderr
    become("a")
    shown = run("release", "show", "BR-004")
    assert shown.exit_code == 0, shown.stdout
    assert shown.stdout.splitlines()[-3:] == [
        "check 1: fail",
        "check 2: pass",
        "state: passed",
    ]
    assert [
        line.split()[0] for line in run("release", "signers").stdout.splitlines()
    ] == [
        "test@example.com",
        "bob",
    ]
    # C was never added: machine refuses to sign, and a commit C signs with
    # git itself is refused by the hook.
    become("c")
    assert run("pull").exit_code == 0
    refused = run("release", "check", "BR-004", "--yes")
    assert refused.exit_code == INVALID
    become("a")  # C works in a clone of A's store, with C's own key
    c_clone = make_clone(run, tmp_path / "c-clone")
    c_private = tmp_path / "c" / "keys" / "signing_ed25519"
    real = check_at(a_store, "BR-004", 2)
    snap = Store.open(a_store).snapshot()
    change = steps.check(snap, "BR-004", real.samples(), real.created_at, real.sampling)
    for path, data in change.files.items():
        (c_clone / path).write_bytes(data or b"")
    assert git_in(c_clone, "add", "-A").returncode == 0
    signed = git_in(
        c_clone,
        *("-c", "gpg.format=ssh", "-c", f"user.signingkey={c_private}"),
        *("commit", "-q", "-S", "-m", change.message()),
    )
    assert signed.returncode == 0, signed.stderr
    forged = head(c_clone)
    code, said = push(c_clone)
    assert code != 0
    c_fingerprint = Signer("c", c_key.split(" ", 1)[1]).fingerprint
    assert said == [
        f"commit {forged[:12]}: {change.summary}",
        f"releases/BR-004/checks/003.json: added in commit {forged[:12]}, "
        f"signed by {c_fingerprint}, which is not an allowed signer",
        RELEASE_REFUSED,
    ]


# -- a signed run record is still checked against its data --------------------------


def test_a_signed_run_record_that_lies_about_its_data_is_refused(
    trained: dict[str, Any], run: Run
) -> None:
    from machine_git.core import jsonio
    from machine_git.train import evals

    store, run_id = Store.open(trained["store"]), trained["run"]
    path = f"runs/{run_id}.json"
    honest = run("lineage", run_id)
    assert honest.exit_code == 0, honest.stderr
    eval_set = evals.active(store)
    assert eval_set is not None
    held = str(eval_set["rows"][0])
    record = orjson.loads(git(trained["store"], "show", f"HEAD:{path}"))
    at = record["dataset"]["commit"][:12]
    rows = record["dataset"]["rows"]

    def lie(change: Any) -> None:
        value = json.loads(json.dumps(record))
        change(value)
        # machine's own writer: signed by an allowed signer, so only the
        # data can tell.
        store.write(
            lambda snap: Change("a run, rewritten", {path: jsonio.canonical(value)})
        )

    lie(lambda v: v["trained"]["rows"].append(held))
    traced = run("lineage", run_id)
    assert traced.exit_code == INVALID
    assert traced.stderr == (
        f"Error: run {run_id}'s record claims held-out eval row {held} as trained: "
        "its claims are checked against its data\n"
    )
    lie(lambda v: v["dataset"].update(sha256="0" * 64, rows=99))
    made = run("release", "new", "BR-021", "--run", run_id)
    assert made.exit_code == INVALID
    assert made.stderr == (
        f"Error: run {run_id}'s record claims 99 rows exported ({rows} at {at}) "
        "(and 1 more): its claims are checked against its data\n"
    )
    assert releases_of(trained["store"]) == ""


def releases_of(store: Path) -> str:
    return git(store, "ls-tree", "--name-only", "HEAD", "releases")


# -- a key slipped into allowed_signers by an unsigned commit ------------------------


def test_a_key_added_without_a_signers_signature_signs_nothing(
    trained: dict[str, Any], run: Run, fake: FakeTinker, clone: Path, tmp_path: Path
) -> None:
    store, refs = trained["store"], trained["refs"]
    assert run("release", "new", "BR-004", "--run", trained["run"]).exit_code == 0
    failing_check(run, fake, refs, "BR-004")
    make_clone(run, clone)
    key = tmp_path / "mallory"
    made = subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=False
    )
    assert made.returncode == 0
    mallory = Signer("mallory", key.with_suffix(".pub").read_text().strip())
    with (clone / "allowed_signers").open("a") as f:
        f.write(mallory.line() + "\n")
    assert git_in(clone, "commit", "-q", "-am", "add a signer").returncode == 0
    slipped = head(clone)
    # Now a passing check (machine's own bytes), signed with that key.
    real = check_at(store, "BR-004", 1)
    snap = Store.open(store).snapshot()
    cases = steps.cases(snap, "BR-004").all
    samples = [Sample.of({"output": case.reference}) for case in cases]
    change = steps.check(snap, "BR-004", samples, real.created_at, real.sampling)
    assert change.summary.startswith("release check BR-004: pass")
    for path, data in change.files.items():
        (clone / path).parent.mkdir(parents=True, exist_ok=True)
        (clone / path).write_bytes(data or b"")
    assert git_in(clone, "add", "-A").returncode == 0
    signed = git_in(
        clone,
        *("-c", "gpg.format=ssh", "-c", f"user.signingkey={key}"),
        *("commit", "-q", "-S", "-m", change.message()),
    )
    assert signed.returncode == 0, signed.stderr
    forged = head(clone)
    lines = [
        f"allowed_signers: changed in commit {slipped[:12]}, {UNSIGNED}",
        f"releases/BR-004/checks/002.json: added in commit {forged[:12]}, "
        f"signed by {mallory.fingerprint}, which is not an allowed signer",
    ]
    code, said = push(clone)
    assert code != 0
    assert lines[1] in said
    without_hook(store)
    assert push(clone)[0] == 0
    every_release_command_refuses(run, "BR-004", lines[1])
    checked = run("validate", "--store")
    found = [line.split(":1: $: ", 1) for line in checked.stdout.splitlines()]
    assert [f"{f}: {m}" for f, m in found] == lines
    listed = run("release", "signers").stdout
    assert "mallory" in listed  # what the file says; the audit trusts none of it
    assert student_line(run) == NO_STUDENT


# -- a backdated commit -------------------------------------------------------------


def test_a_backdated_commit_never_makes_todays_rows_look_old(
    trained: dict[str, Any], run: Run, clone: Path
) -> None:
    from machine_git.core.errors import NOT_FOUND

    store = trained["store"]
    before = run("export")
    assert before.exit_code == 0 and before.stdout
    parent = git(store, "log", "-1", "--format=%ct").strip()
    make_clone(run, clone)
    # A new row, written today, in a commit that says it is from 2020.
    from machine_git.core import jsonio
    from machine_git.rows import rows
    from tests import helpers

    row = helpers.train_row("0a0a0a0a0a0a")
    target = clone / rows.row_path("0a0a0a0a0a0a")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(jsonio.canonical(row))
    assert git_in(clone, "add", "-A").returncode == 0
    env = {**os.environ, "GIT_AUTHOR_DATE": "2020-05-31T12:00:00+0000"}
    env["GIT_COMMITTER_DATE"] = env["GIT_AUTHOR_DATE"]
    done = subprocess.run(
        ["git", "-C", str(clone), "commit", "-q", "-m", "old news"],
        env=env,
        capture_output=True,
        check=False,
    )
    assert done.returncode == 0
    forged = head(clone)
    pushed = push(clone)
    assert pushed == (0, []), pushed  # nothing signed in it: the hook takes it
    then = run("export", "@{2020-06-01}")
    assert then.exit_code == NOT_FOUND
    shown = datetime.fromtimestamp(int(parent), UTC).strftime("%Y-%m-%d %H:%M")
    assert then.stderr.splitlines()[0] == (
        f"warning: commit {forged[:12]} is dated 2020-05-31 12:00 UTC, before its "
        f"parent ({shown} UTC); it is taken as no older than its parent"
    )
    assert then.stderr.splitlines()[1].startswith(
        "Error: no commit at or before @{2020-06-01} (2020-06-01 23:59 UTC)"
    )
    assert then.stdout == ""
    today = run("export").stdout.splitlines()
    assert len(today) == len(before.stdout.splitlines()) + 1  # the row is today's


# -- a pull brings what a push could not ----------------------------------------------


def test_a_pull_refuses_a_student_no_signer_chose(
    trained: dict[str, Any],
    run: Run,
    fake: FakeTinker,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = trained["store"]
    # A plain bare copy: no hooks, so the forged student lands there.
    copy = tmp_path / "copy.git"
    cloned = git_in(tmp_path, "clone", "-q", "--bare", str(store), str(copy))
    assert cloned.returncode == 0, cloned.stderr
    work = tmp_path / "work"
    assert git_in(tmp_path, "clone", "-q", str(copy), str(work)).returncode == 0
    path = work / "settings.json"
    value = json.loads(path.read_text()) if path.exists() else {}
    value.update(student=EVIL, student_release="BR-004", chat="student")
    path.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n")
    assert git_in(work, "add", "settings.json").returncode == 0
    assert git_in(work, "commit", "-q", "-m", "student BR-004").returncode == 0
    forged = head(work)
    assert git_in(work, "push", "-q", "origin", "HEAD:main").returncode == 0
    # Someone else's store pulls from that copy: refused, nothing merged.
    monkeypatch.setenv("MACHINE_DATA_DIR", str(tmp_path / "other"))
    assert run("remote", "add", "copy", str(copy)).exit_code == 0
    pulled = run("pull", "copy")
    assert pulled.exit_code != 0
    assert f"settings.json: added in commit {forged[:12]}, {UNSIGNED}" in (
        pulled.stderr
    )
    assert "nothing was pulled" in pulled.stderr
    assert student_line(run) == NO_STUDENT
