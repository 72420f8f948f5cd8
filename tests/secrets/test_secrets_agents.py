"""Issue 28's corpus: what agents leak, in every place machine writes text.

tests/secrets/secrets_agents.py builds 200+ fake secrets of 120+ kinds and 400+
public look-alikes, independently of tests/secrets/test_secrets_corpus.py. Here:

* each secret's line is found whole by the scanner (a quick check, no CLI);
* every secret goes through the real CLI in all 16 placements -- the prompt,
  the prompt's first words (a commit summary), the middle and the end of a
  bash command, a write tool's arguments, a tool result, the thinking, the
  answer, a failed turn's error message, the system prompt, a tool's
  description, ``--note``, ``--as``, ``import``, ``rm --why`` and
  ``version -m`` -- and then no byte of any of them is in any git object
  (loose, then packed by ``machine gc``), any file under the store, or any
  export format. Secrets are batched many to a row (a note holds 4,000
  characters), so the whole run is a few dozen commands;
* fewer than 2% of the look-alikes are redacted, and the test lists each
  one that is, with why.
"""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from machine_git.core import paths
from machine_git.secrets import engine
from machine_git.secrets import scan_text
from machine_git.secrets import scanner
from tests.conftest import PI_SESSIONS
from tests.conftest import Run
from tests.conftest import git
from tests.secrets.secrets_agents import LOOKALIKES
from tests.secrets.secrets_agents import SECRETS
from tests.secrets.secrets_agents import Fake

BUDGET = 3500  # a note holds at most 4,000 characters (schemas/common)


def test_the_corpus_is_big_and_varied() -> None:
    assert len(SECRETS) >= 200
    assert len({f.kind for f in SECRETS}) >= 120
    assert len({f.secret for f in SECRETS}) == len(SECRETS)
    assert len(LOOKALIKES) >= 400
    assert len({x.kind for x in LOOKALIKES}) >= 60
    for fake in SECRETS:
        assert fake.secret in fake.line, fake
    for look in LOOKALIKES:
        assert look.value in look.line, look


def _covered(line: str, secret: str) -> bool:
    start = line.index(secret)
    end = start + len(secret)
    pos = start
    for f in scan_text(line):
        if f.start <= pos < f.end:
            pos = f.end
    return pos >= end


def test_each_secret_is_found_whole() -> None:
    missed = [(f.kind, f.line) for f in SECRETS if not _covered(f.line, f.secret)]
    assert missed == []


def test_the_engines_gates_open_the_rules_looking_would() -> None:
    # machine's context rules start from literals the engine finds in its own
    # pass (engine.GATES); each rule looks for itself where the engine did not
    # run. Both ways find the same.
    lines = [f.line for f in SECRETS] + [x.line for x in LOOKALIKES]
    lines += ["\n".join(f.line for f in SECRETS[i : i + 20]) for i in range(0, 220, 20)]
    for line, (_, gates) in zip(lines, engine.scan_many(lines), strict=True):
        opened: list[tuple[int, int, int, str]] = []
        looked: list[tuple[int, int, int, str]] = []
        scanner._collect(line, opened, 0, gates)
        scanner._collect(line, looked, 0, None)
        assert sorted(opened) == sorted(looked), line


# The look-alikes the scanner redacts, each with why. None today: public data
# matches no context rule, and the engine's rules want a provider's prefix.
EXPECTED_REDACTED: dict[str, str] = {}


def test_lookalikes_are_kept() -> None:
    redacted = {}
    for look in LOOKALIKES:
        start = look.line.index(look.value)
        end = start + len(look.value)
        over = [f for f in scan_text(look.line) if f.start < end and start < f.end]
        if over:
            redacted[look.line] = (look.kind, [f.kind for f in over])
    assert set(redacted) == set(EXPECTED_REDACTED), redacted
    assert len(redacted) / len(LOOKALIKES) < 0.02


# -- every placement, through the CLI ----------------------------------------------


def batches(fakes: list[Fake], budget: int = BUDGET) -> Iterator[list[Fake]]:
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


def _lines(name: str) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in (PI_SESSIONS / name).read_bytes().splitlines()]


def _context_entry(text: str, parent: str | None) -> dict[str, Any]:
    """machine's Pi extension's record of the system prompt and the tools."""
    return {
        "type": "custom",
        "customType": "machine-context",
        "id": "c0ffee01",
        "parentId": parent,
        "timestamp": "2026-12-01T09:55:14.230Z",
        "data": {
            "systemPrompt": f"You are a coding agent. Credentials:\n{text}",
            "tools": [
                {
                    "name": "deploy",
                    "description": f"Deploys with these settings:\n{text}",
                    "parameters": {"type": "object", "properties": {}},
                }
            ],
        },
    }


def _write(folder: Path, name: str, lines: list[dict[str, Any]]) -> Path:
    path = folder / name
    path.write_bytes(b"\n".join(orjson.dumps(x) for x in lines) + b"\n")
    return path


