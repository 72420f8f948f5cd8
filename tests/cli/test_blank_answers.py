"""One rule for a blank answer, everywhere: an answer that is empty or only
whitespace is refused with the same line, and nothing changes."""

from __future__ import annotations

from pathlib import Path

import pytest

from machine_git.core import jsonio
from machine_git.core import paths
from machine_git.core.errors import INVALID
from machine_git.core.errors import USAGE
from machine_git.rows.rows import BLANK_ANSWER
from tests import helpers
from tests.conftest import Run
from tests.conftest import git
from tests.conftest import install_session

BLANKS = ["", " ", " \n\t"]
TRAIN = helpers.train_row()
OBSERVED = helpers.valid_rows()[4]


@pytest.fixture
def stored(project: Path, run: Run, tmp_path: Path) -> str:
    """A store with a train and an observed row; its head commit."""
    seed = tmp_path / "seed.jsonl"
    seed.write_bytes(jsonio.line(TRAIN) + jsonio.line(OBSERVED))
    assert run("import", str(seed)).exit_code == 0
    install_session(project, "basic")
    return head(project)


def head(project: Path) -> str:
    return git(paths.store_path(project), "rev-parse", "HEAD").strip()


@pytest.mark.parametrize("blank", BLANKS)
@pytest.mark.parametrize(
    "args",
    [
        ("good", "--as"),
        ("bad", "--as"),
        ("good", "--trace", "--as"),
        ("rewrite", TRAIN["id"], "--as"),
        ("label", OBSERVED["id"], "good", "--as"),
    ],
    ids=["good", "bad", "trace", "rewrite", "label"],
)
def test_an_answer_given_blank_is_refused(
    args: tuple[str, ...], blank: str, stored: str, project: Path, run: Run
) -> None:
    result = run(*args, blank)
    assert (result.exit_code, result.stdout) == (USAGE, "")
    assert result.stderr == f"Error: {BLANK_ANSWER}\n"
    assert head(project) == stored


@pytest.mark.parametrize("blank", BLANKS[1:])  # "" is no answer: the schema says
def test_an_edit_or_import_with_a_blank_answer_is_refused(
    blank: str, stored: str, project: Path, run: Run, tmp_path: Path
) -> None:
    edited = helpers.mutate(TRAIN, ["messages", 1, "content"], blank)
    path = tmp_path / "row.json"
    path.write_bytes(jsonio.canonical(edited))
    result = run("edit", TRAIN["id"], "--from", str(path))
    assert result.exit_code == INVALID
    assert result.stderr == f"Error: $.messages[1].content: {BLANK_ANSWER}\n"
    lines = tmp_path / "lines.jsonl"
    lines.write_bytes(jsonio.line({"messages": edited["messages"]}))
    result = run("import", str(lines))
    assert result.exit_code == INVALID
    assert result.stderr == (
        f"{lines}:1: $.messages[1].content: {BLANK_ANSWER}\n"
        f"Error: {lines}: 1 bad line; nothing imported\n"
    )
    assert head(project) == stored
