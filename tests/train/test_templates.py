"""Token-exact: machine's rendering equals each accepted model's own chat template.

For every family machine accepts, real traces (tagged from real Pi sessions:
parallel tool calls, a failed tool, several tool steps, thinking kept with
--reasoning) go through machine's path (row -> export messages -> renderer ->
supervised examples) and through the model's published Jinja chat template
(tests/fixtures/templates/, rendered by transformers' own template code). The
template's text is tokenized the way Hugging Face does it (added tokens whole,
the rest byte-level BPE with the model's real vocabulary). The ids must be
equal, and the loss weights 1 exactly on the trained assistant message and its
end token.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

import pytest
from transformers.utils.chat_template_utils import render_jinja_template

from machine_git.core import jsonio
from machine_git.export import export
from machine_git.rows import context
from machine_git.store.store import Store
from machine_git.train import datasets
from machine_git.train import families
from machine_git.train import rendering
from tests.conftest import FIXTURES
from tests.conftest import Run
from tests.conftest import fixture_lines
from tests.train import conftest as support

if TYPE_CHECKING:
    from machine_git.rows.rowtypes import Row

TEMPLATES = FIXTURES / "templates"
QWEN3 = json.loads((TEMPLATES / "qwen3" / "tokenizer_config.json").read_text())
QWEN3_5 = (TEMPLATES / "qwen3_5" / "chat_template.jinja").read_text()
KIMI_K2_THINKING = (TEMPLATES / "kimi_k2_thinking" / "chat_template.jinja").read_text()

# (base model, its family's chat template)
FAMILIES = [
    ("Qwen/Qwen3-30B-A3B", QWEN3["chat_template"]),
    ("Qwen/Qwen3-8B", QWEN3["chat_template"]),
    ("Qwen/Qwen3.5-4B", QWEN3_5),
    ("moonshotai/Kimi-K2-Thinking", KIMI_K2_THINKING),
]
QWEN_FAMILIES = [(model, t) for model, t in FAMILIES if model.startswith("Qwen/")]
# What the generation prompt holds after the assistant header: Qwen3.5's
# prompt opens the think block itself, so the served model reads "<think>\n"
# as prompt tokens and emits the rest of the turn after it.
PREFILL = {"qwen3": "", "qwen3_5": "<think>\n", "kimi_k2": ""}
# Each family's assistant header, and what its template writes after a
# message's end token.
HEADER = {
    "qwen3": ("<|im_start|>assistant\n", "\n"),
    "qwen3_5": ("<|im_start|>assistant\n", "\n"),
    "kimi_k2": ("<|im_assistant|>assistant<|im_middle|>", ""),
}
# Sessions whose last turn covers what a trace can hold.
TRACES = {
    "basic": "two tool calls in one message, one of them failed",
    "file-repair": "three tool steps, each with thinking",
    "multi-turn": "a write tool after earlier turns",
    "mixed": "text and a tool call in one message",
}


def hf_encode(tok: rendering.TmlTokenizer, text: str) -> list[int]:
    """Hugging Face's tokenization: added tokens whole, BPE in between."""
    added = rendering.special_names(tok.tml_tokenizer)
    pattern = re.compile(
        "(" + "|".join(map(re.escape, sorted(added, key=len, reverse=True))) + ")"
    )
    out: list[int] = []
    for piece in pattern.split(text):
        if piece in added:
            out.append(int(tok.tml_tokenizer.encode_special(piece)))
        elif piece:
            out.extend(tok.tml_tokenizer.encode_ordinary(piece))
    return out


