"""Real session files from public repositories, tagged by the CLI.

tests/fixtures/corpus/SOURCES.json names each file's source (repository,
path, commit, licence, CLI version) and what its last turn is, written by
reading the file; ``machine good`` and ``machine good --trace`` (with
``--reasoning`` where the turn has thinking) must give exactly that, or
refuse with the recorded reason.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from machine_git.core import paths
from machine_git.rows import rows
from tests.conftest import FIXTURES
from tests.conftest import Run
from tests.conftest import git
from tests.e2e import expected_turns

CORPUS = FIXTURES / "corpus"
NO_ANSWER = "the last turn has no answer yet"
SOURCES: list[dict[str, Any]] = orjson.loads((CORPUS / "SOURCES.json").read_bytes())


def test_every_file_has_its_source() -> None:
    listed = {s["file"] for s in SOURCES}
    on_disk = {str(p.relative_to(CORPUS)) for p in CORPUS.glob("*/*.jsonl")}
    assert listed == on_disk
    for source in SOURCES:
        assert re.fullmatch(r"[0-9a-f]{40}", source["commit"])
        assert source["repository"] and source["path"] and source["licence"]


def _row(project: Path, stdout: str) -> dict[str, Any]:
    found = re.match(r"(?:good|bad) (\S+) ", stdout)
    assert found, stdout
    text = git(paths.store_path(project), "show", f"HEAD:{rows.row_path(found[1])}")
    value = orjson.loads(text)
    assert isinstance(value, dict)
    return value


@pytest.mark.parametrize("source", SOURCES, ids=lambda s: s["file"])
def test_corpus_file_is_tagged_as_read(
    project: Path,
    run: Run,
    source: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = str(CORPUS / source["file"])
    expected = source["expected"]
    if "refused" in source:
        for trace in ([], ["--trace"]):
            result = run("good", *trace, "--session", path)
            assert result.exit_code != 0
            assert result.stderr.endswith(f"{source['refused']}\n"), result.stderr
        if not source["refused"].startswith(NO_ANSWER):
            return
        # The turn read so far, with the answer the user supplies after it.
        supplied = {"role": "assistant", "content": "Supplied by hand."}
        expected = [*expected, supplied]
        extra = ["--as", supplied["content"]]
    else:
        extra = []
        result = run("good", "--session", path)
        assert result.exit_code == 0, result.output
        assert _row(project, result.stdout)["messages"] == [
            {"role": "user", "content": expected[0]["content"]},
            {"role": "assistant", "content": expected[-1]["content"]},
        ]
    # Thinking is kept only with --reasoning; the expectations list it.
    plain = [r for r in expected if r["role"] != "reasoning"]
    runs = [(["--trace"], plain)]
    if len(plain) < len(expected):
        runs.append((["--trace", "--reasoning"], expected))
    for flags, want in runs:
        if "--reasoning" in flags:  # the same turn, tagged again: another store
            monkeypatch.setenv("MACHINE_DATA_DIR", str(tmp_path / "data-reasoning"))
        result = run("good", *flags, *extra, "--session", path)
        assert result.exit_code == 0, result.output
        trajectory = _row(project, result.stdout)["trajectory"]
        assert expected_turns.mismatches(trajectory, want) == []


# -- the copies ----------------------------------------------------------------------
# The files were copied page by page through a search index's text view. Claude
# Code writes much of a row twice (a tool's input in the call and again in
# ``toolUseResult``, a usage total and its parts), so a mistyped copy shows up
# as a row that disagrees with itself.


def _claude_rows(name: str) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in (CORPUS / name).read_bytes().splitlines()]


def _blocks(row: dict[str, Any]) -> list[dict[str, Any]]:
    message = row.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return (
        [b for b in content or [] if isinstance(b, dict)]
        if isinstance(content, list)
        else []
    )


def _usage_problems(row: dict[str, Any]) -> list[str]:
    message = row.get("message")
    usage = message.get("usage") if isinstance(message, dict) else None
    if not isinstance(usage, dict) or not isinstance(usage.get("cache_creation"), dict):
        return []
    parts = usage["cache_creation"]
    total = parts.get("ephemeral_5m_input_tokens", 0) + parts.get(
        "ephemeral_1h_input_tokens", 0
    )
    if usage.get("cache_creation_input_tokens") != total:
        return [f"usage of {row.get('uuid')} does not add up"]
    return []


def _result_problems(
    row: dict[str, Any], block: dict[str, Any], calls: dict[str, Any]
) -> list[str]:
    call = calls.get(block["tool_use_id"])
    if call is None:
        return [f"{row.get('uuid')} answers an unknown call"]
    echo = row.get("toolUseResult")
    if not isinstance(echo, dict):
        return []
    said = call["input"]
    if "oldString" in echo and (said.get("old_string"), said.get("new_string")) != (
        echo["oldString"],
        echo["newString"],
    ):
        return [f"{row.get('uuid')}: Edit input differs from its echo"]
    if echo.get("type") == "create" and said.get("content") != echo.get("content"):
        return [f"{row.get('uuid')}: Write input differs from its echo"]
    if "stdout" in echo and echo["stdout"] not in str(block.get("content")):
        return [f"{row.get('uuid')}: Bash output differs from its echo"]
    return []


@pytest.mark.parametrize(
    "name",
    [s["file"] for s in SOURCES if s["host"] == "claude"],
)
def test_claude_copy_agrees_with_itself(name: str) -> None:
    rows = _claude_rows(name)
    uuids = {row.get("uuid") for row in rows}
    calls: dict[str, Any] = {}
    problems: list[str] = []
    for row in rows:
        parent = row.get("parentUuid")
        if parent and parent not in uuids:
            problems.append(f"{row.get('uuid')}: parent {parent} is missing")
        problems += _usage_problems(row)
        for block in _blocks(row):
            if block.get("type") == "tool_use":
                calls[block["id"]] = block
            elif block.get("type") == "tool_result":
                problems += _result_problems(row, block, calls)
    assert problems == []
