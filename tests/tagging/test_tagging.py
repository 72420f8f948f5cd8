"""The tag path as a library call: options in, what happened (and notices) out."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from machine_git.core.errors import RowValidationError
from machine_git.core.paths import Project
from machine_git.rows import rows
from machine_git.sessions import pi
from machine_git.store.store import Store
from machine_git.tagging import tagging
from machine_git.tagging.tagging import NewStore
from machine_git.tagging.tagging import Notice
from machine_git.tagging.tagging import Redacted
from machine_git.tagging.tagging import SessionUsed
from machine_git.tagging.tagging import TagOptions
from tests.conftest import PI_SESSIONS
from tests.conftest import git
from tests.conftest import install_session
from tests.helpers import loose

BASIC = PI_SESSIONS / "basic.jsonl"
TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def basic_id(shape: str) -> str:
    turn, _ = pi.read_turn(BASIC)
    return rows.make_id("pi", turn.session_id, turn.entry_ids, shape)


def test_a_tag_returns_its_row_and_commit_and_says_nothing(project: Path) -> None:
    install_session(project, "basic")
    heard: list[Notice] = []
    done = tagging.tag(Project(project), TagOptions("good", note="right"), heard.append)
    assert (done.action, done.notices, heard) == ("tag", [], [])
    assert done.row is not None and done.row["id"] == basic_id("answer")
    assert (done.row["kind"], done.row["note"]) == ("train", "right")
    store = Store.open(Project(project).store_path)
    assert done.store == store.path
    assert done.commit == git(store.path, "rev-parse", "HEAD").strip()
    assert store.read_row(basic_id("answer")) == done.row


def test_notices_come_back_as_data_and_as_they_happen(tmp_path: Path) -> None:
    folder = tmp_path / "loose"  # no git here: the folder is the project
    folder.mkdir()
    install_session(folder, "basic")
    heard: list[Notice] = []
    options = TagOptions("bad", rewrite=f"use {TOKEN}", host="auto")
    done = tagging.tag(Project(folder), options, heard.append)
    assert heard == done.notices
    assert [type(n) for n in done.notices] == [Redacted, NewStore]
    redacted, new_store = done.notices
    assert str(redacted) == "redacted 1 secret (github-pat 1)"
    assert isinstance(new_store, NewStore) and new_store.project == folder
    assert str(new_store).startswith(f"note: no git repository here, so {folder} ")
    assert done.row is not None
    assert rows.final_answer(done.row) == "use [REDACTED:github-pat]"
    again = tagging.tag(Project(folder), options)
    assert again.action == "duplicate"
    assert [type(n) for n in again.notices] == [Redacted]  # the store exists now


def test_the_session_chosen_among_hosts_is_a_notice(project: Path) -> None:
    install_session(project, "basic")
    done = tagging.tag(Project(project), TagOptions("good", session=BASIC))
    assert done.notices == []  # a file named: nothing to say
    found = SessionUsed("claude", Path("/x.jsonl"))
    assert str(found) == "using claude session /x.jsonl"


def test_a_new_label_moves_the_turn_and_its_other_shape(project: Path) -> None:
    install_session(project, "basic")
    tagging.tag(Project(project), TagOptions("good"))
    tagging.tag(Project(project), TagOptions("good", trace=True))
    done = tagging.tag(Project(project), TagOptions("bad"))
    assert done.action == "move" and done.previous_kind == "train"
    assert [tuple(m) for m in done.also] == [(basic_id("trace"), "traces", "rejected")]
    store = Store.open(Project(project).store_path)
    moved = store.read_row(basic_id("trace"))
    assert moved is not None and moved["kind"] == "rejected"


def test_a_tag_of_an_observed_run_labels_it(project: Path) -> None:
    install_session(project, "basic")
    seen = tagging.tag(Project(project), TagOptions("observed", parent="a1b2c3d4e5f6"))
    assert seen.action == "observed" and seen.row is not None
    assert seen.row["source"].get("parent_row") == "a1b2c3d4e5f6"
    done = tagging.tag(Project(project), TagOptions("good", note="kept"))
    assert (done.action, done.previous_kind) == ("label", "observed")
    assert done.row is not None and done.row["id"] == basic_id("observed")
    assert (done.row["kind"], loose(done.row)["note"]) == ("traces", "kept")
    # observing it again records nothing: the turn is in the dataset once
    again = tagging.tag(Project(project), TagOptions("observed"))
    assert again.action == "duplicate" and again.commit is None


def test_observe_if_auto_reads_nothing_while_auto_is_off(project: Path) -> None:
    done = tagging.tag(Project(project), TagOptions("observed", if_auto=True))
    assert (done.action, done.row, done.notices) == ("off", None, [])
    assert not Project(project).store_path.exists()


def test_out_appends_a_checked_line_and_makes_no_store(
    project: Path, tmp_path: Path
) -> None:
    install_session(project, "basic")
    out = tmp_path / "rows.jsonl"
    done = tagging.tag(Project(project), TagOptions("good", out=str(out)))
    assert (done.action, done.out, done.store) == ("out", out, None)
    assert out.read_bytes().count(b"\n") == 1
    assert not Project(project).store_path.exists()


def test_the_schema_is_checked_once_by_the_store(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_session(project, "basic")
    broken = rows.build

    def no_user(*args: object, **kwargs: object) -> object:
        row = loose(broken(*args, **kwargs))  # type: ignore[arg-type]
        row["messages"] = [row["messages"][1]]
        return row

    monkeypatch.setattr(rows, "build", no_user)
    with pytest.raises(RowValidationError, match=r"^rows/.*: \$\.messages"):
        tagging.tag(Project(project), TagOptions("good"))


# The good/bad path, as the console script runs it: what it imports.
_PROBE = """
import atexit, sys
target = sys.argv[1]
def report():
    with open(target, "w") as f:
        f.write("\\n".join(sorted(sys.modules)))
atexit.register(report)
sys.argv = ["machine", *sys.argv[2:]]
from machine_git.entry import main
main()
"""


@pytest.mark.parametrize("label", ["good", "bad"])
def test_a_tag_imports_no_click_pydantic_or_training_stack(
    project: Path, tmp_path: Path, label: str
) -> None:
    modules = tmp_path / "modules.txt"
    args = [label, "--session", str(BASIC), "--note", "why"]
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(modules), *args],
        capture_output=True,
        text=True,
        cwd=project,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{label} {basic_id('answer')} -> ")
    loaded = {m.split(".")[0] for m in modules.read_text().split()}
    assert "machine_git" in loaded and "pygit2" in loaded  # it did run the tag
    heavy = {"click", "pydantic", "tinker", "tinker_cookbook", "torch"}
    heavy |= {"tml_renderers", "transformers", "numpy", "jsonschema"}
    assert loaded & heavy == set()
