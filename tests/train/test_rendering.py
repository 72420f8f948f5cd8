from __future__ import annotations

import pytest

from machine_git.errors import TrainingError
from machine_git.train import rendering


def test_the_qwen3_tokenizer_is_the_real_one_offline() -> None:
    tok = rendering.tokenizer("Qwen/Qwen3-30B-A3B-Instruct-2507")
    assert tok.encode("Hello") == [9707]
    assert tok.encode("<|im_end|>") == [151645] and tok.eos_token_id == 151645
    assert tok.encode("<tool_call>") == [151657]
    assert tok.encode("<think>") == [151667]
    # split_special_tokens keeps tool tags special but not the <|...|> markers.
    assert tok.encode("<tool_call><|im_end|>", split_special_tokens=True)[0] == 151657
    assert 151645 not in tok.encode("<|im_end|>", split_special_tokens=True)
    assert tok.decode([9707, 151645]) == "Hello<|im_end|>"
    assert tok.is_special_token(151645) and not tok.is_special_token(9707)


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("Qwen/Qwen3-30B-A3B-Instruct-2507", "Qwen3Tokenizer"),
        ("Qwen/Qwen3-8B-Base", "Qwen3Tokenizer"),
        ("Qwen/Qwen3.5-9B", "Qwen35Tokenizer"),
        ("Qwen/Qwen3-VL-30B-A3B-Instruct", None),
        ("meta-llama/Llama-3.1-8B", None),
    ],
)
def test_offline_tokenizers_cover_the_qwen3_family(
    model: str, expected: str | None
) -> None:
    assert rendering.offline_tokenizer_class(model) == expected


def test_recommended_renderers() -> None:
    assert (
        rendering.rendering("Qwen/Qwen3-30B-A3B-Instruct-2507").renderer_name
        == "qwen3_instruct"
    )
    assert rendering.rendering("Qwen/Qwen3-8B").renderer_name == "qwen3"


def test_a_model_without_an_offline_tokenizer_is_one_line() -> None:
    with pytest.raises(TrainingError) as e:
        rendering.rendering("meta-llama/Llama-3.1-8B")
    assert str(e.value) == (
        "no offline tokenizer for meta-llama/Llama-3.1-8B: machine renders the Qwen3, "
        "Qwen3.5 and Qwen3.6 families (default Qwen/Qwen3-30B-A3B-Instruct-2507)"
    )
