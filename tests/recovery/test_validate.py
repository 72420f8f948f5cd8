"""Files are checked as what they are: rows, or export and import lines."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import referencing

from machine_git.core import jsonio
from machine_git.export import export
from machine_git.recovery import validate
from machine_git.rows import schemas
from tests import helpers

FORMATS = ("tinker", "openai", "dpo", "openai-dpo")


def reference(fmt: str) -> jsonschema.Draft202012Validator:
    """A line schema through the reference implementation (a cross-check)."""
    shared = [
        schemas.load_schema(n)
        for n in ("trajectory-v1", "common", "context", "line-openai")
    ]
    registry: referencing.Registry[Any] = referencing.Registry().with_resources(
        (s["$id"], referencing.Resource.from_contents(s)) for s in shared
    )
    return jsonschema.Draft202012Validator(
        schemas.load_schema(f"line-{fmt}"), registry=registry
    )


def exported(fmt: str) -> list[dict[str, Any]]:
    """What machine export writes in ``fmt`` for every row of the corpus."""
    lines = [export.render(row, fmt, redact=False) for row in helpers.valid_rows()]
    return [line for line in lines if line is not None]


def check(fmt: str, value: Any) -> list[str]:
    found = schemas.check(schemas.validator(f"line-{fmt}"), value)
    return [str(p) for p in found]


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_exported_line_is_valid_in_both_implementations(fmt: str) -> None:
    lines = exported(fmt)
    assert lines  # the corpus has a row of every format (dpo: the --as rewrite)
    for line in lines:
        assert check(fmt, line) == []
        assert reference(fmt).is_valid(line)


TINKER = export.to_tinker(helpers.valid_rows()[5])  # a system prompt, a tool call
OPENAI = export.to_openai(helpers.valid_rows()[5])
PAIR = export.to_openai_dpo(helpers.valid_rows()[6])
assert PAIR is not None
DPO: dict[str, Any] = PAIR  # OpenAI's shape (openai-dpo)
COMPARISON = export.to_dpo(helpers.valid_rows()[6])
assert COMPARISON is not None
WITH_TOOLS = export.to_tinker(helpers.traces_row(context=helpers.CONTEXT))
SAID = [{"role": "assistant", "content": "a"}]
INVALID = [
    (
        "tinker",
        "null content",
        helpers.mutate(TINKER, ["messages", 2, "content"], None),
    ),
    ("tinker", "no answer", helpers.mutate(TINKER, ["messages", 4, "content"], "")),
    ("tinker", "one message", {"messages": TINKER["messages"][:1]}),
    ("tinker", "bad role", helpers.mutate(TINKER, ["messages", 0, "role"], "robot")),
    ("tinker", "no messages", {"conversation": TINKER["messages"]}),
    ("openai", "null alone", helpers.mutate(OPENAI, ["messages", 4, "content"], None)),
    ("openai", "extra key", helpers.mutate(OPENAI, ["messages", 0, "x"], 1)),
    (
        "openai-dpo",
        "no preferred",
        helpers.mutate(DPO, ["preferred_output"], helpers.DELETE),
    ),
    ("openai-dpo", "two outputs", helpers.mutate(DPO, ["preferred_output"], SAID * 2)),
    (
        "openai-dpo",
        "user output",
        helpers.mutate(DPO, ["non_preferred_output", 0, "role"], "user"),
    ),
    (
        "openai-dpo",
        "empty output",
        helpers.mutate(DPO, ["non_preferred_output", 0, "content"], ""),
    ),
    ("openai-dpo", "extra key", helpers.mutate(DPO, ["chosen"], "x")),
    ("dpo", "no label", helpers.mutate(COMPARISON, ["label"], helpers.DELETE)),
    ("dpo", "tie", helpers.mutate(COMPARISON, ["label"], "Tie")),
    (
        "dpo",
        "null content",
        helpers.mutate(
            COMPARISON, ["comparison", "prompt_conversation", 0, "content"], None
        ),
    ),
    (
        "dpo",
        "two completions",
        helpers.mutate(COMPARISON, ["comparison", "completion_A"], SAID * 2),
    ),
    ("dpo", "extra key", helpers.mutate(COMPARISON, ["input"], {})),
    (
        "tinker",
        "tool without name",
        helpers.mutate(WITH_TOOLS, ["tools", 0, "name"], ""),
    ),
    ("tinker", "tools not a list", helpers.mutate(WITH_TOOLS, ["tools"], {})),
    ("trajectory", "empty", {"trajectory": []}),
    ("trajectory", "no user", {"trajectory": helpers.trajectory()[:1]}),
]


@pytest.mark.parametrize(
    ("fmt", "name", "line"), INVALID, ids=[f"{f}: {n}" for f, n, _ in INVALID]
)
def test_invalid_lines_fail_in_both_implementations(
    fmt: str, name: str, line: Any
) -> None:
    assert check(fmt, line) != []
    assert not reference(fmt).is_valid(line)


def test_problems_name_the_field_as_for_rows() -> None:
    assert check("tinker", INVALID[0][2]) == [
        '$.messages[2].content: null is not of type "string"'
    ]
    assert check("openai", INVALID[5][2])[0] == (
        '$.messages[4]: "tool_calls" is a required property'
    )
    assert check("openai-dpo", INVALID[9][2]) == [
        '$.non_preferred_output[0].role: "assistant" was expected'
    ]


@pytest.mark.parametrize(
    ("lines", "fmt"),
    [
        ([helpers.train_row()], "rows"),
        ([TINKER], "tinker"),
        ([OPENAI], "openai"),  # a null content: tinker's renderers need strings
        ([export.to_openai(helpers.train_row())], "tinker"),  # the same bytes
        ([DPO], "openai-dpo"),
        ([COMPARISON], "dpo"),
        ([{"trajectory": helpers.trajectory()}], "traces"),
        ([{"kind": "train", "id": "a1b2c3d4e5f6", "messages": []}], "rows"),
        ([{"name": "package", "version": "1.0.0"}], "rows"),  # no known shape
        ([], "rows"),
    ],
)
def test_the_first_line_decides_the_format(
    lines: list[dict[str, Any]], fmt: str, tmp_path: Path
) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(b"\n" + b"".join(jsonio.line(v) for v in lines))
    tally = validate.Tally()
    list(validate.check_file(path, tally))
    assert tally.formats == {str(path): fmt}


def test_a_line_of_another_shape_is_named_as_such(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(
        jsonio.line(TINKER) + jsonio.line(helpers.train_row()) + jsonio.line(DPO)
    )
    tally = validate.Tally()
    assert [str(f) for f in validate.check_file(path, tally)] == [
        f"{path}:2: $: a machine row in a file of tinker/openai chat lines "
        "(its first line decides)",
        f"{path}:3: $: an openai-dpo pair in a file of tinker/openai chat lines "
        "(its first line decides)",
    ]
    assert (tally.rows, tally.lines) == (3, {"tinker": 3})


def test_a_json_file_is_one_row_or_line(tmp_path: Path) -> None:
    path = tmp_path / "pair.json"
    path.write_bytes(jsonio.canonical(COMPARISON))  # indented: many lines, one value
    tally = validate.Tally()
    assert list(validate.check_file(path, tally)) == []
    assert (tally.rows, tally.lines) == (1, {"dpo": 1})
    assert tally.formats == {str(path): "dpo"}


def test_a_stream_is_read_as_jsonl_named_stdin() -> None:
    data = jsonio.line(helpers.train_row()) + b'{"kind": "train"}\n'
    tally = validate.Tally()
    found = [str(f) for f in validate.check_file(io.BytesIO(data), tally)]
    assert found[0].startswith("<stdin>:2: $: ")
    assert tally.formats == {"<stdin>": "rows"}


def test_an_openai_file_shows_its_flavour_on_any_line(tmp_path: Path) -> None:
    # machine's own openai export: a first line without tools or tool calls
    # reads as both; the second line's OpenAI functions decide.
    path = tmp_path / "o.jsonl"
    plain = export.to_openai(helpers.train_row())
    path.write_bytes(jsonio.line(plain) + jsonio.line(WITH_OPENAI_TOOLS))
    tally = validate.Tally()
    assert list(validate.check_file(path, tally)) == []
    assert tally.formats == {str(path): "openai"}
    assert tally.lines == {"openai": 2}


WITH_OPENAI_TOOLS = export.to_openai(helpers.traces_row(context=helpers.CONTEXT))


def test_a_tinker_line_after_an_openai_one_is_named(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(jsonio.line(WITH_OPENAI_TOOLS) + jsonio.line(WITH_TOOLS))
    tally = validate.Tally()
    assert [str(f) for f in validate.check_file(path, tally)] == [
        f"{path}:2: $: a chat (messages) line in a file of openai chat lines "
        "(its first line decides)"
    ]


@pytest.mark.parametrize(
    ("fmt", "line", "expected"),
    [
        ("openai", WITH_OPENAI_TOOLS, []),
        ("tinker", OPENAI, ['$.messages[2].content: null is not of type "string"']),
        (
            "dpo",
            TINKER,
            ["$: a chat (messages) line in a file of dpo pairs (--format says)"],
        ),
        ("traces", {"trajectory": helpers.trajectory()}, []),
        ("rows", TINKER, None),
    ],
)
def test_format_names_what_every_line_must_be(
    fmt: str, line: Any, expected: list[str] | None, tmp_path: Path
) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(jsonio.line(line))
    tally = validate.Tally()
    checked = validate.check_file(path, tally, fmt=fmt)
    found = [f"{f.path}: {f.problem}" for f in checked]
    if expected is None:
        assert found  # a chat line is no machine row
    else:
        assert found == expected
    assert tally.formats == {str(path): fmt}
