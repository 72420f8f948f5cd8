"""A turn's system prompt and tools: captured, stored once by hash, checked.

Rows are tagged through the real CLI from the real ``context`` Pi session
(tests/fixtures/pi/sessions/context.jsonl: machine's extension recorded each
run's context), and read back through git.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest

from machine_git.core import jsonio
from machine_git.core import paths
from machine_git.core.errors import RowValidationError
from machine_git.core.errors import SecretFoundError
from machine_git.rows import context
from machine_git.rows import rows
from machine_git.store.store import Change
from machine_git.store.store import Redaction
from machine_git.store.store import Store
from tests import helpers
from tests.conftest import PI_SESSIONS
from tests.conftest import Run
from tests.conftest import entry_with_text
from tests.conftest import fixture_lines
from tests.conftest import git
from tests.conftest import install_session

AKID = "AKIA" + "Q7ZK4XW2N5RT3PLM"


def recorded() -> list[dict[str, Any]]:
    """The fixture's machine-context entries as contexts (read without machine)."""
    return [
        {"system": line["data"]["systemPrompt"], "tools": line["data"]["tools"]}
        for line in fixture_lines("context")
        if line.get("customType") == "machine-context"
    ]


def store_of(project: Path) -> Path:
    return paths.store_path(project)


def files(project: Path, prefix: str) -> list[str]:
    listed = git(store_of(project), "ls-tree", "-r", "--name-only", "HEAD").split()
    return [f for f in listed if f.startswith(prefix)]


def stored_row(project: Path, row_id: str) -> dict[str, Any]:
    value = orjson.loads(
        git(store_of(project), "show", f"HEAD:{rows.row_path(row_id)}")
    )
    assert isinstance(value, dict)
    return value


def stored_context(project: Path, sha: str) -> Any:
    return orjson.loads(git(store_of(project), "show", f"HEAD:{context.path_of(sha)}"))


def tag(run: Run, *args: str) -> str:
    result = run("good", "--json", *args)
    assert result.exit_code == 0, result.stderr
    return str(orjson.loads(result.stdout)["id"])


def test_each_distinct_context_is_stored_once_and_rows_name_it(
    project: Path, run: Run
) -> None:
    install_session(project, "context")
    first, third = recorded()
    one = entry_with_text("context", "The command printed: context-one")
    two = entry_with_text("context", "The command printed: context-two")
    ids = [
        tag(run, "--trace", "--entry", one),
        tag(run, "--trace", "--entry", two),
        tag(run, "--trace"),
        tag(run),  # the same turn as an answer row: the same context
    ]
    shas = [stored_row(project, i)["context"] for i in ids]
    assert shas[0] == shas[1] != shas[2] == shas[3]
    assert sorted(files(project, "context/")) == sorted(
        context.path_of(s) for s in {shas[0], shas[2]}
    )
    assert stored_context(project, shas[0]) == first
    assert stored_context(project, shas[2]) == third
    # the hash is the sha256 of the stored bytes
    data = git(store_of(project), "show", f"HEAD:{context.path_of(shas[2])}")
    assert context.digest(data.encode()) == shas[2]
    # the tag that met a known context wrote no context file
    second = git(store_of(project), "show", "--name-only", "--format=", "HEAD~2")
    assert second.split() == [rows.row_path(ids[1])]


def test_no_context_and_a_host_that_keeps_none_say_unknown(
    project: Path, run: Run
) -> None:
    install_session(project, "context")
    left_out = tag(run, "--trace", "--no-context")
    install_session(project, "basic")
    unknown = tag(run, "--trace")
    assert stored_row(project, left_out)["context"] is None
    assert stored_row(project, unknown)["context"] is None
    assert files(project, "context/") == []


def test_out_carries_the_context_and_import_stores_it_by_hash(
    project: Path, run: Run, tmp_path: Path
) -> None:
    install_session(project, "context")
    out = tmp_path / "rows.jsonl"
    assert run("good", "--trace", "--out", str(out)).exit_code == 0
    line = orjson.loads(out.read_bytes())
    assert line["context"] == recorded()[1]  # inline in a JSONL file
    imported = run("import", str(out))
    assert imported.exit_code == 0, imported.stderr
    row = stored_row(project, line["id"])
    assert row["context"] == context.digest(context.canonical(line["context"]))
    assert stored_context(project, row["context"]) == line["context"]
    assert {**line, "context": row["context"]} == row


