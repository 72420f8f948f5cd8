"""Which base models machine trains, and why the others are refused.

machine accepts a model family only when its published chat template is kept
as a test fixture (tests/fixtures/templates/) and a test renders real traces
through machine's path and through that template and finds the same token
ids. Every other model Tinker serves (as tinker-cookbook's model table lists
them) is refused with its reason, in one line. Light: no training stack.
"""

from __future__ import annotations

from typing import NamedTuple

from machine_git.core.errors import TrainingError
from machine_git.train.config import DEFAULT_BASE_MODEL


class Family(NamedTuple):
    """A model family machine renders, and the template that proves it."""

    name: str
    tokenizer_class: str  # in tml_renderers.tokenizers
    renderer: str  # the cookbook renderer name machine uses
    template: str  # tests/fixtures/templates/<template>/


QWEN3 = Family("Qwen3", "Qwen3Tokenizer", "qwen3", "qwen3")
QWEN3_5 = Family("Qwen3.5", "Qwen35Tokenizer", "qwen3_5", "qwen3_5")
KIMI_K2_THINKING = Family(
    "Kimi K2 Thinking", "KimiK2ThinkingTokenizer", "kimi_k2", "kimi_k2_thinking"
)
# Qwen3-VL: the vision family. Its tokenizer is Qwen3's (the same vocabulary
# and vision tokens, which tml-renderers ships); its image processor is built
# offline from the published preprocessor parameters (train/vision.py). No copy
# of its chat template is reachable, so unlike the others it is rendered with
# the cookbook's renderer unchecked (template "").
QWEN3_VL = Family("Qwen3-VL", "Qwen3Tokenizer", "qwen3_vl_instruct", "")
ACCEPTED = (QWEN3, QWEN3_5, KIMI_K2_THINKING, QWEN3_VL)
VISION = (QWEN3_VL,)  # the families whose rows may hold images

_NO_TEMPLATE = (
    "its published chat template is not among machine's fixtures, so its "
    "rendering cannot be checked token for token"
)
_ONLY_ON_THE_HUB = (
    "tml-renderers has its tokenizer offline, but its chat template is published "
    "only in the model's Hugging Face repository, which machine cannot reach, and "
    "no verbatim copy was found; without it as a fixture its rendering cannot be "
    "checked token for token"
)

# Why the others are refused, in one line each: (part of the name, why);
# docs/training.md says the same.
# The first that matches decides.
_REFUSED = (
    ("-Instruct-2507", _NO_TEMPLATE),
    ("-Thinking-2507", "its renderer is not one machine checks against the template"),
    (
        "-Base",
        "a base model's renderer (role_colon) follows no chat template and drops "
        "tool calls",
    ),
    (
        "-VL-",
        "of the vision-language models machine renders only Qwen3-VL Instruct "
        "(its image processor and tokenizer are offline)",
    ),
    ("Qwen/Qwen3.6-", f"{_NO_TEMPLATE} (it differs from Qwen3.5's)"),
    ("Qwen/Qwen3.8-", f"{_NO_TEMPLATE} (it differs from Qwen3.5's)"),
    (
        "openai/gpt-oss-",
        "gpt-oss (Harmony): its chat template (tests/fixtures/templates/gpt_oss/) "
        "writes only the first tool call of a message and names every following "
        "tool result after that call, so an agent turn with parallel tool calls "
        "has no rendering the served model saw (machine would train calls the "
        "template drops)",
    ),
    (
        "deepseek-ai/DeepSeek-V3.1",
        "DeepSeek V3.1: its chat template (tests/fixtures/templates/"
        "deepseek_v3_1/) ignores the tools of a request (it renders the same text "
        "with them and without), so what the served model was told about an "
        "agent's tools is not the template's to check; machine's renderer "
        "declares them in the system prompt by the model card's convention",
    ),
    ("deepseek-ai/DeepSeek-", f"DeepSeek: {_ONLY_ON_THE_HUB}"),
    ("moonshotai/Kimi-", f"Kimi: {_ONLY_ON_THE_HUB}"),
    (
        "zai-org/GLM-",
        f"GLM: {_ONLY_ON_THE_HUB} (the copies in deployment repositories are "
        "edited, and differ from each other)",
    ),
    ("nvidia/NVIDIA-Nemotron-", f"Nemotron: {_ONLY_ON_THE_HUB}"),
    (
        "meta-llama/",
        "tml-renderers ships no Llama tokenizer, so it cannot be rendered offline",
    ),
    (
        "thinkingmachines/",
        "its renderer (tml_v0) has no published chat template to check against",
    ),
)

