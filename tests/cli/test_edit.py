from __future__ import annotations

import stat
import sys
from pathlib import Path

import orjson
import pytest

from machine_git.core import paths
from machine_git.core.errors import INVALID
from machine_git.core.errors import NOT_FOUND
from machine_git.core.errors import USAGE
from machine_git.store.store import Store
from tests import helpers
from tests.conftest import Run
from tests.conftest import git
from tests.conftest import install_session


def tagged(project: Path, run: Run, *args: str) -> str:
    install_session(project, "basic")
    return str(orjson.loads(run("good", *args, "--json").stdout)["id"])


def head(project: Path) -> str:
    return git(paths.store_path(project), "rev-parse", "HEAD").strip()


def row(project: Path, row_id: str) -> dict[str, object]:
    value = orjson.loads(
        git(
            paths.store_path(project),
            "show",
            f"HEAD:rows/{row_id[:2]}/{row_id[2:4]}/{row_id}.json",
        )
    )
    assert isinstance(value, dict)
    return value


def test_rewrite_keeps_the_first_original(project: Path, run: Run) -> None:
    row_id = tagged(project, run)
    original = row(project, row_id)["messages"][1]["content"]  # type: ignore[index]
    result = run("rewrite", row_id[:6], "--as", "One.")
    assert result.stdout == f"rewrote {row_id} ({head(project)[:12]})\n"
    run("rewrite", row_id, "--as", "Two.")
    now = row(project, row_id)
    assert now["messages"][1]["content"] == "Two."  # type: ignore[index]
    assert now["original_answer"] == original
    same = run("rewrite", row_id, "--as", "Two.")
    assert same.stdout == f"{row_id}: nothing changed\n"


def test_rm_and_undo(project: Path, run: Run) -> None:
    row_id = tagged(project, run)
    before = head(project)
    assert run("rm", row_id, "--why", "dup").stdout.startswith(f"removed {row_id} (")
    assert git(paths.store_path(project), "log", "-1", "--format=%b").startswith(
        "dup\n"
    )
    result = run("undo")
    undone = git(paths.store_path(project), "rev-parse", "HEAD~1").strip()[:12]
    assert result.stdout == (
        f"undid {undone} rm {row_id}: "
        "Now two-tools: read notes.md and list /nonexistent-dir.\n"
    )
    tree = git(paths.store_path(project), "rev-parse", "HEAD^{tree}")
    assert tree == git(paths.store_path(project), "rev-parse", f"{before}^{{tree}}")
    trailers = git(paths.store_path(project), "log", "-1", "--format=%(trailers:only)")
    assert (
        "Machine-Action: undo\n" in trailers and f"Machine-Row: {row_id}\n" in trailers
    )


def test_undo_of_the_first_commit_is_refused(project: Path, run: Run) -> None:
    tagged(project, run)
    run("undo")
    assert run("undo").stderr == (
        "Error: nothing to undo: every change since the store was created is "
        "undone ('machine redo' makes them again)\n"
    )
    store = paths.store_path(project)
    git(store, "fsck", "--strict")
    empty = tmp_store(project)
    result = run("undo", "--project", str(empty))
    assert result.exit_code == NOT_FOUND
    assert result.stderr == (
        "Error: nothing to undo: the store has only its first commit\n"
    )


def tmp_store(project: Path) -> Path:
    """Another project whose store has only its first commit."""
    other = project.parent / "other"
    other.mkdir()
    Store.create(paths.store_path(other), other)
    return other


def tree(project: Path) -> str:
    return git(paths.store_path(project), "rev-parse", "HEAD^{tree}").strip()


def trailers(project: Path) -> str:
    return git(paths.store_path(project), "log", "-1", "--format=%(trailers)")


