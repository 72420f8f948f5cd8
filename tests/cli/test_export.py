from __future__ import annotations

import hashlib
import os
import resource
import shlex
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from machine_git.core import inputs
from machine_git.core import jsonio
from machine_git.core import paths
from machine_git.core.errors import CONFLICT
from machine_git.core.errors import INVALID
from machine_git.core.errors import IO
from machine_git.core.errors import NOT_FOUND
from machine_git.core.errors import USAGE
from machine_git.rows import rows
from machine_git.sessions import pi
from tests import helpers
from tests.conftest import PI_SESSIONS
from tests.conftest import Run
from tests.conftest import git
from tests.conftest import install_session

BASIC_USER = "Now two-tools: read notes.md and list /nonexistent-dir."
BASIC_ANSWER = (
    'notes.md starts with "# Notes". The command `ls /nonexistent-dir` failed: '
    "ls: cannot access '/nonexistent-dir': No such file or directory"
)
BASIC_CALLS = [
    {
        "type": "function",
        "id": "call_3bdfa7d2_0_0",
        "function": {"name": "read", "arguments": '{"path":"notes.md"}'},
    },
    {
        "type": "function",
        "id": "call_3bdfa7d2_0_1",
        "function": {"name": "bash", "arguments": '{"command":"ls /nonexistent-dir"}'},
    },
]
BASIC_RESULTS = [
    {
        "role": "tool",
        "tool_call_id": "call_3bdfa7d2_0_0",
        "content": "# Notes\nfixture notes line 2\n",
    },
    {
        "role": "tool",
        "tool_call_id": "call_3bdfa7d2_0_1",
        "content": "Error: ls: cannot access '/nonexistent-dir': No such file or "
        "directory\n\n\nCommand exited with code 2",
    },
]
EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def store_of(project: Path) -> Path:
    return paths.store_path(project)


def head(project: Path) -> str:
    return git(store_of(project), "rev-parse", "HEAD").strip()


def row_id(name: str, shape: str) -> str:
    turn, _ = pi.read_turn(PI_SESSIONS / f"{name}.jsonl")
    return rows.make_id("pi", turn.session_id, turn.entry_ids, shape)


def tag(run: Run, project: Path, name: str, *args: str) -> None:
    install_session(project, name)
    result = run(*args)
    assert result.exit_code == 0, result.output


def line(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS) + b"\n"


def write_jsonl(path: Path, *values: Any) -> Path:
    path.write_bytes(b"".join(orjson.dumps(v) + b"\n" for v in values))
    return path


def row_at_head(project: Path, rid: str) -> dict[str, Any]:
    value = orjson.loads(git(store_of(project), "show", f"HEAD:{rows.row_path(rid)}"))
    assert isinstance(value, dict)
    return value


def commit_count(project: Path) -> int:
    return len(git(store_of(project), "rev-list", "HEAD").split())


# -- formats ---------------------------------------------------------------------


def test_tinker_export_of_a_trace_with_tool_calls(project: Path, run: Run) -> None:
    tag(run, project, "basic", "good", "--trace")
    result = run("export", "--kind", "traces")
    assert result.exit_code == 0
    assert result.stderr == ""
    assert result.stdout_bytes == line(
        {
            "messages": [
                {"role": "user", "content": BASIC_USER},
                {"role": "assistant", "content": "", "tool_calls": BASIC_CALLS},
                *BASIC_RESULTS,
                {"role": "assistant", "content": BASIC_ANSWER},
            ]
        }
    )


def test_openai_export_of_a_trace_has_null_content_for_calls(
    project: Path, run: Run
) -> None:
    tag(run, project, "basic", "good", "--trace", "--reasoning")
    result = run("export", "--kind", "traces", "--format", "openai")
    assert result.stdout_bytes == line(
        {
            "messages": [
                {"role": "user", "content": BASIC_USER},
                {"role": "assistant", "content": None, "tool_calls": BASIC_CALLS},
                *BASIC_RESULTS,
                {"role": "assistant", "content": BASIC_ANSWER},
            ]
        }
    )