def test_a_secret_in_the_system_prompt_is_redacted_with_the_row(
    project: Path, run: Run
) -> None:
    lines = [
        orjson.loads(x)
        for x in (PI_SESSIONS / "context.jsonl").read_bytes().splitlines()
    ]
    for line in lines:
        if line.get("customType") == "machine-context":
            line["data"]["systemPrompt"] += f"\nexport AWS_ACCESS_KEY_ID={AKID}\n"
    target = install_session(project, "context")
    target.write_bytes(b"".join(jsonio.line(x) for x in lines))
    result = run("good", "--trace", "--json")
    assert result.exit_code == 0, result.stderr
    assert "redacted 1 secret (aws-access-key 1)" in result.stderr
    row = stored_row(project, orjson.loads(result.stdout)["id"])
    assert row["redactions"] == {"aws-access-key": 1}
    system = stored_context(project, row["context"])["system"]
    assert AKID not in system
    assert system.startswith(recorded()[1]["system"])
    everything = git(store_of(project), "log", "-p", "--all")
    assert AKID not in everything


# -- the store's gate -----------------------------------------------------------


def write(
    store: Store,
    files: Mapping[str, bytes | None],
    redaction: Redaction = Redaction.SCANNED,
) -> None:
    store.write(lambda snap: Change("test", dict(files), redaction=redaction))


def test_the_store_refuses_a_context_it_cannot_resolve_or_trust(
    tmp_path: Path,
) -> None:
    store = Store.create(tmp_path / "store")
    data = context.canonical(helpers.CONTEXT)
    sha = context.digest(data)
    row = helpers.traces_row(context=sha)
    row_file = {rows.row_path(row["id"]): jsonio.canonical(row)}
    with pytest.raises(RowValidationError, match=f"its context {sha[:12]} is not"):
        write(store, row_file)
    inline = helpers.traces_row(context=helpers.CONTEXT)
    with pytest.raises(RowValidationError, match="names its context by sha256"):
        write(store, {rows.row_path(inline["id"]): jsonio.canonical(inline)})
    wrong = context.path_of("0" * 64)
    with pytest.raises(RowValidationError, match="hashes to"):
        write(store, {wrong: data})
    with pytest.raises(RowValidationError, match="not canonical"):
        write(store, {context.path_of(sha): orjson.dumps(helpers.CONTEXT)})
    bad = jsonio.canonical({"system": 1, "tools": None})
    with pytest.raises(RowValidationError, match=r"\$\.system"):
        write(store, {context.path_of(context.digest(bad)): bad})
    secret = context.canonical({"system": f"key {AKID}", "tools": None})
    with pytest.raises(SecretFoundError, match="unredacted secret"):
        write(store, {context.path_of(context.digest(secret)): secret}, Redaction.CHECK)
    assert store.head is not None and store.head.parents == []  # nothing written
    # the row with its context, in one commit or after it: both are fine
    write(store, {**row_file, context.path_of(sha): data})
    later = helpers.traces_row("c0ffee000001", context=sha)
    write(store, {rows.row_path(later["id"]): jsonio.canonical(later)})
    # a commit cannot delete the context of a row it writes
    with pytest.raises(RowValidationError, match="is not in the store"):
        write(store, {context.path_of(sha): None, **row_file})


def test_make_keeps_the_agent_s_order_and_says_none_when_nothing_is_known() -> None:
    assert context.make(None, None) is None
    assert context.make("   ", "not a list") is None
    made = context.make(
        None,
        [{"name": "b"}, {"description": "no name"}, {"name": "a", "parameters": 3}],
    )
    assert made == {
        "system": None,
        "tools": [
            {
                "name": "b",
                "description": "",
                "parameters": {"type": "object", "properties": {}},
            },
            {
                "name": "a",
                "description": "",
                "parameters": {"type": "object", "properties": {}},
            },
        ],
    }


# -- show and diff ----------------------------------------------------------------


