"""Every export format is an input: export, validate, import into an empty
store, export again.

The store exported holds real tagged Pi turns (a trace with its system prompt
and tools, a rewrite with --as, an aborted turn) and the row corpus of
tests/helpers.py (notes, redactions, failures, observed runs). Formats that
carry ids (rows, traces) give the same bytes at once; the others carry no
id, so the rows come back under ids made from their content, in that order:
the same lines, and from then on the same bytes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from machine_git.core import jsonio
from machine_git.core import paths
from machine_git.rows.formats import FORMATS
from tests import helpers
from tests.conftest import Run
from tests.conftest import git
from tests.conftest import install_session

EVERY_KIND = ("--kind", "train", "--kind", "traces", "--kind", "rejected")
EXPORTS = [name for name, f in FORMATS.items() if f.write is not None]
CARRY_IDS = ("rows", "traces")


@pytest.fixture
def source(project: Path, run: Run, tmp_path: Path) -> Path:
    """A store of real tagged turns and the helpers' corpus."""
    for name, args in [
        ("context", ("good", "--trace", "ran it")),
        ("context", ("good",)),
        ("basic", ("bad", "--as", "Read notes.md first, then ls.")),
        ("multi-turn", ("bad", "--trace", "--as", "Shorter.")),
        ("aborted", ("bad", "gave up")),
    ]:
        install_session(project, name)
        result = run(*args)
        assert result.exit_code == 0, result.output
    corpus = [r for r in helpers.valid_rows() if not isinstance(r.get("context"), str)]
    seed = tmp_path / "corpus.jsonl"
    seed.write_bytes(b"".join(jsonio.line(r) for r in corpus))
    result = run("import", str(seed), "--format", "rows", "--no-redact")
    assert result.exit_code == 0, result.output
    return project


def empty_project(tmp_path: Path, name: str) -> Path:
    root = tmp_path / name
    (root / ".git").mkdir(parents=True)
    return root


def export(run: Run, project: Path, fmt: str, out: Path) -> bytes:
    kinds = (*EVERY_KIND, "--kind", "observed")
    result = run(
        "export", "--format", fmt, *kinds, "-o", str(out), "--project", str(project)
    )
    assert result.exit_code == 0, result.output
    return out.read_bytes()


def round_trip(run: Run, data: bytes, fmt: str, tmp_path: Path, name: str) -> bytes:
    """Validate ``data``, import it into a new store and export that again."""
    given = tmp_path / f"{name}.jsonl"
    given.write_bytes(data)
    checked = run("validate", str(given), "--json")
    assert checked.exit_code == 0, checked.output
    assert orjson.loads(checked.stdout)["formats"] == {str(given): fmt}
    target = empty_project(tmp_path, name)
    imported = run("import", str(given), "--project", str(target))
    assert imported.exit_code == 0, imported.output
    return export(run, target, fmt, tmp_path / f"{name}.out.jsonl")


@pytest.mark.parametrize("fmt", EXPORTS)
def test_every_export_format_imports_back_to_the_same_bytes(
    fmt: str, source: Path, run: Run, tmp_path: Path
) -> None:
    first = export(run, source, fmt, tmp_path / "first.jsonl")
    assert first.count(b"\n") >= 3, fmt  # the store has rows of every format
    second = round_trip(run, first, fmt, tmp_path, "second")
    if fmt in CARRY_IDS:
        assert second == first
    else:
        # the same lines; a line two rows share (a train and a rejected row
        # of one conversation) comes back once
        assert sorted(set(second.splitlines())) == sorted(set(first.splitlines()))
        third = round_trip(run, second, fmt, tmp_path, "third")
        assert third == second


def rows_of(project: Path) -> dict[str, Any]:
    store = paths.store_path(project)
    listing = git(store, "ls-tree", "-r", "--name-only", "HEAD", "rows").split()
    return {
        Path(p).stem: orjson.loads(git(store, "show", f"HEAD:{p}")) for p in listing
    }


def test_a_rows_export_gives_the_same_rows_and_contexts(
    source: Path, run: Run, tmp_path: Path
) -> None:
    data = export(run, source, "rows", tmp_path / "rows.jsonl")
    target = empty_project(tmp_path, "copy")
    given = tmp_path / "rows.jsonl"
    result = run("import", str(given), "--project", str(target))
    assert result.exit_code == 0, result.output
    assert result.stderr == ""  # rows carry everything: nothing to say
    before, after = rows_of(source), rows_of(target)
    assert sorted(after) == sorted(before)
    for rid, row in before.items():
        # a row tagged with --no-redact is scanned on export ("redactions": {})
        assert after[rid] == {"redactions": {}, **row}, rid
    store = paths.store_path(target)
    contexts = git(store, "ls-tree", "-r", "--name-only", "HEAD", "context").split()
    assert (
        contexts
        == git(
            paths.store_path(source), "ls-tree", "-r", "--name-only", "HEAD", "context"
        ).split()
    )
    assert data.count(b"\n") == len(before)


def test_a_tinker_trace_imported_with_kind_traces_is_a_trace_again(
    source: Path, run: Run, tmp_path: Path
) -> None:
    out = tmp_path / "traces.jsonl"
    result = run("export", "--kind", "traces", "-o", str(out))
    assert result.exit_code == 0, result.output
    target = empty_project(tmp_path, "traces")
    result = run("import", str(out), "--kind", "traces", "--project", str(target))
    assert result.exit_code == 0, result.output
    assert "traces" in result.stdout
    assert result.stderr == (
        f"{out}: 3 chat lines carry no id, note, time, original answer or "
        "redactions; ids are made from the content\n"
    )
    found = rows_of(target).values()
    assert [r["kind"] for r in found] == ["traces"] * 3
    # the system prompt and tools of the Pi trace and the corpus's, by hash
    assert sum(isinstance(r.get("context"), str) for r in found) == 2
    again = tmp_path / "again.jsonl"
    result = run(
        "export", "--kind", "traces", "-o", str(again), "--project", str(target)
    )
    # the same lines, in the order of the ids made from their content
    assert sorted(again.read_bytes().splitlines()) == sorted(
        out.read_bytes().splitlines()
    )
