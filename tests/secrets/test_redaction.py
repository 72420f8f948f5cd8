"""No secret reaches a git object: the whole corpus, tagged through the real CLI.

Every fake secret of tests/secrets/test_secrets_corpus.py is put in every place a
turn carries text (the prompt, the thinking, the end of a bash command in a
tool call's JSON arguments, the tool's result, the answer) and in the note
and the ``--as`` rewrite given on the command line, in real Pi session files
(the ``basic`` fixture, its last turn edited to carry them). Then nothing of
any of them may be found in any git object (loose, then packed by ``machine
gc``), any file of the store, or any export format.
"""

from __future__ import annotations

import base64
import copy
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from machine_git import secrets
from machine_git.core import paths
from machine_git.core.errors import SecretScanError
from machine_git.secrets import redaction
from tests import helpers
from tests.conftest import PI_SESSIONS
from tests.conftest import Run
from tests.conftest import git
from tests.secrets.test_secrets_corpus import SECRETS
from tests.secrets.test_secrets_corpus import Fake

NOTE_BUDGET = 3500  # a note holds at most 4,000 characters (schemas/common)


def batches(fakes: list[Fake], budget: int = NOTE_BUDGET) -> Iterator[list[Fake]]:
    """The fakes in groups whose lines, joined, fit in one note."""
    group: list[Fake] = []
    size = 0
    for fake in fakes:
        if group and size + len(fake.line) + 1 > budget:
            yield group
            group, size = [], 0
        group.append(fake)
        size += len(fake.line) + 1
    if group:
        yield group


def pi_session(folder: Path, n: int, fakes: list[Fake], lead: bool = False) -> Path:
    """The real ``basic`` session, its last turn carrying ``fakes`` everywhere.

    The prompt, the thinking and the answer get every fake's line; the
    assistant calls bash once per fake with the command that ends with it,
    and each call's result prints the line. ``lead`` puts the lines first in
    the prompt, so they are a commit summary's first words.
    """
    lines = [
        orjson.loads(x) for x in (PI_SESSIONS / "basic.jsonl").read_bytes().splitlines()
    ]
    lines[0]["id"] = f"secret-session-{n:03d}"
    user, assistant, _, _, answer = lines[-5:]
    text = "\n".join(f.line for f in fakes)
    block = user["message"]["content"][0]
    block["text"] = f"{text}\n{block['text']}" if lead else f"{block['text']}\n{text}"
    thinking = assistant["message"]["content"][0]
    thinking["thinking"] += "\n" + text
    calls = [
        {
            "type": "toolCall",
            "id": f"call_s{n}_{i}",
            "name": "bash",
            "arguments": {"command": fake.command},
        }
        for i, fake in enumerate(fakes)
    ]
    assistant["message"]["content"] = [thinking, *calls]
    results = []
    parent = assistant["id"]
    for i, fake in enumerate(fakes):
        entry = copy.deepcopy(lines[-3])
        entry["id"] = f"{n:02x}{i:06x}"
        entry["parentId"] = parent
        entry["message"].update(
            toolCallId=f"call_s{n}_{i}",
            content=[{"type": "text", "text": fake.line + "\n"}],
            isError=False,
        )
        entry["message"].pop("details", None)
        results.append(entry)
        parent = entry["id"]
    answer["parentId"] = parent
    answer["message"]["content"][0]["text"] += "\n" + text
    path = folder / f"s{n:03d}.jsonl"
    out = [*lines[:-4], assistant, *results, answer]
    path.write_bytes(b"\n".join(orjson.dumps(x) for x in out) + b"\n")
    return path


def needles(fake: Fake) -> list[bytes]:
    """What must not be found: the secret, raw and JSON-escaped (PEM: each line)."""
    parts = fake.secret.splitlines() if "\n" in fake.secret else [fake.secret]
    parts = [p for p in parts if "PRIVATE KEY" not in p and len(p) >= 8]
    out = set()
    for part in parts:
        out.add(part.encode())
        out.add(json.dumps(part)[1:-1].encode())
    return sorted(out)


def all_object_bytes(store: Path) -> bytes:
    done = subprocess.run(
        ["git", "-C", str(store), "cat-file", "--batch-all-objects", "--batch"],
        capture_output=True,
        check=True,
    )
    return done.stdout


def all_file_bytes(store: Path) -> bytes:
    """Every file under the store as it is on disk (refs, logs, caches, packs)."""
    return b"".join(p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file())


