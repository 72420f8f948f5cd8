from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

import pytest

from machine_git.core import jsonio
from machine_git.core.errors import TrainingError
from machine_git.export import export
from machine_git.store.store import Store
from machine_git.train import config
from machine_git.train import datasets
from machine_git.train import rendering
from tests.conftest import Run
from tests.conftest import install_session
from tests.train import conftest as support

if TYPE_CHECKING:
    from machine_git.rows.rowtypes import Row

IM_END = 151645
TOOL_CALL = 151657  # <tool_call>
TOOL_RESPONSE = 151665  # <tool_response>


def _rows(project: Path, kind: str) -> list[Row]:
    store = Store.open(support.store_path(project))
    found = [jsonio.loads(data) for _, data in store.iter_row_blobs()]
    return [r for r in found if r["kind"] == kind]


def _data(row: Row) -> list[Any]:
    seen = rendering.rendering(support.MODEL)
    messages = datasets.cookbook_messages(datasets.row_messages(row))
    examples = datasets.examples(
        messages, seen.renderer, datasets.train_on_what(row["kind"])
    )
    return [datasets.datum(example, 32768) for example in examples]


def _tokens_and_mask(datum: Any) -> tuple[list[int], list[int], list[bool]]:
    inputs = datum.model_input.to_ints()
    targets = [int(t) for t in datum.loss_fn_inputs["target_tokens"].data]
    mask = [w > 0 for w in datum.loss_fn_inputs["weights"].data]
    return inputs, targets, mask


def _trained(datum: Any) -> str:
    _, targets, mask = _tokens_and_mask(datum)
    tok = rendering.tokenizer(support.MODEL)
    return tok.decode([t for t, m in zip(targets, mask, strict=True) if m])


def test_a_trace_trains_each_assistant_turn_once(project: Path, run: Run) -> None:
    support.tag(run, project, ("file-repair",), "--trace")
    row = support.only(_rows(project, "traces"))
    data = _data(row)
    # qwen3 (a thinking renderer) writes history differently from the turn it
    # produces, so each assistant turn is its own sequence, ending at it.
    assert len(data) == 4  # read, edit, bash, answer
    for datum in data:
        inputs, targets, _ = _tokens_and_mask(datum)
        assert targets == [*inputs[1:], targets[-1]]
    empty = "<think>\n\n</think>\n\n"
    assert [_trained(d) for d in data] == [
        empty + '<tool_call>\n{"name": "read", "arguments": {"path": "calc.py"}}\n'
        "</tool_call><|im_end|>",
        empty + '<tool_call>\n{"name": "edit", "arguments": {"path": "calc.py", '
        '"edits": [{"oldText": "def add(a, b)\\n", "newText": "def add(a, b):\\n"}]}}'
        "\n</tool_call><|im_end|>",
        empty
        + '<tool_call>\n{"name": "bash", "arguments": {"command": "python3 calc.py"}}'
        "\n</tool_call><|im_end|>",
        empty + "Fixed the missing colon in calc.py; `python3 calc.py` now prints 5."
        "<|im_end|>",
    ]
    weighted = {
        t for d in data for t, m in zip(*_tokens_and_mask(d)[1:], strict=True) if m
    }
    assert TOOL_CALL in weighted and IM_END in weighted
    assert TOOL_RESPONSE not in weighted