def test_text_before_tool_calls_becomes_one_message(project: Path, run: Run) -> None:
    tag(run, project, "mixed", "good", "--trace")
    expected = [
        {"role": "user", "content": "mixed-answer: what do the notes say?"},
        {
            "role": "assistant",
            "content": "Let me look at the notes file first.",
            "tool_calls": [
                {
                    "type": "function",
                    "id": "call_e7f9868c_0_0",
                    "function": {
                        "name": "bash",
                        "arguments": '{"command":"cat notes.md"}',
                    },
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "call_e7f9868c_0_0",
            "content": "# Notes\nfixture notes line 2\n",
        },
        {
            "role": "assistant",
            "content": 'The notes say "# Notes". (Reminder received.)',
        },
    ]
    for fmt in ("tinker", "openai"):
        result = run("export", "--kind", "traces", "--format", fmt)
        assert result.stdout_bytes == line({"messages": expected}), fmt


def test_train_rows_export_their_messages(project: Path, run: Run) -> None:
    tag(run, project, "basic", "good")
    messages = [
        {"role": "user", "content": BASIC_USER},
        {"role": "assistant", "content": BASIC_ANSWER},
    ]
    assert run("export").stdout_bytes == line({"messages": messages})
    assert run("export", "--format", "openai").stdout_bytes == line(
        {"messages": messages}
    )


def test_dpo_pairs_come_from_bad_rows_rewritten_with_as(
    project: Path, run: Run
) -> None:
    tag(run, project, "basic", "bad", "--as", "notes.md has a header.")
    tag(run, project, "multi-turn", "bad", "--trace", "--as", "Done: summary.txt.")
    tag(run, project, "mixed", "bad", "no rewrite here")
    tag(run, project, "image", "good", "--as", "A train row is not a pair.")
    result = run("export", "--format", "openai-dpo")
    basic_pair = {
        "input": {"messages": [{"role": "user", "content": BASIC_USER}]},
        "preferred_output": [
            {"role": "assistant", "content": "notes.md has a header."}
        ],
        "non_preferred_output": [{"role": "assistant", "content": BASIC_ANSWER}],
    }
    call = {
        "type": "function",
        "id": "call_57473fef_0_0",
        "function": {
            "name": "write",
            "arguments": '{"path":"summary.txt","content":"three turns done\\n"}',
        },
    }
    trace_pair = {
        "input": {
            "messages": [
                {
                    "role": "user",
                    "content": "Turn three: write-file summary.txt with a short "
                    "summary.",
                },
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {
                    "role": "tool",
                    "tool_call_id": "call_57473fef_0_0",
                    "content": "Successfully wrote 17 bytes to summary.txt",
                },
            ]
        },
        "preferred_output": [{"role": "assistant", "content": "Done: summary.txt."}],
        "non_preferred_output": [
            {"role": "assistant", "content": "Wrote summary.txt."}
        ],
    }
    by_id = {
        row_id("basic", "answer"): basic_pair,
        row_id("multi-turn", "trace"): trace_pair,
    }
    assert result.exit_code == 0
    assert result.stdout_bytes == b"".join(line(by_id[k]) for k in sorted(by_id))
    assert result.stderr == "skipped 1 rejected row without a rewrite\n"

    # the same pairs as tinker-cookbook's comparison loader reads them: the
    # rewrite is completion A and preferred; a tool-only message has "" content
    cookbook = run("export", "--format", "dpo")
    assert cookbook.exit_code == 0
    expected = []
    for key in sorted(by_id):
        openai: dict[str, Any] = by_id[key]
        prompt = [
            {**m, "content": m["content"] if m["content"] is not None else ""}
            for m in openai["input"]["messages"]
        ]
        expected.append(
            line(
                {
                    "comparison": {
                        "prompt_conversation": prompt,
                        "completion_A": openai["preferred_output"],
                        "completion_B": openai["non_preferred_output"],
                    },
                    "label": "A",
                }
            )
        )
    assert cookbook.stdout_bytes == b"".join(expected)


# -- revisions and byte identity ---------------------------------------------------


def test_the_same_revision_always_exports_the_same_bytes(
    project: Path, run: Run, tmp_path: Path
) -> None:
    tag(run, project, "basic", "good")
    tag(run, project, "basic", "good", "--trace")
    tag(run, project, "mixed", "good", "--trace")
    old = head(project)
    kinds = ("--kind", "traces", "--kind", "train")
    outs = [tmp_path / f"e{n}" / "out.jsonl" for n in range(4)]
    for out in outs:
        out.parent.mkdir()
    run("export", old, *kinds, "-o", str(outs[0]))
    run("export", old, *kinds, "-o", str(outs[1]))
    streamed = run("export", old, *kinds).stdout_bytes
    tag(run, project, "multi-turn", "good", "--trace")
    tag(run, project, "image", "good")
    # The older revision still gives the same bytes, by id and by HEAD~N.
    run("export", old, "--kind", "train", "--kind", "traces", "-o", str(outs[2]))
    assert run("export", "HEAD~2", *kinds).stdout_bytes == streamed
    run("export", *kinds, "-o", str(outs[3]))

    first = outs[0].read_bytes()
    assert first.count(b"\n") == 3
    assert first == streamed
    for out in outs[1:3]:
        assert out.read_bytes() == first
        assert (
            out.with_name("out.jsonl.manifest.json").read_bytes()
            == outs[0].with_name("out.jsonl.manifest.json").read_bytes()
        )
    assert outs[3].read_bytes().count(b"\n") == 5


def test_a_file_export_writes_a_manifest_beside_it(
    project: Path, run: Run, tmp_path: Path
) -> None:
    tag(run, project, "basic", "good")
    tag(run, project, "basic", "good", "--trace")
    folder = tmp_path / "exports"
    folder.mkdir()
    out = folder / "data.jsonl"
    result = run("export", "--kind", "traces", "--kind", "train", "-o", str(out))
    data = out.read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    commit = head(project)
    assert result.exit_code == 0
    assert result.stdout == ""
    assert result.stderr == (
        f"exported 2 train+traces rows in tinker format from {commit[:12]} "
        f"to {out} (sha256 {sha[:12]}…)\n"
    )
    manifest = folder / "data.jsonl.manifest.json"
    expected = {
        "file": "data.jsonl",
        "revision": "HEAD",
        "commit": commit,
        "format": "tinker",
        "kinds": ["train", "traces"],
        "rows": 2,
        "skipped": 0,
        "redacted": True,
        "context": True,
        "sha256": sha,
        "machine_version": "0.1.0",
    }
    assert manifest.read_bytes() == jsonio.canonical(expected)
    assert sorted(p.name for p in folder.iterdir()) == [
        "data.jsonl",
        "data.jsonl.manifest.json",
    ]
    for path in (out, manifest):
        assert oct(path.stat().st_mode & 0o777) == "0o600"
    # --json prints the manifest instead of the summary.
    again = run(
        "export", "--kind", "train", "--kind", "traces", "-o", str(out), "--json"
    )
    assert again.stderr == ""
    assert orjson.loads(again.stdout) == expected
    assert out.read_bytes() == data


def test_json_without_a_file_is_refused(project: Path, run: Run) -> None:
    tag(run, project, "basic", "good")
    result = run("export", "--json")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == (
        "Error: --json needs -o FILE (without it the rows go to stdout)"
        " (see 'cli export --help')\n"
    )


def test_a_bad_revision_is_one_line(project: Path, run: Run) -> None:
    tag(run, project, "basic", "good")
    result = run("export", "nope")
    assert result.exit_code == NOT_FOUND
    assert result.stdout == ""
    assert result.stderr == (
        "Error: unknown revision 'nope' (a commit id, HEAD~N, a version name, "
        "a run id or @{DATE})\n"
    )


def test_export_without_a_store_is_one_line(project: Path, run: Run) -> None:
    result = run("export")
    assert result.exit_code == NOT_FOUND
    assert result.stderr == (
        f"Error: no store at {store_of(project)} yet (tag a turn with 'machine good')\n"
    )


# -- kinds -----------------------------------------------------------------------


def test_kind_filters_and_observed_only_when_named(
    project: Path, run: Run, tmp_path: Path
) -> None:
    tag(run, project, "basic", "good")
    tag(run, project, "basic", "good", "--trace")
    tag(run, project, "multi-turn", "bad")
    observed = helpers.traces_row("e1b2c3d4e5f6", kind="observed", tag="observed")
    run("import", str(write_jsonl(tmp_path / "observed.jsonl", observed)))

    def users(*args: str) -> list[str]:
        out = run("export", "--format", "openai", *args).stdout_bytes
        return [orjson.loads(x)["messages"][0]["content"] for x in out.splitlines()]

    assert users() == [BASIC_USER]
    assert users("--kind", "traces") == [BASIC_USER]
    assert users("--kind", "rejected") == [
        "Turn three: write-file summary.txt with a short summary."
    ]
    assert users("--kind", "observed") == ["fix it"]
    # said once on stderr: these rows are no one's verdict
    observed_export = run("export", "--kind", "observed", "--kind", "train")
    assert observed_export.stderr == (
        "warning: observed rows are unlabeled (neither good nor bad); "
        "machine label ID good|bad judges them\n"
    )
    assert run("export", "--kind", "traces").stderr == ""
    everything = users(
        *(a for k in ("train", "traces", "rejected") for a in ("--kind", k))
    )
    assert len(everything) == 3 and "fix it" not in everything


def test_export_of_an_empty_kind(project: Path, run: Run, tmp_path: Path) -> None:
    tag(run, project, "basic", "good")
    commit = head(project)
    streamed = run("export", "--kind", "rejected")
    assert streamed.exit_code == 0
    assert streamed.stdout_bytes == b""
    assert streamed.stderr == f"warning: no rejected rows to export at {commit[:12]}\n"
    out = tmp_path / "empty.jsonl"
    result = run("export", "--kind", "rejected", "-o", str(out))
    assert out.read_bytes() == b""
    assert result.stderr == (
        f"exported 0 rejected rows in tinker format from {commit[:12]} to {out} "
        f"(sha256 {EMPTY_SHA256[:12]}…)\n"
    )
    manifest = orjson.loads(out.with_name("empty.jsonl.manifest.json").read_bytes())
    assert (manifest["rows"], manifest["sha256"]) == (0, EMPTY_SHA256)


# -- import ----------------------------------------------------------------------


def test_import_takes_each_line_shape_in_one_commit(
    project: Path, run: Run, tmp_path: Path
) -> None:
    full = helpers.train_row()
    messages = [
        {"role": "user", "content": "rename x"},
        {"role": "assistant", "content": "Renamed."},
    ]
    trajectory = helpers.trajectory()
    seed = write_jsonl(
        tmp_path / "seed.jsonl",
        full,
        {
            "messages": messages,
            "tag": "bad",
            "note": "wrong file",
            "created_at": helpers.STAMP,
        },
        {"trajectory": trajectory, "created_at": "2026-11-30T08:00:00Z"},
    )
    result = run("import", str(seed))
    commit = head(project)
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        f"imported 3 rows (train 1, traces 1, rejected 1) from {seed} "
        f"(commit {commit[:12]})\n"
    )
    assert result.stderr == (
        f"{seed}: 1 chat line carries no id, original answer or "
        "redactions; ids are made from the content\n"
    )
    messages_id = hashlib.sha256(jsonio.canonical({"messages": messages})).hexdigest()[
        :12
    ]
    trajectory_id = hashlib.sha256(
        jsonio.canonical({"trajectory": trajectory})
    ).hexdigest()[:12]

    def source(n: int) -> dict[str, Any]:
        return {
            "host": "import",
            "session_id": f"seed.jsonl:{n}",
            "session_file": str(seed),
            "entry_ids": [f"line {n}"],
        }

    assert row_at_head(project, full["id"]) == {**full, "redactions": {}}
    assert row_at_head(project, messages_id) == {
        "id": messages_id,
        "kind": "rejected",
        "tag": "bad",
        "created_at": helpers.STAMP,
        "note": "wrong file",
        "source": source(2),
        "messages": messages,
        "redactions": {},
    }
    assert row_at_head(project, trajectory_id) == {
        "id": trajectory_id,
        "kind": "traces",
        "tag": "good",
        "created_at": "2026-11-30T08:00:00Z",
        "note": None,
        "source": source(3),
        "trajectory": trajectory,
        "redactions": {},
    }
    assert commit_count(project) == 2
    assert git(store_of(project), "log", "-1", "--format=%B") == (
        "import 3 rows from seed.jsonl\n\n"
        "train 1, traces 1, rejected 1\n\n"
        "Machine-Action: import\n"
        "Machine-Rows: 3\n"
        "Machine-Source: seed.jsonl\n\n"
    )


def test_import_kind_option_and_json(project: Path, run: Run, tmp_path: Path) -> None:
    seed = write_jsonl(
        tmp_path / "rejected.jsonl",
        {
            "messages": [
                {"role": "user", "content": "a"},
                {"role": "assistant", "content": "b"},
            ]
        },
        {"trajectory": helpers.trajectory()},
    )
    result = run("import", str(seed), "--kind", "rejected", "--json")
    assert orjson.loads(result.stdout) == {
        "file": str(seed),
        "imported": 2,
        "counts": {"train": 0, "traces": 0, "rejected": 2, "observed": 0},
        "already_present": 0,
        "commit": head(project),
    }


def test_a_bad_line_imports_nothing(project: Path, run: Run, tmp_path: Path) -> None:
    tag(run, project, "basic", "good")
    before = head(project)
    good_line = {
        "messages": [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": "b"},
        ]
    }
    bad_role = {
        "messages": [
            {"role": "robot", "content": "a"},
            {"role": "assistant", "content": "b"},
        ]
    }
    seed = tmp_path / "seed.jsonl"
    seed.write_bytes(
        orjson.dumps(good_line)
        + b"\n\n{not json\n"
        + orjson.dumps(bad_role)
        + b"\n"
        + orjson.dumps({"prompt": "a", "completion": "b"})
        + b"\n"
        + orjson.dumps(good_line)
        + b"\n"
        + orjson.dumps({**good_line, "tag": "bad"}, option=orjson.OPT_SORT_KEYS)
        + b"\n"
    )
    result = run("import", str(seed))
    good_id = hashlib.sha256(jsonio.canonical(good_line)).hexdigest()[:12]
    assert result.exit_code == INVALID
    assert result.stdout == ""
    assert result.stderr == (
        f"{seed}:3: $: not valid JSON (unexpected character, expected a "
        "string key: line 1 column 2 (char 1))\n"
        f"{seed}:4: $.messages[0].role: "
        '"robot" is not one of "system", "user", "assistant", "tool"\n'
        f"{seed}:5: $: unknown line shape: no messages, trajectory or "
        "conversations (expected a machine row with kind and id, a messages "
        "line, a dpo pair, a trajectory line or a sharegpt conversation)\n"
        # line 6 repeats line 1 (imported once); line 7 makes it a rejected row
        f"{seed}:7: $.id: duplicate id {good_id} (also line 1)\n"
        f"Error: {seed}: 4 bad lines; nothing imported\n"
    )
    assert head(project) == before
    assert commit_count(project) == 2


def test_a_bad_file_creates_no_store(project: Path, run: Run, tmp_path: Path) -> None:
    seed = write_jsonl(tmp_path / "seed.jsonl", {"messages": "hi"})
    result = run("import", str(seed))
    assert result.exit_code == INVALID
    assert result.stderr.endswith(f"Error: {seed}: 1 bad line; nothing imported\n")
    assert not store_of(project).exists()


def test_reimport_skips_rows_already_present(
    project: Path, run: Run, tmp_path: Path
) -> None:
    first = {
        "messages": [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": "b"},
        ]
    }
    second = {
        "messages": [
            {"role": "user", "content": "c"},
            {"role": "assistant", "content": "d"},
        ]
    }
    seed = write_jsonl(tmp_path / "seed.jsonl", first, helpers.train_row())
    run("import", str(seed))
    before = head(project)
    again = run("import", str(seed))
    assert again.stdout == f"imported 0 rows from {seed}; 2 already present\n"
    assert head(project) == before
    # The same conversation from another file is the same row.
    more = write_jsonl(tmp_path / "more.jsonl", second, first)
    result = run("import", str(more))
    assert result.stdout == (
        f"imported 1 row (train 1) from {more} (commit {head(project)[:12]}); "
        "1 already present\n"
    )


def test_an_import_of_many_rows_is_one_commit_in_one_pack(
    project: Path, run: Run, tmp_path: Path
) -> None:
    run("import", str(write_jsonl(tmp_path / "a.jsonl", helpers.train_row())))
    store = paths.store_path(project)
    git(store, "gc", "--quiet")  # from here, every object is in one pack
    before = head(project)
    ids = [hashlib.sha1(b"%d" % n).hexdigest()[:12] for n in range(100)]
    seed = write_jsonl(tmp_path / "b.jsonl", *(helpers.train_row(i) for i in ids))

    result = run("import", str(seed))

    assert result.stdout == (
        f"imported 100 rows (train 100) from {seed} (commit {head(project)[:12]})\n"
    )
    assert git(store, "rev-list", f"{before}..main").split() == [head(project)]
    loose = git(store, "count-objects", "-v").splitlines()
    assert "count: 0" in loose and "packs: 2" in loose
    # The new pack holds the 100 rows, their trees and the commit; git reads
    # it as its own (the index checks out, every object is reachable).
    git(store, "fsck", "--strict", "--no-dangling")
    listed = git(store, "ls-tree", "-r", "--name-only", "main", "rows").split()
    assert len(listed) == 101


def test_a_changed_row_is_a_conflict_and_imports_nothing(
    project: Path, run: Run, tmp_path: Path
) -> None:
    run("import", str(write_jsonl(tmp_path / "a.jsonl", helpers.train_row())))
    before = head(project)
    changed = helpers.train_row(note="edited elsewhere")
    fresh = helpers.train_row("0a0b0c0d0e0f")
    seed = write_jsonl(tmp_path / "b.jsonl", fresh, changed)
    result = run("import", str(seed))
    assert result.exit_code == CONFLICT
    assert result.stderr == (
        f"Error: {seed}: 1 row is already in the store with different content "
        "(a1b2c3d4e5f6); nothing imported\n"
    )
    assert head(project) == before


def test_an_export_of_another_store_imports_and_round_trips(
    project: Path, run: Run, tmp_path: Path
) -> None:
    tag(run, project, "basic", "good")
    tag(run, project, "basic", "good", "--trace")
    tag(run, project, "mixed", "good", "--trace")
    exported = tmp_path / "a.jsonl"
    run("export", "--kind", "train", "--kind", "traces", "-o", str(exported))
    other = tmp_path / "other"
    other.mkdir()
    result = run("import", str(exported), "--project", str(other))
    assert result.stdout == (
        f"imported 3 rows (train 3) from {exported} (commit {head(other)[:12]})\n"
    )
    back = run("export", "--project", str(other)).stdout_bytes
    assert sorted(back.splitlines()) == sorted(exported.read_bytes().splitlines())
    again = run("import", str(exported), "--project", str(other))
    assert again.stdout == f"imported 0 rows from {exported}; 3 already present\n"


def test_a_reader_that_stops_early_is_not_an_error(
    project: Path, run: Run, tmp_path: Path
) -> None:
    # More than a pipe buffer of rows, so the writer meets the closed pipe.
    big = [
        {
            "messages": [
                {"role": "user", "content": f"question {n}"},
                {"role": "assistant", "content": "x" * 10_000},
            ]
        }
        for n in range(20)
    ]
    run("import", str(write_jsonl(tmp_path / "big.jsonl", *big)))
    done = subprocess.run(
        f"{shlex.quote(sys.executable)} -m machine_git export | head -c 10; "
        'echo "exit ${PIPESTATUS[0]}" >&2',
        shell=True,
        capture_output=True,
        check=False,
        executable="/bin/bash",
    )
    assert done.stdout == b'{"messages'
    assert done.stderr == b"exit 141\n"  # as if killed by SIGPIPE, no traceback


def test_export_to_a_device_or_a_fifo_is_one_line(
    project: Path, run: Run, tmp_path: Path
) -> None:
    install_session(project, "basic")
    run("good")
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    for target, kind in (("/dev/full", "a character device"), (str(fifo), "a FIFO")):
        result = run("export", "-o", target)
        assert result.exit_code == USAGE
        assert result.stderr == (
            f"Error: output path '{target}' is not a regular file ({kind})\n"
        )
    # Never replaced by a file renamed over it, and no temporary file left.
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
    assert not [p for p in os.listdir("/dev") if p.startswith(".full.")]


def test_export_on_a_full_disk_is_one_line_and_leaves_nothing(
    project: Path, run: Run, tmp_path: Path
) -> None:
    install_session(project, "basic")
    run("good")
    target = tmp_path / "out" / "data.jsonl"
    target.parent.mkdir()

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (10, 10))

    done = subprocess.run(
        [sys.executable, "-m", "machine_git", "export", "-o", str(target)],
        capture_output=True,
        text=True,
        cwd=project,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        preexec_fn=limit,
    )
    assert done.returncode == IO
    assert done.stderr == (
        f"Error: cannot write {target}: file size limit reached; nothing was written\n"
    )
    assert os.listdir(target.parent) == []


