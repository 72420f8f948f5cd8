"""How a base model sees a conversation: its tokenizer and renderer, offline.

tml-renderers bundles the real tokenizers of the Qwen3 family (tinker.md §4),
so machine renders rows into the exact token ids Tinker will train on without
downloading anything. The cookbook asks for tokenizers by model name; we
register an adapter for each model here so its own code finds them.

Only families whose published chat template machine keeps as a test fixture
are accepted (tests/fixtures/templates/): a test renders traces through this
path and through the model's own Jinja template and asserts equal token ids.
Where the cookbook's renderer differs from the template, the fix is here
(:class:`GroupedQwen3Renderer`).
Heavy: imports tinker-cookbook (torch). Import after ``stack.require()``.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from typing import cast

import tinker
from tinker_cookbook import model_info
from tinker_cookbook import renderers
from tinker_cookbook import tokenizer_utils
from tinker_cookbook.exceptions import ConfigurationError
from tinker_cookbook.renderers.base import RenderContext
from tinker_cookbook.renderers.base import RenderedMessage
from tinker_cookbook.renderers.base import ToolSpec
from tinker_cookbook.renderers.base import _tool_call_payload
from tinker_cookbook.renderers.kimi_k2 import KimiK2Renderer
from tinker_cookbook.renderers.qwen3 import Qwen3Renderer
from tinker_cookbook.renderers.qwen3_5 import Qwen3_5Renderer

from machine_git.core.errors import TrainingError
from machine_git.train.families import KIMI_K2_THINKING
from machine_git.train.families import QWEN3
from machine_git.train.families import QWEN3_5
from machine_git.train.families import QWEN3_VL
from machine_git.train.families import Family
from machine_git.train.families import family

# the families, from families.py
__all__ = ["KIMI_K2_THINKING", "QWEN3", "QWEN3_5", "QWEN3_VL", "Family", "family"]

_EOS = "<|im_end|>"

# Added tokens Hugging Face marks "special": false in the Qwen tokenizers
# (tokenizer_config.json, added_tokens_decoder). They are still single tokens
# in text, but split_special_tokens does not split them and decoding with
# skip_special_tokens keeps them. tml_renderers lists them all as special.
NOT_SPECIAL = frozenset(
    {
        "<tool_call>",
        "</tool_call>",
        "<|fim_prefix|>",
        "<|fim_middle|>",
        "<|fim_suffix|>",
        "<|fim_pad|>",
        "<|repo_name|>",
        "<|file_sep|>",
        "<tool_response>",
        "</tool_response>",
        "<think>",
        "</think>",
    }
)


class TmlTokenizer:
    """A tml_renderers tokenizer with the slice of the HF API the cookbook uses.

    As in Hugging Face, every added token in text encodes as that token;
    ``split_special_tokens=True`` splits only the tokens HF marks special (the
    ``<|...|>`` markers), so tool-call and think tags in content stay whole.
    """

    def __init__(self, tml: Any, name_or_path: str, eos: str = _EOS) -> None:
        self.tml_tokenizer = tml
        self.name_or_path = name_or_path
        added = special_names(tml)
        self._all = _splitter(added)
        self._plain = _splitter([s for s in added if s in NOT_SPECIAL])
        self._special_ids = frozenset(
            int(tml.encode_special(s)) for s in added if s not in NOT_SPECIAL
        )
        self.eos_token = eos
        self.eos_token_id = int(tml.encode_special(eos))
        self.bos_token: str | None = None

    def encode(
        self,
        text: str,
        add_special_tokens: bool = False,
        split_special_tokens: bool = False,
        **_: Any,
    ) -> list[int]:
        pattern = self._plain if split_special_tokens else self._all
        out: list[int] = []
        for piece in pattern.split(text) if pattern else [text]:
            if not piece:
                continue
            if pattern is not None and pattern.fullmatch(piece):
                out.append(int(self.tml_tokenizer.encode_special(piece)))
            else:
                out.extend(self.tml_tokenizer.encode_ordinary(piece))
        return out

    def decode(self, token_ids: Sequence[int], **_: Any) -> str:
        return str(self.tml_tokenizer.decode(list(token_ids)))

    def is_special_token(self, token_id: int) -> bool:
        """Special as Hugging Face says: ``<|im_end|>`` is, ``<tool_call>`` is not."""
        return int(token_id) in self._special_ids


def special_names(tml: Any) -> list[str]:
    """The added tokens of a tml tokenizer, by the names its vocabulary encodes.

    tml-renderers lists DeepSeek's tokens in ASCII (``<|User|>``) but encodes
    and decodes them by their full-width names (U+FF5C for each ``|``, ``▁``
    for ``_``), which the templates write; Kimi's lists a few names that are no
    token at all (``<|[EOT]|>``), so text never holds them.
    """
    names = []
    for listed in tml.all_special_tokens:
        for name in (listed, _full_width(listed)):
            if _encodes(tml, name):
                names.append(name)
                break
    return names


_BAR = "\uff5c"  # FULLWIDTH VERTICAL LINE, in DeepSeek's token names


def _full_width(name: str) -> str:
    if not (name.startswith("<|") and name.endswith("|>")):
        return name
    return f"<{_BAR}" + name[2:-2].replace("_", "▁") + f"{_BAR}>"


def _encodes(tml: Any, name: str) -> bool:
    try:
        tml.encode_special(name)
    except ValueError:
        return False
    return True


def _splitter(tokens: list[str]) -> re.Pattern[str] | None:
    if not tokens:
        return None
    alternatives = "|".join(map(re.escape, sorted(tokens, key=len, reverse=True)))
    return re.compile(f"({alternatives})")


@functools.cache
def tokenizer(base_model: str) -> TmlTokenizer:
    """The base model's real tokenizer, offline; registered with the cookbook."""
    import tml_renderers.tokenizers

    chosen = family(base_model)
    tml = getattr(tml_renderers.tokenizers, chosen.tokenizer_class)()
    tok = TmlTokenizer(tml, base_model)
    # The cookbook types tokenizers as HF ones; ours has the slice it uses.
    tokenizer_utils.register_tokenizer(base_model, lambda: cast(Any, tok))
    return tok