def leaked(haystacks: dict[str, bytes]) -> list[tuple[str, str, str]]:
    found = []
    for fake in SECRETS:
        for needle in needles(fake):
            for where, data in haystacks.items():
                if needle in data:
                    found.append((where, fake.kind, needle.decode()[:40]))
    return found


@pytest.mark.slow
def test_no_fake_secret_survives_any_placement(
    project: Path, run: Run, tmp_path: Path
) -> None:
    groups = list(batches(SECRETS))
    assert sum(map(len, groups)) == len(SECRETS) >= 150
    tagged = []
    for n, fakes in enumerate(groups):
        text = "\n".join(f.line for f in fakes)
        session = pi_session(tmp_path, n, fakes, lead=n % 3 == 0)
        label = "good" if n % 2 == 0 else "bad"
        args = ("--trace", "--reasoning", "--note", text, "--as", text, "--json")
        result = run(label, "--session", str(session), *args)
        assert result.exit_code == 0, result.output
        row_id = orjson.loads(result.stdout)["id"]
        row = orjson.loads(run("show", row_id, "--json").stdout)
        # the report after a tag names what was redacted, by kind and count
        assert result.stderr == f"redacted {redaction.describe(row['redactions'])}\n"
        # each fake is in 7 places; two secrets side by side may be one finding
        assert sum(row["redactions"].values()) >= 6 * len(fakes)
        tagged.append(row_id)

    lines = "\n".join(f.line for f in SECRETS[:40])
    imported = tmp_path / "import.jsonl"
    imported.write_bytes(
        orjson.dumps(
            {
                "messages": [
                    {"role": "user", "content": lines},
                    {"role": "assistant", "content": lines},
                ],
                "note": lines[:3000],
            }
        )
        + b"\n"
    )
    assert run("import", str(imported)).exit_code == 0
    why = SECRETS[0].line
    assert run("rm", tagged[-1], "--why", why).exit_code == 0
    assert run("undo").exit_code == 0
    assert (
        run("version", "v1", "-m", f"before rotating {SECRETS[1].line}").exit_code == 0
    )

    exports = {}
    for fmt, kinds in (
        ("tinker", ("train", "traces", "rejected")),
        ("openai", ("train", "traces", "rejected")),
        ("dpo", ("rejected",)),
    ):
        kind_args = [a for k in kinds for a in ("--kind", k)]
        done = run("export", "--format", fmt, *kind_args)
        assert done.exit_code == 0, done.output
        assert done.stdout.count("\n") >= 1
        exports[f"export {fmt}"] = done.stdout.encode()

    store = paths.store_path(project)
    loose = {"loose objects": all_object_bytes(store), "files": all_file_bytes(store)}
    assert b"[REDACTED:" in loose["loose objects"]
    found = leaked({**loose, **exports})
    assert found == [], "\n".join(map(str, found))
    assert run("gc").exit_code == 0
    assert "pack" in git(store, "count-objects", "-v")
    packed = {"packed objects": all_object_bytes(store), "files": all_file_bytes(store)}
    assert leaked(packed) == []


def session_with(tmp_path: Path, where: str, text: str) -> Path:
    """The real ``basic`` session with ``text`` put in one place of its last turn."""
    lines = [
        orjson.loads(x) for x in (PI_SESSIONS / "basic.jsonl").read_bytes().splitlines()
    ]
    user, _, read_result, _, answer = lines[-5:]
    target = {"prompt": user, "tool": read_result, "answer": answer}[where]
    blocks = target["message"]["content"]
    blocks[0] = {**blocks[0], "text": blocks[0]["text"] + "\n" + text}
    path = tmp_path / f"{where}.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(x) for x in lines) + b"\n")
    return path


AWS = next(f for f in SECRETS if f.kind == "aws-access-key")
GH = next(f for f in SECRETS if f.kind == "github-token")


def test_the_row_counts_what_was_replaced(
    project: Path, run: Run, tmp_path: Path
) -> None:
    session = session_with(tmp_path, "tool", AWS.line)
    result = run("good", "--trace", "--session", str(session), "--json")
    assert result.stderr == "redacted 1 secret (aws-access-key 1)\n"
    row_id = orjson.loads(result.stdout)["id"]
    row = orjson.loads(run("show", row_id, "--json").stdout)
    assert row["redactions"] == {"aws-access-key": 1}
    assert "[REDACTED:aws-access-key]" in row["trajectory"][3]["content"]
    assert AWS.secret not in orjson.dumps(row).decode()


