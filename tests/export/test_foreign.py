"""Other tools' chat data imports too: OpenAI chat fine-tuning JSONL with
tools, ShareGPT conversations, Hugging Face ``datasets`` JSONL and Parquet.

Each sample in tests/fixtures/foreign/ has the shape its tool writes (the
OpenAI file is its documentation's examples: a tool call without
``content``, ``weight`` on messages; the ShareGPT file has LLaMA-Factory's
function calls and tools as a JSON string; the Hugging Face files are
``Dataset.to_json`` / ``to_parquet`` of one dataset, with null columns).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from machine_git.core import paths
from machine_git.core.errors import FAILED
from machine_git.core.errors import INVALID
from tests.conftest import Run
from tests.conftest import git

FOREIGN = Path(__file__).parents[1] / "fixtures" / "foreign"
AKID = "AKIA" + "Q7ZK4XW2N5RT3PLM"  # split: no secret in the repository


def stored_rows(project: Path) -> list[dict[str, Any]]:
    store = paths.store_path(project)
    names = git(store, "ls-tree", "-r", "--name-only", "HEAD", "rows").split()
    return [orjson.loads(git(store, "show", f"HEAD:{n}")) for n in names]


def stored_context(project: Path, sha: str) -> Any:
    store = paths.store_path(project)
    return orjson.loads(git(store, "show", f"HEAD:context/{sha[:2]}/{sha}.json"))


def imported(run: Run, project: Path, name: str, fmt: str) -> list[dict[str, Any]]:
    path = FOREIGN / name
    checked = run("validate", str(path), "--format", fmt)
    assert checked.exit_code == 0, checked.output
    result = run("import", str(path), "--format", fmt)
    assert result.exit_code == 0, result.output
    by_first_words = sorted(stored_rows(project), key=lambda r: str(r["messages"][0]))
    return by_first_words


def test_openai_chat_fine_tuning_with_tools(project: Path, run: Run) -> None:
    path = FOREIGN / "openai-chat-tools.jsonl"
    assert run("validate", str(path)).stdout == (
        "checked 2 openai chat lines: all valid\n"
    )
    result = run("import", str(path))
    assert result.exit_code == 0, result.output
    assert result.stderr == (
        f"{path}: 2 chat lines carry no id, kind, note, time, original "
        "answer or redactions; ids are made from the content\n"
        f"warning: {path}: ignored keys a row has no place for: "
        "messages[].weight (1 line)\n"
    )
    weather, marv = sorted(stored_rows(project), key=lambda r: len(r["messages"]))[::-1]
    assert weather["kind"] == "train"
    assert weather["messages"][0] == {
        "role": "user",
        "content": "What is the weather in San Francisco?",
    }
    assert weather["messages"][1]["content"] is None  # OpenAI leaves it out
    assert weather["messages"][1]["tool_calls"][0]["function"]["name"] == (
        "get_current_weather"
    )
    context = stored_context(project, weather["context"])
    assert context["system"] == (
        "You are a helpful assistant that can look up the weather."
    )
    assert [t["name"] for t in context["tools"]] == ["get_current_weather"]
    assert "weight" not in str(marv["messages"])


def test_sharegpt_conversations_with_function_calls(project: Path, run: Run) -> None:
    loan, identity = imported(run, project, "sharegpt.jsonl", "sharegpt")
    assert identity["messages"][:2] == [
        {"role": "user", "content": "Who are you?"},
        {
            "role": "assistant",
            "content": "I am a language model trained to help with questions "
            "about code.",
        },
    ]
    assert "context" not in identity
    assert loan["messages"][1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {
                    "name": "calculate_loan_payment",
                    "arguments": '{"principal":50000,"interest_rate":5,"loan_term":10}',
                },
            }
        ],
    }
    assert loan["messages"][2] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": '{"monthly_payment": 530.33}',
    }
    context = stored_context(project, loan["context"])
    assert context["system"].startswith("You are a helpful assistant")
    assert context["tools"][0]["parameters"]["required"] == [
        "principal",
        "interest_rate",
        "loan_term",
    ]


def test_hugging_face_jsonl_and_parquet_give_the_same_rows(
    project: Path, run: Run, tmp_path: Path
) -> None:
    from_jsonl = imported(run, project, "hf-chat.jsonl", "hf")
    other = tmp_path / "other"
    (other / ".git").mkdir(parents=True)
    parquet = FOREIGN / "hf-chat.parquet"
    assert run("validate", str(parquet), "--format", "hf").exit_code == 0
    result = run("import", str(parquet), "--format", "hf", "--project", str(other))
    assert result.exit_code == 0, result.output
    assert "ignored keys a row has no place for: prompt (2 lines), prompt_id" in (
        result.stderr
    )
    from_parquet = sorted(stored_rows(other), key=lambda r: str(r["messages"][0]))
    provenance = ("source", "created_at")
    assert [
        {k: v for k, v in r.items() if k not in provenance} for r in from_parquet
    ] == [{k: v for k, v in r.items() if k not in provenance} for r in from_jsonl]
    calls = from_jsonl[1]["messages"][1]["tool_calls"]
    assert calls[0]["function"]["arguments"] == '{"command":"ls"}'  # was an object


def test_a_foreign_line_is_redacted(project: Path, run: Run, tmp_path: Path) -> None:
    text = (FOREIGN / "sharegpt.jsonl").read_text()
    path = tmp_path / "leak.jsonl"
    path.write_text(text.replace("Who are you?", f"Who are you? key={AKID}"))
    result = run("import", str(path), "--format", "sharegpt")
    assert result.exit_code == 0, result.output
    assert "redacted 1 secret (aws-access-key 1)\n" in result.stderr
    rows = stored_rows(project)
    assert AKID not in str(rows)
    assert sorted(r["redactions"].get("aws-access-key", 0) for r in rows) == [0, 1]


def test_a_bad_foreign_line_is_one_line_per_problem(
    project: Path, run: Run, tmp_path: Path
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(
        orjson.dumps(
            {
                "conversations": [
                    {"from": "robot", "value": "hi"},
                    {"from": "function_call", "value": "not json"},
                ]
            }
        )
        + b"\n"
    )
    result = run("import", str(path), "--format", "sharegpt")
    assert result.exit_code == INVALID
    assert result.stderr == (
        f"{path}:1: $.conversations[0].from: unknown speaker 'robot' (expected "
        "human, user, gpt, assistant, model, chatgpt, system, function_call, "
        "observation, tool)\n"
        f'{path}:1: $.conversations[1].value: a function_call must be JSON {{"name", '
        '"arguments"}\n'
        f"Error: {path}: 1 bad line; nothing imported\n"
    )
    checked = run("validate", str(path), "--format", "sharegpt")
    assert checked.exit_code == INVALID
    assert checked.stdout.splitlines()[0] == result.stderr.splitlines()[0]


def test_parquet_without_pyarrow_is_one_clear_line(
    project: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pyarrow is installed here; an import of it that fails is what a core
    # install without the training extra meets.
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    result = run("import", str(FOREIGN / "hf-chat.parquet"), "--format", "hf")
    assert result.exit_code == FAILED
    assert result.stderr == (
        "Error: reading Parquet needs pyarrow: pip install pyarrow (the training "
        "extra installs it: pip install torch==2.13.0 '.[train]' from a checkout)\n"
    )