def test_undo_walks_back_one_step_at_a_time_and_redo_forward(
    project: Path, run: Run, tmp_path: Path
) -> None:
    store = paths.store_path(project)
    steps: list[tuple[str, str, str]] = []  # (commit, summary, tree) per step

    def step(*args: str) -> None:
        assert run(*args).exit_code == 0, args
        commit, summary = git(store, "log", "-1", "--format=%H%n%s").splitlines()
        steps.append((commit, summary, tree(project)))

    row_id = tagged(project, run)  # a tag
    summary = git(store, "log", "-1", "--format=%s").strip()
    steps.append((head(project), summary, tree(project)))
    imported = tmp_path / "more.jsonl"
    imported.write_bytes(
        b'{"messages": [{"role": "user", "content": "2+2"}, '
        b'{"role": "assistant", "content": "4"}]}\n'
    )
    step("import", str(imported))
    step("rewrite", row_id, "--as", "Short.")
    step("move", row_id, "--to", "bad")
    step("rm", row_id)
    first = git(store, "rev-list", "--max-parents=0", "HEAD").strip()
    trees = [git(store, "rev-parse", f"{first}^{{tree}}").strip()]
    trees += [t for _, _, t in steps]
    # Each undo takes back one more step: the store is as it was before it.
    for n, (commit, summary, _) in enumerate(reversed(steps)):
        result = run("undo")
        assert result.stdout == f"undid {commit[:12]} {summary}\n"
        assert tree(project) == trees[len(steps) - 1 - n]
        assert f"Machine-Action: undo\nMachine-Reverts: {commit}\n" in trailers(project)
        subject = git(store, "log", "-1", "--format=%s").strip()
        assert subject.startswith(f"undo: {summary[:40]}")  # never "undo: undo:"
    assert tree(project) == trees[0]
    assert run("undo").exit_code == NOT_FOUND
    # Redo makes them again, oldest undone last: the store is as it was after.
    undos = git(store, "log", "--format=%H", f"-{len(steps)}").split()
    for n, (commit, summary, after) in enumerate(steps):
        result = run("redo")
        assert result.stdout == f"redid {commit[:12]} {summary}\n"
        assert tree(project) == after
        assert (
            f"Machine-Action: redo\nMachine-Reverts: {undos[n]}\n"
            f"Machine-Redoes: {commit}\n"
        ) in trailers(project)
    nothing = run("redo")
    assert nothing.exit_code == NOT_FOUND
    assert nothing.stderr == (
        "Error: nothing to redo: no change was undone since the last one\n"
    )
    # log shows every undo and redo as the commit it is.
    actions = [line.split()[3] for line in run("log").stdout.splitlines()]
    assert actions[: 2 * len(steps)] == ["redo"] * len(steps) + ["undo"] * len(steps)
    git(store, "fsck", "--strict")


def test_undo_after_redo_and_a_new_change_ends_redo(project: Path, run: Run) -> None:
    row_id = tagged(project, run)
    run("rewrite", row_id, "--as", "One.")
    run("rewrite", row_id, "--as", "Two.")
    run("undo")  # Two. -> One.
    run("undo")  # One. -> the agent's answer
    run("redo")  # -> One.
    assert row(project, row_id)["messages"][1]["content"] == "One."  # type: ignore[index]
    run("undo")  # the redone rewrite again
    assert "original_answer" not in row(project, row_id)
    run("redo")
    run("redo")  # -> Two.
    assert row(project, row_id)["messages"][1]["content"] == "Two."  # type: ignore[index]
    run("undo")
    run("rewrite", row_id, "--as", "Three.")  # a new change: nothing left to redo
    assert run("redo").exit_code == NOT_FOUND
    assert row(project, row_id)["messages"][1]["content"] == "Three."  # type: ignore[index]
    # ...and undo takes back the new change, then what was in force before it.
    run("undo")
    assert row(project, row_id)["messages"][1]["content"] == "One."  # type: ignore[index]


def test_an_undo_of_an_undo_made_before_redo_counts_as_a_redo(
    project: Path, run: Run
) -> None:
    # Before redo existed, a second undo reverted the first; such histories
    # stay readable: that commit is a redo, and undo goes on from there.
    row_id = tagged(project, run)
    run("rm", row_id)
    run("undo")
    store = Store.open(paths.store_path(project))
    undo_commit = store.head
    assert undo_commit is not None
    from machine_git.tagging import edits

    change = edits._revert(store, undo_commit, undo_commit, "undo")
    store.write(lambda snap: change)  # undo: undo: rm, as the old undo wrote it
    assert store.read_row(row_id) is None  # removed again
    before_rm = git(paths.store_path(project), "rev-parse", "HEAD~3^{tree}").strip()
    run("undo")  # takes back the rm (the old pair is a redo), not the old undo
    assert tree(project) == before_rm


def test_move_between_good_and_bad(project: Path, run: Run) -> None:
    row_id = tagged(project, run, "--trace")
    result = run("move", row_id, "--to", "bad")
    assert (
        result.stdout == f"moved {row_id} traces -> rejected ({head(project)[:12]})\n"
    )
    run("move", row_id, "--to", "good")
    assert row(project, row_id)["kind"] == "traces"
    assert run("move", row_id, "--to", "good").stdout == f"{row_id}: nothing changed\n"


def test_an_ambiguous_prefix_lists_the_candidates(project: Path, run: Run) -> None:
    tagged(project, run)
    store = Store.open(paths.store_path(project))
    for row_id in ("abc111111111", "abc222222222", "abd333333333"):
        row_data = helpers.train_row(row_id)
        helpers.commit_row(store, row_data)
    result = run("rm", "abc")
    assert result.exit_code == USAGE
    assert result.stderr == (
        "Error: row id 'abc' is ambiguous: 2 rows match (abc111111111, abc222222222)\n"
    )
    assert run("rm", "abd").stdout.startswith("removed abd333333333 (")


