from __future__ import annotations

from pathlib import Path

import orjson

from machine_git.core import paths
from machine_git.core.errors import CONFLICT
from machine_git.core.errors import USAGE
from tests.conftest import Run
from tests.conftest import git
from tests.conftest import install_session


def test_versions_are_annotated_tags_with_counts(project: Path, run: Run) -> None:
    install_session(project, "basic")
    run("good")
    assert run("version", "v1").stdout.startswith("version v1 -> ")
    run("good", "--trace")
    run("version", "v2", "-m", "with traces")
    listed = run("versions").stdout.splitlines()
    assert [line.split()[0] for line in listed] == ["v1", "v2"]
    assert listed[0].endswith("1 rows (train 1, traces 0, rejected 0, observed 0)")
    assert listed[1].endswith("2 rows (train 1, traces 1, rejected 0, observed 0)")
    store = paths.store_path(project)
    assert git(store, "cat-file", "-t", "v2") == "tag\n"
    data = orjson.loads(run("versions", "--json").stdout)
    assert data[1]["message"] == "with traces"


def test_a_version_name_is_given_once(project: Path, run: Run) -> None:
    install_session(project, "basic")
    run("good")
    run("version", "v1")
    again = run("version", "v1")
    assert again.exit_code == CONFLICT
    assert again.stderr.startswith("Error: version v1 already exists (at ")


def test_version_names_cannot_escape(project: Path, run: Run) -> None:
    install_session(project, "basic")
    run("good")
    for name, message in [
        ("../x", "may not contain '/' or start with '.'"),
        ("a/b", "may not contain '/' or start with '.'"),
        ("a b", "may only use letters, digits, '.', '_', '-'"),
        ("x" * 101, "is longer than 100 characters"),
    ]:
        result = run("version", name)
        assert result.exit_code == USAGE
        assert message in result.stderr
    assert git(paths.store_path(project), "tag").strip() == ""


def test_names_git_would_read_as_something_else_are_refused(
    project: Path, run: Run
) -> None:
    install_session(project, "basic")
    run("good")
    store = paths.store_path(project)
    head = git(store, "rev-parse", "HEAD").strip()
    git(store, "update-ref", "refs/runs/sft-1234abcd-0a1b2c", head)
    for args, why in [
        (("HEAD",), "is a name git already uses"),
        (("main",), "is a name git already uses"),
        (("--", "-x"), "may not start with '-' (it would read as an option)"),
        ((head[:12],), "looks like a commit id (4 to 40 hex characters)"),
        (("cafe",), "looks like a commit id (4 to 40 hex characters)"),
        (("BR-007",), "looks like a release id (BR-NNN)"),
        (("sft-1234abcd-0a1b2c",), "is a training run id"),
        (("v1.lock",), "is not a valid git tag name"),
    ]:
        result = run("version", *args)
        name = args[-1]
        assert (result.exit_code, result.stdout, result.stderr) == (
            USAGE,
            "",
            f"Error: version name {name!r} {why}; pick another\n",
        ), args
    assert git(store, "tag").strip() == ""
    # A name with a letter beyond a-f is fine, and HEAD still means HEAD.
    assert run("version", "cafe-2").exit_code == 0
    assert run("show", "HEAD").exit_code == 0