def template_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The OpenAI-shaped messages a chat template takes (arguments as objects)."""
    out = []
    for message in messages:
        m = dict(message)
        if m.get("tool_calls"):
            m["tool_calls"] = [
                {
                    "type": "function",
                    "id": c["id"],
                    "function": {
                        "name": c["function"]["name"],
                        "arguments": json.loads(c["function"]["arguments"] or "{}"),
                    },
                }
                for c in m["tool_calls"]
            ]
        out.append(m)
    return out


def template_text(
    template: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    add_generation_prompt: bool = False,
) -> str:
    rendered: Any = render_jinja_template(
        [template_messages(messages)],
        tools=list(tools) if tools else None,
        chat_template=template,
        add_generation_prompt=add_generation_prompt,
    )
    return str(rendered[0][0])


def served(
    template: str,
    messages: list[dict[str, Any]],
    tok: rendering.TmlTokenizer,
    prefill: str,
    tools: list[dict[str, Any]] | None = None,
    header: tuple[str, str] = HEADER["qwen3"],
) -> tuple[list[int], list[int]]:
    """The ids the served model sees: its prompt, then the turn it produces.

    The prompt is the template's text up to the last assistant header (and
    the prefill the generation prompt adds), tokenized as Hugging Face does;
    the turn is the rest, up to and with its end token (``<|im_end|>``), as
    the model emits it after that prompt.
    """
    text = template_text(template, messages, tools)
    start, after = header
    assert text.endswith(tok.eos_token + after)
    text = text[: len(text) - len(after)]
    cut = text.rindex(start) + len(start + prefill)
    assert text[:cut].endswith(start + prefill)
    return hf_encode(tok, text[:cut]), hf_encode(tok, text[cut:])


def _trace_row(project: Path, run: Run, name: str, *flags: str) -> Row:
    support.tag(run, project, (name,), "--trace", *flags)
    store = Store.open(support.store_path(project))
    rows = [jsonio.loads(data) for _, data in store.iter_row_blobs()]
    row: Row = support.only([r for r in rows if r["kind"] == "traces"])
    return row


def check_examples(
    model: str,
    template: str,
    messages: list[dict[str, Any]],
    kind: str,
    tools: list[dict[str, Any]] | None = None,
    offered: list[dict[str, Any]] | None = None,
) -> int:
    """Assert token equality and exact weights; the number of examples checked.

    ``tools`` (cookbook ToolSpecs, as exports carry them) reach the template
    as agents send them: OpenAI functions (``offered``, when the test has the
    agent's own list).
    """
    seen = rendering.rendering(model)
    tok = seen.tokenizer
    # through the bytes of an export line, as a run reads its data.jsonl
    line = export.line({"messages": messages, **({"tools": tools} if tools else {})})
    examples = [
        one.example
        for one in datasets.render_line(
            jsonio.loads(line), seen.renderer, datasets.train_on_what(kind), None
        )
    ]
    if offered is None and tools:
        offered = [{"type": "function", "function": t} for t in tools]
    ends = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    if kind == "train":
        ends = ends[-1:]
    elif seen.renderer_name == "kimi_k2":
        return check_turns(template, messages, examples, tok, offered)
    assert len(examples) == len(ends)  # one sequence per trained assistant message
    prefill = PREFILL[seen.renderer_name]
    for (model_input, weights), end in zip(examples, ends, strict=True):
        ids = model_input.to_ints()
        prompt, turn = served(
            template,
            messages[: end + 1],
            tok,
            prefill,
            offered,
            HEADER[seen.renderer_name],
        )
        assert ids == prompt + turn, (tok.decode(ids), tok.decode(prompt + turn))
        if not prefill:
            # With no prefill the whole conversation tokenizes in one piece.
            text = template_text(template, messages[: end + 1], offered)
            after = HEADER[seen.renderer_name][1]
            assert ids == hf_encode(tok, text[: len(text) - len(after)])
        mask = [float(w) for w in weights]
        assert mask == [0.0] * len(prompt) + [1.0] * len(turn)
        assert ids[-1] == tok.eos_token_id
    return len(examples)


def check_turns(
    template: str,
    messages: list[dict[str, Any]],
    examples: list[Any],
    tok: rendering.TmlTokenizer,
    offered: list[dict[str, Any]] | None,
) -> int:
    """Kimi K2: one sequence per user turn, every assistant message trained.

    Its template keeps an assistant message's reasoning only after the last
    answer that called no tool, so the cookbook trains each user turn as one
    sequence. The sequence must be the template's text of the turn, and at
    each assistant message the served prompt (the template's text of what
    came before, with its generation prompt) must be exactly the tokens
    before it; the weights are 1 exactly on what the model emitted there.
    """
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    stops = [*users[1:], len(messages)]
    assert len(examples) == len(stops)
    for (model_input, weights), start, stop in zip(examples, users, stops, strict=True):
        ids = model_input.to_ints()
        assert ids == hf_encode(tok, template_text(template, messages[:stop], offered))
        mask = [0.0] * len(ids)
        for end in range(start, stop):
            if messages[end]["role"] != "assistant":
                continue
            prompt = hf_encode(
                tok, template_text(template, messages[:end], offered, True)
            )
            done = hf_encode(tok, template_text(template, messages[: end + 1], offered))
            assert ids[: len(prompt)] == prompt
            assert ids[len(done) - 1] == tok.eos_token_id
            mask[len(prompt) : len(done)] = [1.0] * (len(done) - len(prompt))
        assert [float(w) for w in weights] == mask
    return sum(m["role"] == "assistant" for m in messages)


def test_every_family_machine_accepts_is_checked_here() -> None:
    accepted = {v for v in vars(rendering).values() if isinstance(v, rendering.Family)}
    # The one exception, Qwen3-VL (no copy of its template is reachable): it
    # names no template, and `machine train models` says it is unchecked.
    unchecked = {f for f in accepted if not f.template}
    assert unchecked == {rendering.QWEN3_VL}
    assert "not checked against its chat template" in (
        families.verdict("Qwen/Qwen3-VL-30B-A3B-Instruct").why
    )
    checked = accepted - unchecked
    assert {rendering.family(model) for model, _ in FAMILIES} == checked
    # each checked against the template its family names
    by_folder = {
        "qwen3": QWEN3["chat_template"],
        "qwen3_5": QWEN3_5,
        "kimi_k2_thinking": KIMI_K2_THINKING,
    }
    for model, template in FAMILIES:
        assert template == by_folder[rendering.family(model).template]


@pytest.mark.parametrize(("model", "template"), FAMILIES)
@pytest.mark.parametrize("name", sorted(TRACES))
def test_traces_render_as_the_chat_template_does(
    project: Path, run: Run, model: str, template: str, name: str
) -> None:
    row = _trace_row(project, run, name)
    messages = datasets.row_messages(row)
    assert check_examples(model, template, messages, "traces") >= 2


@pytest.mark.parametrize(("model", "template"), QWEN_FAMILIES)
def test_parallel_results_share_one_user_block(
    project: Path, run: Run, model: str, template: str
) -> None:
    row = _trace_row(project, run, "basic")
    messages = datasets.row_messages(row)
    assert [m["role"] for m in messages] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    assert messages[3]["content"].startswith("Error: ls: cannot access")
    check_examples(model, template, messages, "traces")
    seen = rendering.rendering(model)
    (_, _), (last, _) = datasets.examples(
        datasets.cookbook_messages(messages),
        seen.renderer,
        datasets.train_on_what("traces"),
    )
    text = seen.tokenizer.decode(last.to_ints())
    assert "</tool_response>\n<tool_response>" in text
    assert text.count("<|im_start|>user") == 2  # the prompt, then both results


@pytest.mark.parametrize(("model", "template"), FAMILIES)
def test_thinking_kept_with_reasoning_renders_as_the_template(
    project: Path, run: Run, model: str, template: str
) -> None:
    row = _trace_row(project, run, "file-repair", "--reasoning")
    assert "trajectory" in row
    assert any(r["role"] == "reasoning" for r in row["trajectory"])
    messages = datasets.row_messages(row)
    assert check_examples(model, template, messages, "traces") == 4


@pytest.mark.parametrize(("model", "template"), FAMILIES)
def test_an_answer_row_renders_as_the_template(
    project: Path, run: Run, model: str, template: str
) -> None:
    support.tag(run, project, ("mixed",))
    store = Store.open(support.store_path(project))
    row = support.only([jsonio.loads(data) for _, data in store.iter_row_blobs()])
    assert check_examples(model, template, row["messages"], "train") == 1


def test_the_qwen3_fixture_names_the_special_tokens_machine_uses() -> None:
    tok = rendering.tokenizer("Qwen/Qwen3-30B-A3B")
    for token_id, spec in QWEN3["added_tokens_decoder"].items():
        assert tok.encode(spec["content"]) == [int(token_id)]
        assert tok.is_special_token(int(token_id)) is spec["special"], spec
        # split_special_tokens splits exactly the tokens HF marks special
        whole = tok.encode(spec["content"], split_special_tokens=True)
        assert (whole == [int(token_id)]) is (not spec["special"]), spec


@pytest.mark.parametrize(("model", "template"), FAMILIES)
def test_a_trace_with_its_context_renders_as_the_template(
    project: Path, run: Run, model: str, template: str
) -> None:
    # the real Pi session whose runs machine's extension recorded: the system
    # prompt and the tools lead the conversation as the template declares them
    row = _trace_row(project, run, "context")
    store = Store.open(support.store_path(project))
    row = context.inline(row, store.snapshot().read)
    messages, tools = datasets.row_conversation(row)
    assert messages[0]["role"] == "system"
    assert tools is not None and [t["name"] for t in tools] == ["read", "bash"]
    # the template gets the tools exactly as Pi sent them (its JSON, in its
    # key order: "type", "required", "properties"), not as machine stored them
    sent = [
        line["data"]["tools"]
        for line in fixture_lines("context")
        if line.get("customType") == "machine-context"
    ][-1]
    assert list(sent[0]["parameters"]) == ["type", "required", "properties"]
    offered = [{"type": "function", "function": t} for t in sent]
    assert check_examples(model, template, messages, "traces", tools, offered) == 2
    seen = rendering.rendering(model)
    first = datasets.examples(
        datasets.cookbook_messages(messages),
        seen.renderer,
        datasets.train_on_what("traces"),
        tools,
    )[0]
    text = seen.tokenizer.decode(first[0].to_ints())
    assert '"name": "bash"' in text and "Current working directory" in text


@pytest.mark.parametrize(("model", "template"), FAMILIES)
def test_non_ascii_tools_and_a_padded_system_prompt_render_as_the_template(
    model: str, template: str
) -> None:
    # The cookbook escapes non-ASCII in tool JSON and (Qwen3.5) neither wraps
    # the tool as the request gave it nor trims the system prompt; the
    # templates do. machine's renderers follow the templates.
    # In the agent's key order, not sorted: a tool's name first, the schema
    # keys as written.
    tools = [
        {
            "name": "grep",
            "description": "Search files — fast, with café-grade regexes",
            "parameters": {
                "type": "object",
                "required": ["pattern"],
                "properties": {
                    "pattern": {"type": "string", "description": "≥ 1 char"},
                    "paths": {"type": "array", "items": {"type": "string"}},
                    "opts": {"type": "object"},
                },
            },
        },
        {"name": "noop", "description": "", "parameters": {"type": "object"}},
    ]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "  You are terse.\n\n"},
        {"role": "user", "content": "find TODO"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {
                        "name": "grep",
                        "arguments": '{"pattern":"café — TODO",'
                        '"paths":["notes/été.md"],"opts":{"mode":"naïve","n":1}}',
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a.py:1: TODO"},
        {"role": "assistant", "content": "One TODO, in a.py."},
    ]
    assert check_examples(model, template, messages, "traces", tools) == 2