def test_unknown_and_malformed_ids(project: Path, run: Run) -> None:
    tagged(project, run)
    assert (
        run("rm", "ffffffffffff").stderr
        == "Error: no row 'ffffffffffff' in the store\n"
    )
    assert run("rm", "../etc").stderr == (
        "Error: bad row id '../etc': expected 1 to 12 hex characters\n"
    )


def write_editor(tmp_path: Path, body: str) -> str:
    """An $EDITOR that rewrites the file with Python code (a real process)."""
    script = tmp_path / "editor.py"
    script.write_text(body)
    launcher = tmp_path / "editor"
    launcher.write_text(f'#!/bin/sh\nexec {sys.executable} {script} "$@"\n')
    launcher.chmod(launcher.stat().st_mode | stat.S_IEXEC)
    return str(launcher)


def test_edit_validates_and_commits(
    project: Path, run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    row_id = tagged(project, run)
    monkeypatch.setenv(
        "EDITOR",
        write_editor(
            tmp_path,
            (
                "import json, sys\n"
                "p = sys.argv[1]; r = json.load(open(p))\n"
                "r['note'] = 'edited by hand'\n"
                "open(p, 'w').write(json.dumps(r))\n"
            ),
        ),
    )
    result = run("edit", row_id)
    assert result.stdout == f"edited {row_id} ({head(project)[:12]})\n"
    assert row(project, row_id)["note"] == "edited by hand"
    body = git(paths.store_path(project), "log", "-1", "--format=%b")
    assert body.startswith('$.note: null -> "edited by hand"\n')


def test_an_invalid_edit_is_shown_and_never_committed(
    project: Path, run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    row_id = tagged(project, run)
    before = head(project)
    monkeypatch.setenv(
        "EDITOR",
        write_editor(
            tmp_path,
            (
                "import json, sys\n"
                "p = sys.argv[1]; r = json.load(open(p))\n"
                "r['kind'] = 'nonsense'\n"
                "open(p, 'w').write(json.dumps(r))\n"
            ),
        ),
    )
    result = run("edit", row_id, input="abandon\n")
    assert result.stderr == (
        "the edited row is invalid (1 problems):\n"
        "  $.kind: unknown kind 'nonsense' (expected one of train, traces, "
        "rejected, observed)\n"
    )
    assert result.stdout.endswith("edit abandoned; nothing changed\n")
    assert head(project) == before


def test_an_editor_that_removes_its_file_abandons_the_edit(
    project: Path, run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 25: this was a traceback (FileNotFoundError from click.edit).
    row_id = tagged(project, run)
    before = head(project)
    monkeypatch.setenv(
        "EDITOR", write_editor(tmp_path, "import os, sys\nos.remove(sys.argv[1])\n")
    )
    result = run("edit", row_id)
    assert (result.exit_code, result.stdout, result.stderr) == (
        0,
        "edit abandoned: the editor removed the file; nothing changed\n",
        "",
    )
    assert head(project) == before


def test_an_invalid_edit_can_be_fixed(
    project: Path, run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    row_id = tagged(project, run)
    # First save breaks the JSON, second save (after "edit") fixes the note.
    monkeypatch.setenv(
        "EDITOR",
        write_editor(
            tmp_path,
            (
                "import json, sys, os\n"
                f"flag = {str(tmp_path / 'once')!r}\n"
                "p = sys.argv[1]\n"
                "if not os.path.exists(flag):\n"
                "    open(flag, 'w').close(); open(p, 'a').write('oops')\n"
                "else:\n"
                "    r = json.loads(open(p).read().replace('oops', ''))\n"
                "    r['note'] = 'fixed'; open(p, 'w').write(json.dumps(r))\n"
            ),
        ),
    )
    result = run("edit", row_id, input="edit\n")
    assert "not valid JSON" in result.stderr
    assert row(project, row_id)["note"] == "fixed"


def test_edit_from_a_file_or_stdin_opens_no_editor(
    project: Path, run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What Pi's /machine edit runs: the text of Pi's own editor, no $EDITOR."""
    row_id = tagged(project, run)
    monkeypatch.setenv("EDITOR", "false")  # an editor would fail the test
    current = run("show", row_id).stdout
    unchanged = run("edit", row_id[:6], "--from", "-", input=current)
    assert (unchanged.exit_code, unchanged.stdout) == (
        0,
        f"{row_id}: nothing changed\n",
    )
    value = orjson.loads(current)
    value["note"] = "edited in pi"
    target = tmp_path / "row.json"
    target.write_bytes(orjson.dumps(value))
    done = run("edit", row_id, "--from", str(target))
    assert done.stdout == f"edited {row_id} ({head(project)[:12]})\n"
    assert row(project, row_id)["note"] == "edited in pi"
    value["kind"] = "nonsense"
    before = head(project)
    bad = run("edit", row_id, "--from", "-", input=orjson.dumps(value).decode())
    assert bad.exit_code == INVALID
    assert bad.stderr == (
        "Error: the edited row is invalid: $.kind: unknown kind 'nonsense' "
        "(expected one of train, traces, rejected, observed)\n"
    )
    broken = run("edit", row_id, "--from", "-", input="{oops")
    assert broken.exit_code == INVALID
    assert broken.stderr.startswith("Error: the edited row is invalid: $: not valid ")
    assert head(project) == before


def test_changing_the_id_in_an_edit_is_refused(
    project: Path, run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    row_id = tagged(project, run)
    monkeypatch.setenv(
        "EDITOR",
        write_editor(
            tmp_path,
            (
                "import json, sys\n"
                "p = sys.argv[1]; r = json.load(open(p)); r['id'] = 'ffffffffffff'\n"
                "open(p, 'w').write(json.dumps(r))\n"
            ),
        ),
    )
    result = run("edit", row_id)
    assert result.exit_code == USAGE
    assert result.stderr == (
        f"Error: the id cannot change ({row_id} -> 'ffffffffffff'); "
        "use machine rm and machine import\n"
    )


def test_edit_json_reports_the_commit_or_nothing_changed(
    project: Path, run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    row_id = tagged(project, run)
    monkeypatch.setenv("EDITOR", "false")  # --from opens no editor
    current = run("show", row_id).stdout
    unchanged = run("edit", row_id[:6], "--from", "-", "--json", input=current)
    assert (unchanged.exit_code, unchanged.stdout, unchanged.stderr) == (
        0,
        f'{{"action":"edited","commit":null,"id":"{row_id}","kind":"train"}}\n',
        "",
    )
    value = orjson.loads(current)
    value["note"] = "edited in pi"
    done = run(
        "edit", row_id, "--from", "-", "--json", input=orjson.dumps(value).decode()
    )
    assert done.stdout == (
        f'{{"action":"edited","commit":"{head(project)}","id":"{row_id}",'
        '"kind":"train"}\n'
    )


def test_edit_json_keeps_the_prompt_off_stdout(
    project: Path, run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    row_id = tagged(project, run)
    before = head(project)
    monkeypatch.setenv(
        "EDITOR",
        write_editor(
            tmp_path,
            (
                "import json, sys\n"
                "p = sys.argv[1]; r = json.load(open(p))\n"
                "r['kind'] = 'nonsense'\n"
                "open(p, 'w').write(json.dumps(r))\n"
            ),
        ),
    )
    result = run("edit", row_id, "--json", input="abandon\n")
    assert result.stdout == (
        f'{{"action":"abandoned","commit":null,"id":"{row_id}","kind":"train"}}\n'
    )
    assert result.stderr.endswith(
        "observed)\nedit again or abandon? (edit, abandon) [edit]: abandon\n"
    )
    assert head(project) == before


@pytest.mark.parametrize("cut", [1, 2, 3, 4, 5])
def test_rewrite_whose_body_cuts_an_escape_in_half(
    project: Path, run: Run, cut: int
) -> None:
    # A rewrite's commit body shows the old and the new answer as JSON cut
    # at 40 characters (39 and an ellipsis), on one line. With ESC placed so
    # the cut falls inside the old answer's \u001b escape, the line holds
    # "xx\u0… -> "Two."": a string literal (up to the new answer's quote)
    # with a broken escape, which the secret scan used to fail on (issue 25).
    row_id = tagged(project, run)
    answer = "x" * (38 - cut) + "\x1b[31mred\x1b[0m and the rest of the answer."
    run("rewrite", row_id, "--as", answer)
    before = head(project)
    result = run("rewrite", row_id, "--as", "Two.")
    assert (result.exit_code, result.stderr) == (0, "")
    assert result.stdout == f"rewrote {row_id} ({head(project)[:12]})\n"
    store = paths.store_path(project)
    assert git(store, "rev-parse", "HEAD~1").strip() == before
    assert row(project, row_id)["messages"][1]["content"] == "Two."  # type: ignore[index]
    shown = '"' + "x" * (38 - cut) + "\\u001b"[:cut] + "…"
    body = git(store, "log", "-1", "--format=%b")
    assert body.splitlines()[0] == f'$.messages[1].content: {shown} -> "Two."'
