"""Families machine refuses, each for a difference a test shows.

A family is refused when its published chat template renders a real trace in
a way machine's path cannot: the test renders the same trace through the
model's own template (tests/fixtures/templates/, with transformers' Jinja
code, tokenized as Hugging Face does) and through the cookbook renderer, and
asserts the difference that ``machine_git/train/families.py`` names.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from transformers.utils import chat_template_utils
from transformers.utils.chat_template_utils import render_jinja_template

from machine_git.core.errors import TrainingError
from machine_git.rows import context
from machine_git.store.store import Store
from machine_git.train import datasets
from machine_git.train import families
from tests.conftest import Run
from tests.conftest import fixture_lines
from tests.train import conftest as support
from tests.train.test_templates import TEMPLATES
from tests.train.test_templates import _trace_row
from tests.train.test_templates import template_text

GPT_OSS = (TEMPLATES / "gpt_oss" / "chat_template.jinja").read_text()


def session_date(name: str) -> dt.date:
    """The day the session's model was asked: its first entry's timestamp."""
    stamp = str(fixture_lines(name)[0]["timestamp"])
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).date()


def pin_date(monkeypatch: pytest.MonkeyPatch, day: dt.date) -> None:
    """The template's ``strftime_now`` as the served model saw it on ``day``.

    transformers' ``strftime_now`` reads the clock when the template renders;
    the served model saw the date of its request, so the test pins that day.
    """

    class Pinned(dt.datetime):
        @classmethod
        def now(cls, tz: dt.tzinfo | None = None) -> Pinned:
            return cls(day.year, day.month, day.day, 12, 0, 0, tzinfo=tz)

    monkeypatch.setattr(chat_template_utils, "datetime", Pinned)


def harmony_tokenizer() -> Any:
    import tml_renderers.tokenizers

    from machine_git.train.rendering import TmlTokenizer

    return TmlTokenizer(
        tml_renderers.tokenizers.HarmonyTokenizer(), "openai/gpt-oss-20b", "<|return|>"
    )


def test_gpt_oss_is_refused_for_parallel_tool_calls(
    project: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The real Pi session: one assistant message with two tool calls (ls of
    # two paths, the second failed), two results, then the answer.
    from tinker_cookbook.renderers.gpt_oss import GptOssRenderer

    row = _trace_row(project, run, "basic")
    messages = datasets.row_messages(row)
    assert [m["role"] for m in messages] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    calls = messages[1]["tool_calls"]
    assert len(calls) == 2
    day = session_date("basic")
    pin_date(monkeypatch, day)
    text = template_text(GPT_OSS, messages)
    assert f"Current date: {day.isoformat()}\n" in text
    # The template writes only the first call of the message ...
    first, second = (c["function"]["arguments"] for c in calls)
    assert text.count("<|start|>assistant to=functions.") == 1
    assert first.replace(" ", "") in text.replace(" ", "")
    assert second.replace(" ", "") not in text.replace(" ", "")
    # ... and names both results after it, the failed one included.
    name = calls[0]["function"]["name"]
    result = f"<|start|>functions.{name} to=assistant<|channel|>commentary<|message|>"
    assert text.count(result) == 2
    assert messages[3]["content"].startswith("Error: ls: cannot access")
    # machine's path (the cookbook's Harmony renderer, the date pinned the
    # same way) renders both calls: no rendering of the row equals the
    # template's, and the template's drops a call the model made.
    tok = harmony_tokenizer()
    renderer = GptOssRenderer(
        tok,
        use_system_prompt=True,
        reasoning_effort="medium",
        current_date=day.isoformat(),
    )
    model_input, _ = renderer.build_supervised_example(
        datasets.cookbook_messages(messages)
    )
    ours = tok.decode(model_input.to_ints())
    assert ours.count("<|start|>assistant to=functions.") == 2
    assert f"Current date: {day.isoformat()}\n" in ours
    with pytest.raises(TrainingError, match="only the first tool call"):
        families.family("openai/gpt-oss-20b")
    assert "only the first tool call" in str(families.refusal("openai/gpt-oss-120b"))


DEEPSEEK_V3_1 = (TEMPLATES / "deepseek_v3_1" / "chat_template.jinja").read_text()


def deepseek_tokenizer() -> Any:
    """tml-renderers' DeepSeek V3.1 vocabulary through machine's adapter."""
    import tml_renderers.tokenizers

    from machine_git.train.rendering import TmlTokenizer

    tml = tml_renderers.tokenizers.DeepSeekV31Tokenizer()
    eos = "<\uff5cend▁of▁sentence\uff5c>"
    return TmlTokenizer(tml, "deepseek-ai/DeepSeek-V3.1", eos)


def deepseek_text(messages: list[dict[str, Any]], tools: Any = None) -> str:
    # as Hugging Face's apply_chat_template calls it: the tokenizer's
    # bos_token given to the template; arguments as the request sent them
    rendered: Any = render_jinja_template(
        [messages],
        tools=tools,
        chat_template=DEEPSEEK_V3_1,
        bos_token="<\uff5cbegin▁of▁sentence\uff5c>",
    )
    return str(rendered[0][0])


def test_deepseek_v3_1_is_refused_because_its_template_ignores_the_tools(
    project: Path, run: Run
) -> None:
    # The real Pi session with its recorded context: a system prompt and the
    # tools Pi offered (read, bash).
    from tinker_cookbook import renderers

    row = _trace_row(project, run, "context")
    store = Store.open(support.store_path(project))
    row = context.inline(row, store.snapshot().read)
    messages, tools = datasets.row_conversation(row)
    assert tools is not None and [t["name"] for t in tools] == ["read", "bash"]
    offered = [{"type": "function", "function": t} for t in tools]
    declared = deepseek_text(messages, offered)
    # The template renders the same text with the tools as without them: it
    # has no place for a declaration, so what the served model was told about
    # the agent's tools is not the template's to say.
    assert declared == deepseek_text(messages)
    assert "Description:" not in declared and "## Tools" not in declared
    # machine's path (the cookbook's V3.1 renderer) declares them in the
    # system prompt, by the model card's convention, which the template lacks.
    tok = deepseek_tokenizer()
    renderer = renderers.get_renderer("deepseekv3", tok)
    first = datasets.examples(
        datasets.cookbook_messages(messages),
        renderer,
        datasets.train_on_what("traces"),
        tools,
    )[0]
    ours = tok.decode(first[0].to_ints())
    assert "## Tools\nYou have access to the following tools:\n\n### read" in ours
    assert "### bash" in ours
    with pytest.raises(TrainingError, match="ignores the tools"):
        families.family("deepseek-ai/DeepSeek-V3.1")