def pi_session(folder: Path, n: int, fakes: list[Fake]) -> Path:
    """The real ``basic`` session; its last turn carries ``fakes`` everywhere.

    The prompt starts and ends with them (its first words are the commit's
    summary), the thinking and the answer hold them, one bash call has each
    line in the middle of its command and one at its end, a write call
    writes them to a file, each call's result prints them, and a context
    entry puts them in the system prompt and a tool's description.
    """
    lines = _lines("basic.jsonl")
    lines[0]["id"] = f"agents-session-{n:03d}"
    user, assistant, _, _, answer = lines[-5:]
    text = "\n".join(f.line for f in fakes)
    block = user["message"]["content"][0]
    block["text"] = f"{text}\n{block['text']}\n{text}"
    thinking = assistant["message"]["content"][0]
    thinking["thinking"] += "\n" + text
    arguments = [
        {"command": f"cat <<'EOF' > .env && make deploy\n{text}\nEOF\nmake test"},
        {"command": f"set -e; {text}"},
        {"path": ".env", "content": text},
    ]
    calls = [
        {
            "type": "toolCall",
            "id": f"call_a{n}_{i}",
            "name": "write" if "path" in args else "bash",
            "arguments": args,
        }
        for i, args in enumerate(arguments)
    ]
    assistant["message"]["content"] = [thinking, *calls]
    results = []
    parent = assistant["id"]
    for i, call in enumerate(calls):
        entry = copy.deepcopy(lines[-3])
        entry["id"] = f"{n:02x}{i:06x}"
        entry["parentId"] = parent
        entry["message"].update(
            toolCallId=call["id"],
            toolName=call["name"],
            content=[{"type": "text", "text": text + "\n"}],
            isError=False,
        )
        entry["message"].pop("details", None)
        results.append(entry)
        parent = entry["id"]
    answer["parentId"] = parent
    answer["message"]["content"][0]["text"] += "\n" + text
    context = _context_entry(text, lines[2]["id"])
    lines[3]["parentId"] = context["id"]
    out = [*lines[:3], context, *lines[3:-4], assistant, *results, answer]
    return _write(folder, f"a{n:03d}.jsonl", out)


def errored_session(folder: Path, n: int, fakes: list[Fake]) -> Path:
    """The real ``errored`` session, its provider error quoting ``fakes``."""
    lines = _lines("errored.jsonl")
    lines[0]["id"] = f"agents-errored-{n:03d}"
    text = "\n".join(f.line for f in fakes)
    lines[-1]["message"]["errorMessage"] = f"400 invalid request: {text}"
    return _write(folder, f"e{n:03d}.jsonl", lines)


def needles(fake: Fake) -> list[bytes]:
    """What must not be found: the secret, raw and JSON-escaped, or its lines."""
    parts = [fake.secret]
    for sep in ("\n", "\\n"):
        if sep in fake.secret:
            parts = [p for whole in parts for p in whole.split(sep)]
    parts = [p for p in parts if "PRIVATE KEY" not in p and len(p) >= 8]
    out = set()
    for part in parts:
        out.add(part.encode())
        out.add(json.dumps(part)[1:-1].encode())
    return sorted(out)


def _leaked(haystacks: dict[str, bytes]) -> list[tuple[str, str]]:
    return [
        (where, fake.kind)
        for fake in SECRETS
        for needle in needles(fake)
        for where, data in haystacks.items()
        if needle in data
    ]


def _objects(store: Path) -> bytes:
    done = subprocess.run(
        ["git", "-C", str(store), "cat-file", "--batch-all-objects", "--batch"],
        capture_output=True,
        check=True,
    )
    return done.stdout


def _files(store: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file())


@pytest.mark.slow
def test_no_secret_survives_any_of_the_16_placements(
    project: Path, run: Run, tmp_path: Path
) -> None:
    groups = list(batches(SECRETS))
    assert sum(map(len, groups)) == len(SECRETS)
    tagged = []
    for n, fakes in enumerate(groups):
        text = "\n".join(f.line for f in fakes)
        session = pi_session(tmp_path, n, fakes)
        args = ("--trace", "--reasoning", "--note", text, "--as", text, "--json")
        done = run("good", "--session", str(session), *args)
        assert done.exit_code == 0, done.output
        assert done.stderr.startswith("redacted "), done.stderr
        tagged.append(orjson.loads(done.stdout)["id"])
        failed = run("bad", "--session", str(errored_session(tmp_path, n, fakes)))
        assert failed.exit_code == 0, failed.output
        assert failed.stderr.startswith("redacted "), failed.stderr
    # the system prompt and the tools are stored once, in context/ files
    store = paths.store_path(project)
    assert git(store, "ls-tree", "-r", "--name-only", "HEAD", "context/")

    imported = tmp_path / "import.jsonl"
    with imported.open("wb") as out:
        for fakes in groups:
            text = "\n".join(f.line for f in fakes)
            messages = [
                {"role": "user", "content": text},
                {"role": "assistant", "content": text},
            ]
            out.write(orjson.dumps({"messages": messages, "note": text}) + b"\n")
    assert run("import", str(imported)).exit_code == 0

    for n, fakes in enumerate(groups):
        text = "\n".join(f.line for f in fakes)
        assert run("rm", tagged[n], "--why", text).exit_code == 0
        assert run("undo").exit_code == 0
        assert run("version", f"v{n}", "-m", f"before rotating:\n{text}").exit_code == 0

    exports = {}
    for fmt, kinds in (
        ("tinker", ("train", "traces", "rejected")),
        ("openai", ("train", "traces", "rejected")),
        ("dpo", ("rejected",)),
    ):
        kind_args = [a for k in kinds for a in ("--kind", k)]
        done = run("export", "--format", fmt, *kind_args)
        assert done.exit_code == 0, done.output
        exports[f"export {fmt}"] = done.stdout.encode()

    loose = {"loose objects": _objects(store), "files": _files(store)}
    assert b"[REDACTED:" in loose["loose objects"]
    assert _leaked({**loose, **exports}) == []
    assert run("gc").exit_code == 0
    assert "pack" in git(store, "count-objects", "-v")
    assert _leaked({"packed objects": _objects(store), "files": _files(store)}) == []