_ACCEPTED = (
    " (machine renders Qwen3, Qwen3.5 and Kimi K2 Thinking, checked against their "
    f"published chat templates; default {DEFAULT_BASE_MODEL})"
)


def takes_images(base_model: str) -> bool:
    """True if machine renders images for ``base_model`` (a vision family)."""
    try:
        return family(base_model) in VISION
    except TrainingError:
        return False


def refusal(base_model: str) -> str | None:
    """Why ``base_model`` is refused (a known reason), or None."""
    for part, why in _REFUSED:
        if part in base_model:
            return why
    return None


def family(base_model: str) -> Family:
    """The accepted family of ``base_model``, or a one-line refusal."""
    if base_model == "moonshotai/Kimi-K2-Thinking":
        return KIMI_K2_THINKING  # before the refusal of the other Kimi models
    if base_model.startswith("Qwen/Qwen3-VL-") and base_model.endswith("-Instruct"):
        return QWEN3_VL  # before the refusal of the other vision models
    why = refusal(base_model)
    if why is not None:
        raise TrainingError(f"{base_model} is not accepted: {why}{_ACCEPTED}")
    if base_model.startswith("Qwen/Qwen3.5-"):
        return QWEN3_5
    if base_model.startswith("Qwen/Qwen3-"):
        return QWEN3
    raise TrainingError(f"{base_model} is not accepted{_ACCEPTED}")


class Verdict(NamedTuple):
    """One line of ``machine train models``."""

    model: str
    accepted: bool
    renderer: str | None
    why: str  # how it is verified, or why it is refused

    def to_json(self) -> dict[str, object]:
        return {
            "model": self.model,
            "accepted": self.accepted,
            "renderer": self.renderer,
            "why": self.why,
        }


def verdict(base_model: str) -> Verdict:
    """Whether machine trains ``base_model``: how it was checked, or why not."""
    try:
        chosen = family(base_model)
    except TrainingError:
        why = refusal(base_model) or "not a model family machine renders"
        return Verdict(base_model, False, None, why)
    if not chosen.template:
        why = (
            "images and text through the cookbook's renderer, with Qwen3's "
            "tokenizer and the published image preprocessor (offline); not checked "
            "against its chat template, which is not reachable here"
        )
        return Verdict(base_model, True, chosen.renderer, why)
    return Verdict(
        base_model,
        True,
        chosen.renderer,
        f"token-exact against its chat template "
        f"(tests/fixtures/templates/{chosen.template}/)",
    )


def served() -> list[str]:
    """The base models Tinker serves, as the pinned tinker-cookbook lists them.

    Offline: its model table (``tinker_cookbook.model_info``, no network).
    """
    from tinker_cookbook import model_info

    tables = (
        model_info.get_llama_info,
        model_info.get_qwen_info,
        model_info.get_deepseek_info,
        model_info.get_gpt_oss_info,
        model_info.get_moonshot_info,
        model_info.get_zai_info,
        model_info.get_nvidia_info,
        model_info.get_thinkingmachines_info,
    )
    names = []
    for table in tables:
        for name, attributes in table().items():
            names.append(f"{attributes.organization}/{name}")
    return names


def models() -> list[Verdict]:
    """Every model Tinker serves: accepted (and how verified) first, then
    refused, each with why."""
    found = [verdict(name) for name in served()]
    return sorted(found, key=lambda v: (not v.accepted, v.model))