def test_parallel_tool_results_are_one_user_block_of_context(
    project: Path, run: Run
) -> None:
    support.tag(run, project, ("basic",), "--trace")
    data = _data(support.only(_rows(project, "traces")))
    assert len(data) == 2  # the parallel calls, then the answer
    _, targets, mask = _tokens_and_mask(data[-1])
    tok = rendering.tokenizer(support.MODEL)
    context = tok.decode([t for t, m in zip(targets, mask, strict=True) if not m])
    # Qwen3's template keeps one user block open around consecutive results.
    assert context == (
        "user\nNow two-tools: read notes.md and list /nonexistent-dir.<|im_end|>\n"
        "<|im_start|>assistant\n"
        '<tool_call>\n{"name": "read", "arguments": {"path": "notes.md"}}\n'
        "</tool_call>\n"
        '<tool_call>\n{"name": "bash", "arguments": {"command": "ls '
        '/nonexistent-dir"}}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\n<tool_response>\n# Notes\nfixture notes line 2\n\n"
        "</tool_response>\n<tool_response>\nError: ls: cannot access "
        "'/nonexistent-dir': No such file or directory\n\n\nCommand exited with code 2"
        "\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    )
    assert _trained(data[-1]).endswith("No such file or directory<|im_end|>")
    weights = data[-1].loss_fn_inputs["weights"].data
    assert sum(weights) == pytest.approx(1.0)  # mean reduction: 1 per sequence
    assert len(set(w for w in weights if w > 0)) == 1


def test_answer_row_trains_only_its_answer(project: Path, run: Run) -> None:
    support.tag(run, project, ("mixed",))
    row = support.only(_rows(project, "train"))
    (datum,) = _data(row)
    assert _trained(datum) == (
        "<think>\n\n</think>\n\n" + row["messages"][-1]["content"] + "<|im_end|>"
    )


def test_cookbook_messages_need_tool_call_objects_and_no_nulls() -> None:
    messages = datasets.cookbook_messages(
        [
            {"role": "user", "content": "ls", "name": None},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "type": "function",
                        "id": "c1",
                        "function": {"name": "ls", "arguments": ""},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
        ]
    )
    assert messages[0] == {"role": "user", "content": "ls"}
    call = messages[1]["tool_calls"][0]
    assert (call.id, call.function.name, call.function.arguments) == ("c1", "ls", "{}")


def _cfg(tmp: Path, lines: list[bytes], batch_size: int) -> config.RunConfig:
    data = b"".join(lines)
    (tmp / "data.jsonl").write_bytes(data)
    return config.RunConfig(
        run_id="traces-00000000-000000",
        dataset_commit="0" * 40,
        revision="HEAD",
        kind="traces",
        export_sha256=hashlib.sha256(data).hexdigest(),
        rows=len(lines),
        base_model=support.MODEL,
        renderer="qwen3",
        train_on_what="all_assistant_messages",
        hyper=config.Hyper(batch_size=batch_size),
    )


def test_export_builder_batches_the_export_and_refuses_fewer_rows_than_a_batch(
    project: Path, run: Run, tmp_path: Path
) -> None:
    support.tag(run, project, ("basic", "mixed", "file-repair"), "--trace")
    traces = _rows(project, "traces")
    lines = [jsonio.line(export.to_tinker(r)) for r in traces]
    cfg = _cfg(tmp_path, lines, batch_size=2)
    dataset = datasets.build(cfg, tmp_path)
    direct = [d for r in traces for d in _data(r)]
    assert len(dataset.datums) == len(direct) == 8  # basic 2, mixed 2, file-repair 4
    assert len(dataset) == 4  # batches of 2
    assert [d.model_input.to_ints() for d in dataset.datums] == [
        d.model_input.to_ints() for d in direct
    ]
    with pytest.raises(TrainingError) as e:
        datasets.build(_cfg(tmp_path, lines, batch_size=4), tmp_path)
    assert str(e.value) == (
        "3 rows to train: fewer than one batch of 4 (tag more rows or lower "
        "--batch-size)"
    )


def test_a_changed_export_is_refused(tmp_path: Path) -> None:
    line = jsonio.line(
        {
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "yo"},
            ]
        }
    )
    cfg = _cfg(tmp_path, [line], batch_size=1)
    (tmp_path / "data.jsonl").write_bytes(line + line)
    with pytest.raises(TrainingError) as e:
        datasets.build(cfg, tmp_path)
    assert "data.jsonl changed since run traces-00000000-000000 was prepared" in str(
        e.value
    )


# -- every export format through the cookbook's own loaders and machine's ------------


def _export(run: Run, tmp_path: Path, fmt: str, *kinds: str) -> Path:
    target = tmp_path / f"{fmt}-{'-'.join(kinds)}.jsonl"
    flags = [f for k in kinds for f in ("--kind", k)]
    # The cookbook's conversation loaders read text: images stay [image]
    # (an OpenAI export would carry them as image_url parts).
    flags.append("--no-images")
    done = run("export", "--format", fmt, *flags, "-o", str(target))
    assert done.exit_code == 0, done.stderr
    return target