def test_show_puts_the_context_back_and_diff_names_what_changed_in_it(
    project: Path, run: Run
) -> None:
    first, third = recorded()
    install_session(project, "context")
    one = entry_with_text("context", "The command printed: context-one")
    row_id = tag(run, "--trace", "--entry", one)
    shown = run("show", row_id, "--json")
    assert shown.exit_code == 0, shown.stderr
    sha = stored_row(project, row_id)["context"]
    assert orjson.loads(shown.stdout)["context"] == {"id": sha, **first}
    text = run("show", row_id)
    assert orjson.loads(text.stdout)["context"] == {"id": sha, **first}

    # the row now names run 3's context (as an edit could): the diff says
    # which context and what in it changed, not just two hashes
    store = Store.open(store_of(project))
    data = context.canonical(third)
    changed = {**stored_row(project, row_id), "context": context.digest(data)}
    store.write(
        lambda snap: Change(
            "another context",
            {
                rows.row_path(row_id): jsonio.canonical(changed),
                context.path_of(context.digest(data)): data,
            },
        )
    )
    result = run("diff", "--json")
    assert result.exit_code == 0, result.stderr
    diff = orjson.loads(result.stdout)
    assert diff["other_files"] == []  # the new context shows in the row
    [change] = diff["rows"]
    paths = [f["path"] for f in change["fields"]]
    assert paths == [
        "$.context.id",
        "$.context.system",
        "$.context.tools[2]",
        "$.context.tools[3]",
    ]
    assert change["fields"][2] == {
        "path": "$.context.tools[2]",
        "old": first["tools"][2],
    }


def test_exports_carry_the_context_unless_it_is_left_out(
    project: Path, run: Run, tmp_path: Path
) -> None:
    _, third = recorded()
    install_session(project, "context")
    tag(run, "--trace")
    tinker = orjson.loads(run("export", "--kind", "traces").stdout)
    assert tinker["messages"][0] == {"role": "system", "content": third["system"]}
    assert tinker["tools"] == third["tools"]
    openai = orjson.loads(
        run("export", "--kind", "traces", "--format", "openai").stdout
    )
    assert openai["tools"] == [
        {"type": "function", "function": t} for t in third["tools"]
    ]
    assert openai["messages"][0]["role"] == "system"
    bare = orjson.loads(run("export", "--kind", "traces", "--no-context").stdout)
    assert bare == {"messages": tinker["messages"][1:]}
    out = tmp_path / "bare.jsonl"
    done = run("export", "--kind", "traces", "--no-context", "-o", str(out), "--json")
    assert orjson.loads(done.stdout)["context"] is False


def test_gc_drops_a_context_once_no_row_names_it(project: Path, run: Run) -> None:
    install_session(project, "context")
    one = entry_with_text("context", "The command printed: context-one")
    first = tag(run, "--trace", "--entry", one)
    last = tag(run, "--trace")
    second = tag(run)  # the answer row shares the last trace's context
    kept = stored_row(project, last)["context"]
    gone = stored_row(project, first)["context"]
    assert run("rm", first, "--why", "a duplicate").exit_code == 0
    assert run("rm", last, "--why", "a duplicate").exit_code == 0
    assert len(files(project, "context/")) == 2  # rows go, contexts stay
    done = run("gc", "--json")
    assert done.exit_code == 0, done.stderr
    assert orjson.loads(done.stdout)["contexts_dropped"] == 1
    assert files(project, "context/") == [context.path_of(kept)]
    assert stored_row(project, second)["context"] == kept
    assert git(store_of(project), "log", "-1", "--format=%s", "--", "context") == (
        "gc: drop 1 contexts no row names\n"
    )
    # its bytes stay in history, as a removed row's do
    assert git(store_of(project), "show", f"HEAD~1:{context.path_of(gone)}")
    again = run("gc", "--json")
    assert orjson.loads(again.stdout)["contexts_dropped"] == 0


def test_validate_store_finds_a_context_taken_from_under_its_row(
    project: Path, run: Run
) -> None:
    install_session(project, "context")
    row_id = tag(run, "--trace")
    sha = stored_row(project, row_id)["context"]
    assert run("validate", "--store").exit_code == 0
    # a commit that deletes only the context (as a hand-made one could) is
    # not refused by the write path, which checks the rows it writes ...
    store = Store.open(store_of(project))
    store.write(
        lambda snap: Change(
            "lose it", {context.path_of(sha): None}, redaction=Redaction.KEPT
        )
    )
    # ... machine validate --store reads every row, and names it
    result = run("validate", "--store")
    assert result.exit_code == 4
    assert result.stdout == (
        f"{rows.row_path(row_id)}:1: $.context: its context {sha[:12]} is not in "
        "the store\n"
    )