class GroupedQwen3Renderer(Qwen3Renderer):
    """The cookbook's Qwen3 renderer with consecutive tool results in one block.

    Qwen3's chat template opens ``<|im_start|>user`` before the first of a
    run of tool messages and closes it after the last, so parallel results
    read ``</tool_response>\\n<tool_response>``; the cookbook (0.5.8) gives
    each result its own user block, which the model never saw.
    """

    def render_message(self, message: Any, ctx: RenderContext) -> RenderedMessage:
        rendered = super().render_message(message, ctx)
        if message.get("tool_calls"):
            return self._utf8_calls(rendered, message["tool_calls"])
        if message["role"] != "tool":
            return rendered
        header = rendered.header
        output = list(rendered.output)
        previous, following = ctx.prev_message, ctx.next_message
        if previous is not None and previous["role"] == "tool":
            # The block is open: the template writes only "\n" before the next.
            header = tinker.types.EncodedTextChunk(tokens=self.tokenizer.encode("\n"))
        if following is not None and following["role"] == "tool":
            output = output[:-1]  # no <|im_end|>: the next result continues
        return RenderedMessage(header=header, output=output)

    def _utf8_calls(
        self, rendered: RenderedMessage, calls: list[Any]
    ) -> RenderedMessage:
        """Tool calls as the template writes them: ``tojson``, text kept UTF-8.

        The cookbook (0.5.8) writes each ``<tool_call>`` with ``json.dumps``,
        which escapes non-ASCII (``caf\\u00e9``); the template's ``tojson``
        does not. The separators are the same (``", "``, ``": "``).
        """
        first = rendered.output[0]
        if not isinstance(first, tinker.types.EncodedTextChunk):
            return rendered
        text = str(self.tokenizer.decode(list(first.tokens)))
        fixed = text
        for call in calls:
            payload = _tool_call_payload(call)
            fixed = fixed.replace(json.dumps(payload), _tojson(payload))
        if fixed == text:
            return rendered
        tokens = self.tokenizer.encode(
            fixed, add_special_tokens=False, split_special_tokens=True
        )
        output = [tinker.types.EncodedTextChunk(tokens=tokens), *rendered.output[1:]]
        return RenderedMessage(header=rendered.header, output=output)

    def create_conversation_prefix_with_tools(
        self, tools: list[ToolSpec], system_prompt: str = ""
    ) -> list[renderers.Message]:
        """The template's tool declaration: each tool as ``tojson`` writes it.

        Hugging Face's ``tojson`` keeps non-ASCII text as it is; the cookbook
        (0.5.8) escapes it (``\u2014``), which tokenizes differently.
        """
        if not tools:
            return super().create_conversation_prefix_with_tools(tools, system_prompt)
        lines = "\n".join(
            _tojson({"type": "function", "function": dict(tool)}) for tool in tools
        )
        text = (
            "# Tools\n\nYou may call one or more functions to assist with the user "
            "query.\n\nYou are provided with function signatures within "
            f"<tools></tools> XML tags:\n<tools>\n{lines}\n</tools>\n\nFor each "
            "function call, return a json object with function name and arguments "
            "within <tool_call></tool_call> XML tags:\n<tool_call>\n"
            '{"name": <function-name>, "arguments": <args-json-object>}\n'
            "</tool_call>"
        )
        content = f"{system_prompt}\n\n{text}" if system_prompt else text
        return [renderers.Message(role="system", content=content)]