def _common(batch_size: int = 1) -> Any:
    from tinker_cookbook.supervised.types import ChatDatasetBuilderCommonConfig

    rendering.rendering(support.MODEL)  # registers the offline tokenizer
    return ChatDatasetBuilderCommonConfig(
        model_name_for_tokenizer=support.MODEL,
        renderer_name=rendering.renderer_name(support.MODEL),
        max_length=32768,
        batch_size=batch_size,
    )


@pytest.mark.parametrize("fmt", ["tinker", "openai"])
def test_chat_exports_load_in_the_cookbook_and_train_in_machine(
    project: Path, run: Run, tmp_path: Path, fmt: str
) -> None:
    from tinker_cookbook.supervised.data import FromConversationFileBuilder

    support.tag(run, project, ("basic", "file-repair", "context"), "--trace")
    support.tag(run, project, ("mixed", "image", "multi-turn"))
    answers = _export(run, tmp_path, fmt, "train")
    # the cookbook's conversation-file loader reads the answer rows and
    # renders every batch of them
    loaded, _ = FromConversationFileBuilder(
        common_config=_common(), file_path=str(answers)
    )()
    assert len(loaded) == 3
    assert all(len(loaded.get_batch(i)) == 1 for i in range(len(loaded)))
    # traces (tool calls, tools) are rendered by machine's ExportBuilder: the
    # cookbook's loader passes rows through Arrow, which gives every message
    # tool_calls: None once one row has them (tinker.md §0.4)
    traces = _export(run, tmp_path, fmt, "traces")
    with pytest.raises(TypeError, match="'NoneType' object is not iterable"):
        cooked, _ = FromConversationFileBuilder(
            common_config=_common(), file_path=str(traces)
        )()
        cooked.get_batch(0)  # cookbook 0.5.8; when this passes, use its loader
    built, _ = datasets.ExportBuilder(common_config=_common(), file_path=str(traces))()
    assert isinstance(built, datasets.ListDataset)
    assert built.row_count == 3
    assert len(built) == 2 + 4 + 2  # one sequence per assistant turn
    # and machine train validate takes the file as it is
    result = run(
        "train", "validate", str(traces), "--kind", "traces", "--batch-size", "1"
    )
    assert result.exit_code == 0, result.output
    assert "ok: no problems" in result.stdout


def tag_bad(run: Run, project: Path, name: str, *flags: str) -> None:
    install_session(project, name)
    result = run("bad", *flags)
    assert result.exit_code == 0, result.stderr


def test_dpo_exports_load_with_the_cookbook_s_comparison_loader(
    project: Path, run: Run, tmp_path: Path
) -> None:
    from tinker_cookbook.preference.preference_datasets import (
        ComparisonBuilderFromJsonl,
    )

    tag_bad(run, project, "basic", "--as", "notes.md has a header.")
    tag_bad(run, project, "context", "--trace", "--as", "It printed context-three.")
    tag_bad(run, project, "mixed", "no rewrite: not a pair")
    pairs = _export(run, tmp_path, "dpo")
    loader = ComparisonBuilderFromJsonl(train_path=str(pairs))
    train, test = loader.get_labeled_comparisons()
    assert test is None
    assert [c.label for c in train] == ["A", "A"]
    assert sorted(c.comparison.completion_A[0]["content"] for c in train) == [
        "It printed context-three.",
        "notes.md has a header.",
    ]
    assert sorted(c.comparison.completion_B[0]["content"] for c in train) == [
        "The command printed: context-three",
        'notes.md starts with "# Notes". The command `ls /nonexistent-dir` failed: '
        "ls: cannot access '/nonexistent-dir': No such file or directory",
    ]
    trace = next(c for c in train if len(c.comparison.prompt_conversation) > 1)
    assert [m["role"] for m in trace.comparison.prompt_conversation] == [
        "system",
        "user",
        "assistant",
        "tool",
    ]
