"""How a base model sees a conversation: its tokenizer and renderer, offline.

tml-renderers bundles the real tokenizers of the Qwen3 family (tinker.md §4),
so machine renders rows into the exact token ids Tinker will train on without
downloading anything. The cookbook asks for tokenizers by model name; we
register an adapter for each model here so its own code finds them.
Heavy: imports tinker-cookbook (torch). Import after ``stack.require()``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from typing import cast

from tinker_cookbook import model_info
from tinker_cookbook import renderers
from tinker_cookbook import tokenizer_utils
from tinker_cookbook.exceptions import ConfigurationError

from machine_git.errors import TrainingError
from machine_git.train.config import DEFAULT_BASE_MODEL

# Base-model name prefix -> the tml_renderers tokenizer with its exact vocabulary.
# Qwen3.5 and 3.6 share one tokenizer (model_info says so); 3.5 must be
# matched before the shorter "Qwen/Qwen3-" prefix.
_OFFLINE = (
    ("Qwen/Qwen3.5-", "Qwen35Tokenizer"),
    ("Qwen/Qwen3.6-", "Qwen35Tokenizer"),
    ("Qwen/Qwen3-", "Qwen3Tokenizer"),
)
_EOS = "<|im_end|>"


class TmlTokenizer:
    """A tml_renderers tokenizer with the slice of the HF API the cookbook uses.

    Like an HF Qwen tokenizer, special-token literals in text encode as the
    special token; ``split_special_tokens=True`` keeps only the ``<|...|>``
    markers special, so tool-call tags in content are never split.
    """

    def __init__(self, tml: Any, name_or_path: str, eos: str = _EOS) -> None:
        self.tml_tokenizer = tml
        self.name_or_path = name_or_path
        added = list(tml.all_special_tokens)
        self._all = _splitter(added)
        self._plain = _splitter([s for s in added if not s.startswith("<|")])
        self._specials = set(added)
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
        return bool(self.tml_tokenizer.is_special_token(int(token_id)))


def _splitter(tokens: list[str]) -> re.Pattern[str] | None:
    if not tokens:
        return None
    alternatives = "|".join(map(re.escape, sorted(tokens, key=len, reverse=True)))
    return re.compile(f"({alternatives})")


def offline_tokenizer_class(base_model: str) -> str | None:
    """The tml_renderers tokenizer class for ``base_model``, or None."""
    for prefix, name in _OFFLINE:
        if base_model.startswith(prefix) and "-VL-" not in base_model:
            return name
    return None


@functools.cache
def tokenizer(base_model: str) -> TmlTokenizer:
    """The base model's real tokenizer, offline; registered with the cookbook."""
    name = offline_tokenizer_class(base_model)
    if name is None:
        raise TrainingError(
            f"no offline tokenizer for {base_model}: machine renders the Qwen3, "
            f"Qwen3.5 and Qwen3.6 families (default {DEFAULT_BASE_MODEL})"
        )
    import tml_renderers.tokenizers

    tok = TmlTokenizer(getattr(tml_renderers.tokenizers, name)(), base_model)
    # The cookbook types tokenizers as HF ones; ours has the slice it uses.
    tokenizer_utils.register_tokenizer(base_model, lambda: cast(Any, tok))
    return tok


@dataclass
class Rendering:
    """A base model's renderer, by name, over its offline tokenizer."""

    base_model: str
    renderer_name: str
    renderer: renderers.Renderer
    tokenizer: TmlTokenizer


def renderer_name(base_model: str) -> str:
    """The renderer the cookbook recommends for ``base_model``."""
    try:
        return str(model_info.get_recommended_renderer_name(base_model))
    except (ConfigurationError, KeyError, ValueError) as e:
        raise TrainingError(f"no renderer known for {base_model}: {e}") from None


@functools.cache
def rendering(base_model: str, name: str | None = None) -> Rendering:
    """Tokenizer and renderer (``name``, default: the recommended one)."""
    tok = tokenizer(base_model)
    chosen = name or renderer_name(base_model)
    try:
        renderer = renderers.get_renderer(chosen, cast(Any, tok), model_name=base_model)
    except (ConfigurationError, KeyError, ValueError) as e:
        raise TrainingError(f"unknown renderer {chosen!r}: {e}") from None
    return Rendering(base_model, chosen, renderer, tok)
