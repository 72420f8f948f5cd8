from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
import tml_renderers.chat
import tml_renderers.renderers
import tml_renderers.tinker

from machine_git import export
from machine_git import jsonio
from machine_git.errors import TrainingError
from machine_git.store import Store
from machine_git.train import config
from machine_git.train import datasets
from machine_git.train import rendering
from tests.conftest import Run
from tests.train import conftest as support

IM_END = 151645
TOOL_CALL = 151657  # <tool_call>
TOOL_RESPONSE = 151665  # <tool_response>


def _rows(project: Path, kind: str) -> list[dict[str, Any]]:
    store = Store.open(support.store_path(project))
    found = [jsonio.loads(data) for _, data in store.iter_row_blobs()]
    return [r for r in found if r["kind"] == kind]


def _datum(row: dict[str, Any]) -> Any:
    seen = rendering.rendering(support.MODEL)
    messages = datasets.cookbook_messages(datasets.row_messages(row))
    examples = datasets.examples(
        messages, seen.renderer, datasets.train_on_what(row["kind"])
    )
    assert len(examples) == 1  # qwen3_instruct extends: one sequence per trace
    return datasets.datum(examples[0], 32768)


def _tokens_and_mask(datum: Any) -> tuple[list[int], list[int], list[bool]]:
    inputs = datum.model_input.to_ints()
    targets = [int(t) for t in datum.loss_fn_inputs["target_tokens"].data]
    mask = [w > 0 for w in datum.loss_fn_inputs["weights"].data]
    return inputs, targets, mask


def test_trace_datum_matches_the_native_qwen3_renderer(project: Path, run: Run) -> None:
    support.tag(run, project, ("file-repair",), "--trace")
    row = support.only(_rows(project, "traces"))
    inputs, targets, mask = _tokens_and_mask(_datum(row))
    tokens = [*inputs, targets[-1]]
    assert targets == tokens[1:]

    # Oracle: tml_renderers' own Qwen3 instruct renderer, an independent
    # implementation, splits the trace into one example per assistant turn.
    native = tml_renderers.renderers.Qwen3.instruct()
    messages = datasets.row_messages(row)
    examples = native.render_for_sft(
        tml_renderers.chat.MessageList.from_oss_messages(messages)
    )
    assert len(examples) == 4  # read, edit, bash, answer
    union = [False] * len(tokens)
    for example in examples:
        ids, weights = (
            tml_renderers.tinker.training_example_to_tinker_model_input_and_weights(
                example
            )
        )
        assert tokens[: ids.length] == ids.to_ints()
        for i, w in enumerate(weights):
            union[i] = union[i] or w > 0
    assert tokens == ids.to_ints()
    assert mask == union[1:]

    tok = rendering.tokenizer(support.MODEL)
    trained = tok.decode([t for t, m in zip(targets, mask, strict=True) if m])
    assert trained == (
        '<tool_call>\n{"name": "read", "arguments": {"path": "calc.py"}}\n'
        "</tool_call><|im_end|>"
        '<tool_call>\n{"name": "edit", "arguments": {"path": "calc.py", "edits": '
        '[{"oldText": "def add(a, b)\\n", "newText": "def add(a, b):\\n"}]}}\n'
        "</tool_call><|im_end|>"
        '<tool_call>\n{"name": "bash", "arguments": {"command": "python3 calc.py"}}\n'
        "</tool_call><|im_end|>"
        "Fixed the missing colon in calc.py; `python3 calc.py` now prints 5.<|im_end|>"
    )
    weighted_ids = {t for t, m in zip(targets, mask, strict=True) if m}
    context_ids = {t for t, m in zip(targets, mask, strict=True) if not m}
    assert TOOL_CALL in weighted_ids and IM_END in weighted_ids
    assert TOOL_RESPONSE in context_ids and TOOL_RESPONSE not in weighted_ids


def test_tool_results_are_context_not_loss(project: Path, run: Run) -> None:
    support.tag(run, project, ("basic",), "--trace")
    datum = _datum(support.only(_rows(project, "traces")))
    _, targets, mask = _tokens_and_mask(datum)
    tok = rendering.tokenizer(support.MODEL)
    context = tok.decode([t for t, m in zip(targets, mask, strict=True) if not m])
    assert context == (
        "user\nNow two-tools: read notes.md and list /nonexistent-dir.<|im_end|>\n"
        "<|im_start|>assistant\n\n"
        "<|im_start|>user\n<tool_response>\n# Notes\nfixture notes line 2\n\n"
        "</tool_response><|im_end|>\n"
        "<|im_start|>user\n<tool_response>\nError: ls: cannot access "
        "'/nonexistent-dir': No such file or directory\n\n\nCommand exited with code 2"
        "\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    )
    trained = tok.decode([t for t, m in zip(targets, mask, strict=True) if m])
    assert trained.startswith('<tool_call>\n{"name": "read"')
    assert trained.endswith("No such file or directory<|im_end|>")
    weights = datum.loss_fn_inputs["weights"].data
    assert sum(weights) == pytest.approx(1.0)  # mean reduction: 1 per sequence
    assert len(set(w for w in weights if w > 0)) == 1


def test_answer_row_trains_only_its_answer(project: Path, run: Run) -> None:
    support.tag(run, project, ("mixed",))
    row = support.only(_rows(project, "train"))
    _, targets, mask = _tokens_and_mask(_datum(row))
    tok = rendering.tokenizer(support.MODEL)
    trained = tok.decode([t for t, m in zip(targets, mask, strict=True) if m])
    assert trained == row["messages"][-1]["content"] + "<|im_end|>"


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
        renderer="qwen3_instruct",
        train_on_what="all_assistant_messages",
        hyper=config.Hyper(batch_size=batch_size),
    )


def test_export_builder_batches_the_export_and_refuses_zero_steps(
    project: Path, run: Run, tmp_path: Path
) -> None:
    support.tag(run, project, ("basic", "mixed", "file-repair"), "--trace")
    traces = _rows(project, "traces")
    lines = [jsonio.line(export.to_tinker(r)) for r in traces]
    cfg = _cfg(tmp_path, lines, batch_size=2)
    dataset = datasets.build(cfg, tmp_path)
    assert (len(dataset), len(dataset.datums)) == (1, 3)  # the third waits for a batch
    direct = [_datum(r) for r in traces]
    assert [d.model_input.to_ints() for d in dataset.get_batch(0)] == [
        d.model_input.to_ints() for d in direct[:2]
    ]
    with pytest.raises(TrainingError) as e:
        datasets.build(_cfg(tmp_path, lines, batch_size=4), tmp_path)
    assert str(e.value) == (
        "3 sequences from 3 rows: fewer than one batch of 4, so 0 training steps "
        "(tag more rows or lower --batch-size)"
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
