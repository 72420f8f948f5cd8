"""Shell completion: row ids and version names, through click's own API."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from click.shell_completion import BashComplete

from machine_git.cli import cli
from machine_git.cli import completion
from machine_git.core import paths
from tests.conftest import Run
from tests.conftest import install_session


def complete(args: list[str], incomplete: str) -> list[tuple[str, str | None]]:
    shell = BashComplete(cli, {}, "machine", "_MACHINE_COMPLETE")
    return [(c.value, c.help) for c in shell.get_completions(args, incomplete)]


@pytest.fixture
def tagged(project: Path, run: Run) -> list[str]:
    """Three rows, newest last, and versions v1 and v2."""
    install_session(project, "basic")
    a = orjson.loads(run("good", "--json").stdout)["id"]
    run("version", "v1")
    b = orjson.loads(run("good", "--trace", "--json").stdout)["id"]
    install_session(project, "multi-turn")
    c = orjson.loads(run("bad", "--json").stdout)["id"]
    run("version", "v2")
    return [a, b, c]


def test_an_empty_word_offers_the_recent_rows_with_their_words(
    tagged: list[str],
) -> None:
    a, b, c = tagged
    found = complete(["rm"], "")
    assert [value for value, _ in found] == [c, b, a]
    assert found[2][1] == "train: Now two-tools: read notes.md and list /nonexisten…"


def test_a_prefix_offers_the_rows_it_names(tagged: list[str]) -> None:
    for row_id in tagged:
        assert [v for v, _ in complete(["rewrite"], row_id[:3])] == sorted(
            i for i in tagged if i.startswith(row_id[:3])
        )
    assert complete(["move"], "zz") == []  # not hex: no row can match


def test_revisions_offer_versions(tagged: list[str]) -> None:
    assert complete(["diff"], "v") == [("v1", "version"), ("v2", "version")]
    assert complete(["diff", "v1"], "") == [("v1", "version"), ("v2", "version")]
    assert complete(["export"], "v2") == [("v2", "version")]
    assert complete(["log"], "x") == []
    assert complete(["version", "v3"], "") == [("v1", "version"), ("v2", "version")]
    assert [v for v, _ in complete(["show", tagged[0], "--at"], "")] == ["v1", "v2"]


def test_show_offers_rows_then_versions(tagged: list[str]) -> None:
    a, b, c = tagged
    assert [v for v, _ in complete(["show"], "")] == [c, b, a, "v1", "v2"]


def test_options_that_take_a_row_complete_it(tagged: list[str]) -> None:
    a = tagged[0]
    assert [v for v, _ in complete(["log", "--id"], a[:5])] == [a]
    assert [v for v, _ in complete(["correction", "--id"], a[:5])] == [a]


def test_no_store_no_candidates_and_no_store_made(project: Path) -> None:
    assert complete(["rm"], "") == []
    assert complete(["diff"], "") == []
    assert not paths.store_path(project).exists()
    assert completion.row_ids(project / "nowhere", "ab") == []


def test_another_project_named_on_the_line_is_completed(
    tagged: list[str], tmp_path: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    assert complete(["rm", "--project", str(other)], "") == []
    here = paths.project_root()
    assert len(complete(["rm", "--project", str(here)], "")) == 3


def test_bash_completes_through_the_console_script(
    tagged: list[str], project: Path
) -> None:
    env = {**os.environ, "_MACHINE_COMPLETE": "bash_complete"}
    a = tagged[0]
    done = subprocess.run(
        [sys.executable, "-m", "machine_git"],
        env={**env, "COMP_WORDS": f"machine show {a[:4]}", "COMP_CWORD": "2"},
        capture_output=True,
        text=True,
        cwd=project,
        timeout=60,
        check=True,
    )
    assert done.stdout.splitlines() == [f"plain,{a}"]
    source = subprocess.run(
        [sys.executable, "-m", "machine_git"],
        env={**os.environ, "_MACHINE_COMPLETE": "bash_source"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "complete -o nosort -F _machine_completion machine" in source.stdout