# -- streams: `-` ------------------------------------------------------------------


def test_import_dash_reads_stdin(project: Path, run: Run) -> None:
    lines = line({"messages": [{"role": "user", "content": "hi"}, ANSWER]}) + line(
        {"messages": [{"role": "user", "content": "2+2"}, ANSWER]}
    )
    result = run("import", "-", input=lines.decode())
    commit = head(project)
    assert result.exit_code == 0
    assert result.stdout == (
        f"imported 2 rows (train 2) from <stdin> (commit {commit[:12]})\n"
    )
    assert not Path("-").exists()
    assert git(store_of(project), "log", "-1", "--format=%s%n%(trailers)") == (
        "import 2 rows from <stdin>\n"
        "Machine-Action: import\nMachine-Rows: 2\nMachine-Source: <stdin>\n\n"
    )
    listed = git(store_of(project), "ls-tree", "-r", "--name-only", "HEAD").split()
    ids = [rid for path in listed if (rid := rows.id_of_path(path)) is not None]
    stored = [row_at_head(project, rid) for rid in ids]
    assert sorted(r["source"]["session_id"] for r in stored) == ["stdin:1", "stdin:2"]
    assert [r["source"]["session_file"] for r in stored] == [None, None]


ANSWER = {"role": "assistant", "content": "hello"}