def test_no_redact_is_explicit_and_recorded(
    project: Path, run: Run, tmp_path: Path
) -> None:
    session = session_with(tmp_path, "answer", GH.line)
    result = run("good", "--session", str(session), "--no-redact", "--note", GH.line)
    assert result.exit_code == 0 and result.stderr == ""
    store = paths.store_path(project)
    message = git(store, "log", "-1", "--format=%B")
    assert "Machine-Redaction: off" in message
    assert GH.secret in message  # the note stays as typed, as asked
    assert GH.secret.encode() in all_object_bytes(store)


def test_a_failing_scanner_writes_nothing(
    project: Path, run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run("good", "--session", str(PI_SESSIONS / "multi-turn.jsonl"))
    store = paths.store_path(project)
    before = (git(store, "rev-parse", "HEAD"), all_object_bytes(store))

    def broken(value: Any, skip: Any = None) -> Any:
        raise SecretScanError("secret scanner failed: boom; nothing was written")

    monkeypatch.setattr(secrets, "redact", broken)
    result = run("good", "--session", str(PI_SESSIONS / "basic.jsonl"))
    assert result.exit_code == 1
    assert result.stderr == "Error: secret scanner failed: boom; nothing was written\n"
    assert (git(store, "rev-parse", "HEAD"), all_object_bytes(store)) == before


def test_a_writer_that_did_not_redact_is_refused(tmp_path: Path) -> None:
    from machine_git.core.errors import SecretFoundError
    from machine_git.store.store import Store

    store = Store.create(tmp_path / "s")
    row = helpers.train_row(note=AWS.line)
    with pytest.raises(
        SecretFoundError, match=r"holds an unredacted secret \(aws-access-key"
    ):
        helpers.commit_row(store, row)
    assert AWS.secret.encode() not in all_object_bytes(store.path)


def test_exports_redact_rows_that_arrived_unredacted(
    project: Path, run: Run, tmp_path: Path
) -> None:
    session = session_with(tmp_path, "answer", GH.line)
    run("good", "--session", str(session), "--no-redact")
    exported = run("export").stdout
    assert GH.secret not in exported and "[REDACTED:github-pat]" in exported
    assert GH.secret in run("export", "--no-redact").stdout


def test_redact_row_leaves_structure_alone() -> None:
    row = helpers.train_row(note=f"token {GH.secret}")
    cleaned, found = redaction.redact_row(row)
    assert found == {"github-pat": 1}
    assert cleaned["note"] == "token [REDACTED:github-pat]"
    assert {k: v for k, v in cleaned.items() if k not in ("note", "redactions")} == {
        k: v for k, v in row.items() if k != "note"
    }
    assert redaction.redact_row(cleaned)[1] == {}  # idempotent
    assert redaction.describe({"a-b": 1, "c": 2}) == "3 secrets (a-b 1, c 2)"


def test_fields_a_row_gains_later_are_redacted_too() -> None:
    # the training helper adds a captured system prompt and tool definitions
    row = helpers.train_row()
    row["system"] = f"You deploy with {GH.secret}."
    row["tools"] = [
        {"name": "deploy", "parameters": {"token": {"default": AWS.secret}}}
    ]
    cleaned, found = redaction.redact_row(row)
    assert found == {"github-pat": 1, "aws-access-key": 1}
    assert GH.secret not in json.dumps(cleaned) and AWS.secret not in json.dumps(
        cleaned
    )


def test_leaks_names_only_what_the_older_row_lacked() -> None:
    old = helpers.train_row(note=f"kept on purpose {GH.secret}")
    new = helpers.train_row(note=f"kept on purpose {GH.secret} and {AWS.secret}")
    assert redaction.leaks(new) == ["aws-access-key", "github-pat"]
    assert redaction.leaks(new, old) == ["aws-access-key"]
    assert redaction.leaks(old, old) == []


def test_a_commit_message_is_redacted_unless_redaction_is_off() -> None:
    from machine_git.store.store import Change
    from machine_git.store.store import Redaction

    on = Change(f"rm x: {GH.secret}", {}, body=f"why: {AWS.line}")
    assert GH.secret not in on.message() and AWS.secret not in on.message()
    assert "[REDACTED:github-pat]" in on.message()
    off = Change(f"rm x: {GH.secret}", {}, redaction=Redaction.OFF)
    assert GH.secret in off.message()
    assert redaction.message_leaks(off.message()) == ["github-pat"]


def test_the_base64_of_a_sentence_is_not_a_key() -> None:
    b64 = base64.b64encode(b"The quick brown fox jumps over the lazy dog").decode()
    assert secrets.redact_text(f"echo {b64} | base64 -d") == (
        f"echo {b64} | base64 -d",
        {},
    )
