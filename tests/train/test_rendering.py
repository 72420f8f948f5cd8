from __future__ import annotations

import orjson
import pytest

from machine_git.core.errors import TrainingError
from machine_git.train import families
from machine_git.train import rendering
from tests.conftest import Run


def test_the_qwen3_tokenizer_is_the_real_one_offline() -> None:
    tok = rendering.tokenizer("Qwen/Qwen3-30B-A3B")
    assert tok.encode("Hello") == [9707]
    assert tok.encode("<|im_end|>") == [151645] and tok.eos_token_id == 151645
    assert tok.encode("<tool_call>") == [151657]
    assert tok.encode("<think>") == [151667]
    # split_special_tokens keeps tool tags special but not the <|...|> markers.
    assert tok.encode("<tool_call><|im_end|>", split_special_tokens=True)[0] == 151657
    assert 151645 not in tok.encode("<|im_end|>", split_special_tokens=True)
    assert tok.decode([9707, 151645]) == "Hello<|im_end|>"
    assert tok.is_special_token(151645) and not tok.is_special_token(9707)


def test_fim_and_repo_tokens_are_not_special_as_in_hugging_face() -> None:
    tok = rendering.tokenizer("Qwen/Qwen3-30B-A3B")
    for text, token in (
        ("<|fim_prefix|>", 151659),
        ("<|repo_name|>", 151663),
        ("<|file_sep|>", 151664),
    ):
        assert tok.encode(text) == [token]
        assert tok.encode(text, split_special_tokens=True) == [token]
        assert not tok.is_special_token(token)


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("Qwen/Qwen3-30B-A3B", rendering.QWEN3),
        ("Qwen/Qwen3-8B", rendering.QWEN3),
        ("Qwen/Qwen3.5-9B", rendering.QWEN3_5),
        ("Qwen/Qwen3-VL-30B-A3B-Instruct", rendering.QWEN3_VL),
        ("Qwen/Qwen3-VL-235B-A22B-Instruct", rendering.QWEN3_VL),
    ],
)
def test_accepted_families(model: str, family: rendering.Family) -> None:
    assert rendering.family(model) == family
    assert rendering.rendering(model).renderer_name == family.renderer


@pytest.mark.parametrize(
    ("model", "why"),
    [
        (
            "Qwen/Qwen3-30B-A3B-Instruct-2507",
            "its published chat template is not among machine's fixtures, so its "
            "rendering cannot be checked token for token",
        ),
        (
            "Qwen/Qwen3-8B-Base",
            "a base model's renderer (role_colon) follows no chat template and "
            "drops tool calls",
        ),
    ],
)
def test_families_without_a_checked_template_are_refused(model: str, why: str) -> None:
    with pytest.raises(TrainingError) as e:
        rendering.rendering(model)
    assert str(e.value).startswith(f"{model} is not accepted: {why}")


def test_a_model_of_no_known_family_is_one_line() -> None:
    with pytest.raises(TrainingError) as e:
        rendering.rendering("mistralai/Mistral-7B-v0.1")
    assert str(e.value) == (
        "mistralai/Mistral-7B-v0.1 is not accepted (machine renders Qwen3, "
        "Qwen3.5 and Kimi K2 Thinking, checked against their published chat "
        "templates; default Qwen/Qwen3-30B-A3B)"
    )


def test_train_models_lists_every_served_model_accepted_or_refused_with_why(
    run: Run,
) -> None:
    result = run("train", "models", "--json")
    assert result.exit_code == 0, result.stderr
    listed = orjson.loads(result.stdout)
    by_name = {m["model"]: m for m in listed}
    # every model in the pinned cookbook's table, once
    assert sorted(by_name) == sorted(families.served())
    accepted = [m["model"] for m in listed if m["accepted"]]
    assert "Qwen/Qwen3-30B-A3B" in accepted and "Qwen/Qwen3.5-4B" in accepted
    # an accepted model is one of the families test_templates checks
    assert {rendering.family(m) for m in accepted} == set(families.ACCEPTED)
    for name, m in by_name.items():
        if m["accepted"]:
            assert rendering.family(name).renderer == m["renderer"]
            continue
        # a refused one is refused by the train commands, with the same why
        with pytest.raises(TrainingError) as e:
            rendering.rendering(name)
        assert str(e.value).startswith(f"{name} is not accepted: {m['why']}")
    assert by_name["openai/gpt-oss-20b"]["why"] == (
        "gpt-oss (Harmony): its chat template (tests/fixtures/templates/gpt_oss/) "
        "writes only the first tool call of a message and names every following "
        "tool result after that call, so an agent turn with parallel tool calls "
        "has no rendering the served model saw (machine would train calls the "
        "template drops)"
    )
    assert by_name["nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"]["why"].startswith(
        "Nemotron: "
    )
    shown = run("train", "models").stdout.splitlines()
    assert shown[:2] == [
        "accepted: token-exact against its chat template "
        "(tests/fixtures/templates/qwen3/)",
        "  Qwen/Qwen3-30B-A3B  (renderer qwen3)",
    ]
    gpt_oss = next(i for i, line in enumerate(shown) if line.startswith("refused: gpt"))
    assert shown[gpt_oss + 1 : gpt_oss + 3] == [
        "  openai/gpt-oss-120b",
        "  openai/gpt-oss-20b",
    ]
