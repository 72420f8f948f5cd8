"""No secret reaches a git object: the corpus is tagged through the real CLI."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest

from machine_git import paths
from machine_git import redaction
from machine_git import secrets
from machine_git.errors import SecretScanError
from tests import helpers
from tests.conftest import FIXTURES
from tests.conftest import PI_SESSIONS
from tests.conftest import Run
from tests.conftest import git

JOIN = "{{JOIN}}"


def corpus() -> list[dict[str, str]]:
    out = []
    for line in (FIXTURES / "secrets" / "secrets.jsonl").read_text().splitlines():
        if line.strip():
            item = orjson.loads(line)
            out.append({k: str(v).replace(JOIN, "") for k, v in item.items()})
    return out


def session_with(tmp_path: Path, n: int, where: str, text: str) -> Path:
    """The real ``basic`` session with ``text`` put in one place of its last turn."""
    lines = [
        orjson.loads(x) for x in (PI_SESSIONS / "basic.jsonl").read_bytes().splitlines()
    ]
    lines[0]["id"] = f"secret-session-{n:03d}"
    user, _, read_result, _, answer = lines[-5:]
    target = {"prompt": user, "tool": read_result, "answer": answer}[where]
    blocks = target["message"]["content"]
    blocks[0] = {**blocks[0], "text": blocks[0]["text"] + "\n" + text}
    path = tmp_path / f"s{n:03d}.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(x) for x in lines) + b"\n")
    return path


def all_object_bytes(store: Path) -> bytes:
    done = subprocess.run(
        ["git", "-C", str(store), "cat-file", "--batch-all-objects", "--batch"],
        capture_output=True,
        check=True,
    )
    return done.stdout


@pytest.mark.slow
def test_no_secret_of_the_corpus_reaches_any_git_object(
    project: Path, run: Run, tmp_path: Path
) -> None:
    items = corpus()
    assert len(items) >= 30
    places = ("prompt", "tool", "answer")
    for n, item in enumerate(items):
        session = session_with(tmp_path, n, places[n % 3], item["context"])
        result = run("good", "--trace", "--session", str(session), "--json")
        assert result.exit_code == 0, result.output
        assert result.stderr.startswith("redacted "), item["kind"]
    store = paths.store_path(project)
    loose = all_object_bytes(store)
    git(store, "gc", "--quiet")  # the same check once everything is packed
    packed = all_object_bytes(store)
    assert b"[REDACTED:" in loose
    for item in items:
        secret = item["secret"].encode()
        assert secret not in loose, item["kind"]
        assert secret not in packed, item["kind"]
    listing = orjson.loads(run("tagged", "-n", "200", "--json").stdout)
    assert len(listing) == len(items)
    assert all(row.get("redactions") for row in listing)


def test_the_row_counts_what_was_replaced(
    project: Path, run: Run, tmp_path: Path
) -> None:
    aws = next(i for i in corpus() if i["kind"] == "aws-access-key")
    session = session_with(tmp_path, 0, "tool", aws["context"])
    result = run("good", "--trace", "--session", str(session), "--json")
    row_id = orjson.loads(result.stdout)["id"]
    row = orjson.loads(run("show", row_id, "--json").stdout)
    assert row["redactions"]["aws-access-key"] == 1
    assert "[REDACTED:aws-access-key]" in row["trajectory"][3]["content"]
    assert aws["secret"] not in orjson.dumps(row).decode()


def test_no_redact_is_explicit_and_recorded(
    project: Path, run: Run, tmp_path: Path
) -> None:
    gh = next(i for i in corpus() if i["kind"] == "github-token")
    session = session_with(tmp_path, 0, "answer", gh["context"])
    result = run("good", "--session", str(session), "--no-redact")
    assert result.exit_code == 0 and result.stderr == ""
    store = paths.store_path(project)
    assert "Machine-Redaction: off" in git(store, "log", "-1", "--format=%B")
    assert gh["secret"].encode() in all_object_bytes(store)


def test_a_failing_scanner_writes_nothing(
    project: Path, run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run("good", "--session", str(PI_SESSIONS / "multi-turn.jsonl"))
    store = paths.store_path(project)
    before = (git(store, "rev-parse", "HEAD"), all_object_bytes(store))

    def broken(value: Any) -> Any:
        raise SecretScanError("secret scanner failed: boom; nothing was written")

    monkeypatch.setattr(secrets, "redact", broken)
    result = run("good", "--session", str(PI_SESSIONS / "basic.jsonl"))
    assert result.exit_code == 1
    assert result.stderr == "Error: secret scanner failed: boom; nothing was written\n"
    assert (git(store, "rev-parse", "HEAD"), all_object_bytes(store)) == before


def test_a_writer_that_did_not_redact_is_refused(tmp_path: Path) -> None:
    from machine_git.errors import SecretFoundError
    from machine_git.store import Store

    aws = next(i for i in corpus() if i["kind"] == "aws-access-key")
    store = Store.create(tmp_path / "s")
    row = helpers.train_row(note=aws["context"])
    with pytest.raises(
        SecretFoundError, match=r"holds an unredacted secret \(aws-access-key"
    ):
        helpers.commit_row(store, row)
    assert aws["secret"].encode() not in all_object_bytes(store.path)


def test_exports_redact_rows_that_arrived_unredacted(
    project: Path, run: Run, tmp_path: Path
) -> None:
    gh = next(i for i in corpus() if i["kind"] == "github-token")
    session = session_with(tmp_path, 0, "answer", gh["context"])
    run("good", "--session", str(session), "--no-redact")
    exported = run("export").stdout
    assert gh["secret"] not in exported and "[REDACTED:github-token]" in exported
    assert gh["secret"] in run("export", "--no-redact").stdout


def test_redact_row_leaves_structure_alone() -> None:
    row = helpers.train_row(note="token ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8")
    cleaned, found = redaction.redact_row(row)
    assert found == {"github-token": 1}
    assert cleaned["note"] == "token [REDACTED:github-token]"
    assert {k: v for k, v in cleaned.items() if k not in ("note", "redactions")} == {
        k: v for k, v in row.items() if k != "note"
    }
    assert redaction.redact_row(cleaned)[1] == {}  # idempotent
    assert redaction.describe({"a-b": 1, "c": 2}) == "3 secrets (a-b 1, c 2)"