def test_a_file_named_dash_is_read_as_dot_slash_dash(project: Path, run: Run) -> None:
    write_jsonl(project / "-", {"messages": [{"role": "user", "content": "x"}, ANSWER]})
    result = run("import", "./-", input="")
    assert result.stdout.startswith("imported 1 row (train 1) from ./- (commit ")


def test_stdin_over_the_limit_is_one_line_and_writes_nothing(
    project: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inputs, "JSONL_LIMIT", 100)
    data = line({"messages": [{"role": "user", "content": "x" * 200}, ANSWER]})
    for command in ("import", "validate"):
        result = run(command, "-", input=data.decode())
        assert result.exit_code == (USAGE if command == "import" else INVALID)
        expected = "more than the 100 bytes machine reads from one input"
        if command == "import":
            assert result.stderr == f"Error: cannot read <stdin>: {expected}\n"
        else:
            assert result.stdout == f"<stdin>:0: $: cannot read: {expected}\n"
    assert not store_of(project).exists()


def test_a_terminal_as_stdin_is_refused_at_once(project: Path) -> None:
    main, terminal = os.openpty()
    try:
        for command in ("import", "validate"):
            done = subprocess.run(
                [sys.executable, "-m", "machine_git", command, "-"],
                stdin=terminal,
                capture_output=True,
                text=True,
                cwd=project,
                timeout=60,
                check=False,
            )
            why = "standard input is a terminal; pipe the rows in (... - < FILE)"
            if command == "import":
                assert done.returncode == USAGE
                assert done.stderr == f"Error: cannot read <stdin>: {why}\n"
            else:
                assert done.returncode == INVALID
                assert done.stdout == f"<stdin>:0: $: cannot read: {why}\n"
    finally:
        os.close(main)
        os.close(terminal)