class Qwen35Renderer(Qwen3_5Renderer):
    """The cookbook's Qwen3.5 renderer with the template's tool declaration.

    The template writes each tool as the request gave it (OpenAI's
    ``{"type": "function", "function": {...}}``, what agents send) with
    ``tojson``, and the system prompt after the declaration, trimmed; the
    cookbook (0.5.8) writes the bare function, ASCII-escaped, untrimmed.
    """

    def _format_tool_call_argument(self, value: object) -> str:
        # The template: objects and arrays through tojson (UTF-8 kept; the
        # cookbook escapes it), anything else through |string.
        if isinstance(value, dict | list):
            return _tojson(value)
        return str(value)

    def create_conversation_prefix_with_tools(
        self, tools: list[ToolSpec], system_prompt: str = ""
    ) -> list[renderers.Message]:
        if not tools:
            return super().create_conversation_prefix_with_tools(tools, system_prompt)
        wrapped = [{"type": "function", "function": dict(tool)} for tool in tools]
        bare = super().create_conversation_prefix_with_tools(
            [cast(ToolSpec, {"name": "_"})], ""
        )
        upstream = str(bare[0]["content"])
        head, found, tail = upstream.partition(
            f"<tools>\n{json.dumps({'name': '_'})}\n"
        )
        if not found:  # the cookbook changed its declaration: say so, loudly
            raise TrainingError("the Qwen3.5 tool declaration is not the expected one")
        lines = "\n".join(_tojson(tool) for tool in wrapped)
        content = f"{head}<tools>\n{lines}\n{tail}"
        system = system_prompt.strip()
        if system:
            content = f"{content}\n\n{system}"
        return [renderers.Message(role="system", content=content)]


class KimiK2ThinkingRenderer(KimiK2Renderer):
    """The cookbook's Kimi K2 renderer with the template's JSON.

    Kimi K2 Thinking's chat template writes the tool declaration as
    ``tools | tojson`` (the request's OpenAI tools, in their order, ``", "``
    and ``": "`` separators, UTF-8) and each call's arguments, which servers
    hand it parsed, through ``tojson`` too. The cookbook (0.5.8) writes the
    declaration with sorted keys and compact separators (what the model
    repository's own Python ``apply_chat_template`` does) and the arguments
    as the agent's string. machine follows the template, like every family it
    accepts.
    """

    def render_message(self, message: Any, ctx: RenderContext) -> RenderedMessage:
        calls = message.get("tool_calls") if message["role"] == "assistant" else None
        if calls:
            message = {**message, "tool_calls": [_tojson_arguments(c) for c in calls]}
        return super().render_message(message, ctx)

    def create_conversation_prefix_with_tools(
        self, tools: list[ToolSpec], system_prompt: str = ""
    ) -> list[renderers.Message]:
        prefix = super().create_conversation_prefix_with_tools(tools, system_prompt)
        if not tools:
            return prefix
        if prefix[0]["role"] != "tool_declare":  # the cookbook changed: say so
            raise TrainingError("the Kimi K2 tool declaration is not the expected one")
        wrapped = [{"type": "function", "function": dict(tool)} for tool in tools]
        declared = renderers.Message(role="tool_declare", content=_tojson(wrapped))
        return [declared, *prefix[1:]]