def test_a_row_as_show_gives_it_can_be_edited_context_and_all(
    project: Path, run: Run, tmp_path: Path
) -> None:
    # Pi's /machine edit opens `machine show ID` in its editor and saves with
    # `machine edit ID --from -`: the context comes back with its id.
    install_session(project, "context")
    row_id = tag(run, "--trace")
    before = stored_row(project, row_id)["context"]
    shown = run("show", row_id).stdout
    same = tmp_path / "same.json"
    same.write_text(shown)
    unchanged = run("edit", row_id, "--from", str(same))
    assert (unchanged.exit_code, unchanged.stdout) == (
        0,
        f"{row_id}: nothing changed\n",
    )
    assert stored_row(project, row_id)["context"] == before
    value = orjson.loads(shown)
    value["context"]["system"] += "\nAlways answer in French."
    edited = tmp_path / "edited.json"
    edited.write_bytes(orjson.dumps(value))
    result = run("edit", row_id, "--from", str(edited))
    assert result.exit_code == 0, result.stderr
    after = stored_row(project, row_id)["context"]
    assert after != before
    assert stored_context(project, after)["system"].endswith("Always answer in French.")
    assert sorted(files(project, "context/")) == sorted(
        [context.path_of(before), context.path_of(after)]
    )


def test_an_observed_run_carries_its_context_unless_left_out(
    project: Path, run: Run
) -> None:
    _, third = recorded()
    install_session(project, "context")
    done = run("observe", "--json")
    assert done.exit_code == 0, done.stderr
    observed = stored_row(project, orjson.loads(done.stdout)["id"])
    assert observed["kind"] == "observed"
    assert stored_context(project, observed["context"]) == third
    one = entry_with_text("context", "The command printed: context-one")
    bare = run("observe", "--entry", one, "--no-context", "--json")
    assert bare.exit_code == 0, bare.stderr
    assert stored_row(project, orjson.loads(bare.stdout)["id"])["context"] is None
    assert files(project, "context/") == [context.path_of(observed["context"])]


def _in_order(value: Any) -> bytes:
    return orjson.dumps(value)  # keys in the order they are, not sorted


def test_the_agent_s_tools_keep_their_order_in_the_store_and_every_export(
    project: Path, run: Run
) -> None:
    # Pi sent each tool name first and its schema as "type", "required",
    # "properties": a chat template renders them in that order, so the store
    # and the exports keep it (the rest of each file stays sorted).
    _, third = recorded()
    sent = third["tools"]
    assert list(sent[0]["parameters"]) == ["type", "required", "properties"]
    install_session(project, "context")
    row_id = tag(run, "--trace")
    sha = stored_row(project, row_id)["context"]
    data = git(store_of(project), "show", f"HEAD:{context.path_of(sha)}").encode()
    assert _in_order(orjson.loads(data)["tools"]) == _in_order(sent)
    assert context.digest(data) == sha
    assert context.file_problems(context.path_of(sha), data) == []
    tinker = orjson.loads(run("export", "--kind", "traces").stdout)
    assert _in_order(tinker["tools"]) == _in_order(sent)
    openai = orjson.loads(
        run("export", "--kind", "traces", "--format", "openai").stdout
    )
    wrapped = [{"type": "function", "function": t} for t in sent]
    assert _in_order(openai["tools"]) == _in_order(wrapped)
    # `machine show` prints sorted JSON; saving it unchanged keeps the context
    saved = run("edit", row_id, "--from", "-", input=run("show", row_id).stdout)
    assert (saved.exit_code, saved.stdout) == (0, f"{row_id}: nothing changed\n")
    assert stored_row(project, row_id)["context"] == sha


def test_a_context_a_store_kept_with_sorted_keys_still_reads_and_validates() -> None:
    # Before the agent's order was kept, context files were sorted through
    # and through; they keep their hashes and read back as they are.
    data = jsonio.canonical(helpers.CONTEXT)
    sha = context.digest(data)
    path = context.path_of(sha)
    assert context.file_problems(path, data) == []
    loaded = context.load(sha, {path: data}.get)
    assert loaded == helpers.CONTEXT
    assert loaded is not None and loaded["tools"] is not None
    assert list(loaded["tools"][0]["parameters"]) == ["properties", "required", "type"]
    # re-stored unchanged, the same bytes: the same hash
    assert context.canonical(loaded) == data
    # and a file in neither form is refused
    assert context.file_problems(path, orjson.dumps(helpers.CONTEXT)) == [
        "not canonical JSON (indent 2, system then tools)"
    ]