def test_export_dash_prints_the_rows_and_writes_no_file(
    project: Path, run: Run
) -> None:
    tag(run, project, "basic", "good")
    plain = run("export")
    dashed = run("export", "-o", "-")
    assert dashed.exit_code == 0
    assert dashed.stdout_bytes == plain.stdout_bytes != b""
    assert dashed.stderr == ""
    assert sorted(os.listdir(project)) == [".git"]


def test_a_manifest_goes_where_manifest_says(
    project: Path, run: Run, tmp_path: Path
) -> None:
    tag(run, project, "basic", "good")
    commit = head(project)
    meta = tmp_path / "train.manifest.json"
    result = run("export", "-o", "-", "--manifest", str(meta))
    sha = hashlib.sha256(result.stdout_bytes).hexdigest()
    assert result.stderr == (
        f"exported 1 train row in tinker format from {commit[:12]} to stdout "
        f"(sha256 {sha[:12]}…; manifest {meta})\n"
    )
    expected = {
        "file": "<stdout>",
        "revision": "HEAD",
        "commit": commit,
        "format": "tinker",
        "kinds": ["train"],
        "rows": 1,
        "skipped": 0,
        "redacted": True,
        "context": True,
        "sha256": sha,
        "machine_version": "0.1.0",
    }
    assert meta.read_bytes() == jsonio.canonical(expected)
    assert oct(meta.stat().st_mode & 0o777) == "0o600"
    # With -o FILE, --manifest moves the manifest from beside the file.
    out = tmp_path / "data.jsonl"
    elsewhere = tmp_path / "elsewhere.json"
    run("export", "-o", str(out), "--manifest", str(elsewhere))
    assert orjson.loads(elsewhere.read_bytes()) == {**expected, "file": "data.jsonl"}
    assert not (tmp_path / "data.jsonl.manifest.json").exists()
    refused = run("export", "-o", "-", "--manifest", "-")
    assert (refused.exit_code, refused.stdout) == (USAGE, "")
    assert refused.stderr == (
        "Error: --manifest needs a file name ('-o FILE --json' prints the manifest)"
        " (see 'cli export --help')\n"
    )
    assert sorted(os.listdir(project)) == [".git"]