def _tojson_arguments(call: Any) -> Any:
    """``call`` with its arguments as ``tojson`` writes them once parsed."""
    try:
        parsed = json.loads(call.function.arguments)
    except ValueError:
        return call  # not JSON: the template writes the string as it is
    function = call.function.model_copy(update={"arguments": _tojson(parsed)})
    return call.model_copy(update={"function": function})


def _tojson(value: object) -> str:
    # Jinja's tojson in transformers' chat templates: json.dumps, non-ASCII kept.
    return json.dumps(value, ensure_ascii=False)


def with_tools(
    renderer: renderers.Renderer,
    messages: list[renderers.Message],
    tools: list[ToolSpec] | None,
) -> list[renderers.Message]:
    """``messages`` led by the renderer's tool declaration, as the template does.

    The declaration takes the place of a leading system message (whose text
    it includes); without tools the messages are unchanged.
    """
    if not tools:
        return messages
    system = ""
    rest = messages
    if messages and messages[0]["role"] == "system":
        system = str(messages[0].get("content") or "")
        rest = messages[1:]
    prefix = renderer.create_conversation_prefix_with_tools(tools, system)
    return [*prefix, *rest]


@dataclass
class Rendering:
    """A base model's renderer, by name, over its offline tokenizer."""

    base_model: str
    renderer_name: str
    renderer: renderers.Renderer
    tokenizer: TmlTokenizer


def renderer_name(base_model: str) -> str:
    """The renderer machine uses for ``base_model`` (the cookbook's choice)."""
    chosen = family(base_model)
    try:
        recommended = str(model_info.get_recommended_renderer_name(base_model))
    except (ConfigurationError, KeyError, ValueError):
        recommended = chosen.renderer  # a new size of a known family
    if recommended != chosen.renderer:
        raise TrainingError(
            f"{base_model}: the cookbook recommends renderer {recommended}, which "
            f"machine does not check against the {chosen.name} chat template"
        )
    return recommended


@functools.cache
def rendering(base_model: str, name: str | None = None) -> Rendering:
    """Tokenizer and renderer (``name``, default: the family's)."""
    tok = tokenizer(base_model)
    chosen = name or renderer_name(base_model)
    if chosen != family(base_model).renderer:
        raise TrainingError(
            f"renderer {chosen} is not checked against the "
            f"{family(base_model).name} chat template (machine uses "
            f"{family(base_model).renderer})"
        )
    if chosen == QWEN3.renderer:
        return Rendering(base_model, chosen, GroupedQwen3Renderer(cast(Any, tok)), tok)
    if chosen == QWEN3_5.renderer:
        return Rendering(base_model, chosen, Qwen35Renderer(cast(Any, tok)), tok)
    if chosen == KIMI_K2_THINKING.renderer:
        kimi = KimiK2ThinkingRenderer(cast(Any, tok))
        return Rendering(base_model, chosen, kimi, tok)
    if chosen == QWEN3_VL.renderer:
        from tinker_cookbook.renderers.qwen3 import Qwen3VLInstructRenderer

        from machine_git.train import vision

        processor = vision.image_processor()  # offline: no AutoImageProcessor
        vl = Qwen3VLInstructRenderer(cast(Any, tok), processor)
        return Rendering(base_model, chosen, vl, tok)
    try:
        renderer = renderers.get_renderer(chosen, cast(Any, tok), model_name=base_model)
    except (ConfigurationError, KeyError, ValueError) as e:
        raise TrainingError(f"unknown renderer {chosen!r}: {e}") from None
    return Rendering(base_model, chosen, renderer, tok)
