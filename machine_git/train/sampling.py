"""Sampling a model on eval cases through Tinker (``train eval baseline``).

Each case's prompt is rendered with the base model's renderer into a
generation prompt; Tinker samples greedily (temperature 0) until the
renderer's stop sequence; the renderer parses the tokens back into a message.
All requests are submitted before any is awaited.
Heavy: imports tinker and tinker-cookbook. Import after ``stack.require()``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from typing import NamedTuple
from typing import cast

import tinker
from tinker_cookbook import renderers
from tinker_cookbook.renderers.base import ToolSpec

from machine_git.core.errors import TrainingError
from machine_git.store.store import Store
from machine_git.train import datasets
from machine_git.train import evals
from machine_git.train import preflight
from machine_git.train import rendering
from machine_git.train import runs
from machine_git.train import service
from machine_git.train.evals import Case
from machine_git.train.rendering import Rendering


class Baseline(NamedTuple):
    """A committed eval result: the results file's content and its commit."""

    results: dict[str, Any]
    commit: str

    def to_json(self) -> dict[str, Any]:
        """What ``train eval baseline --json`` prints: the results and commit."""
        return {**self.results, "commit": self.commit}


def baseline(
    store: Store,
    model: str | None,
    base_model: str,
    *,
    max_tokens: int,
    on_ready: Callable[[str, float], None] | None = None,
) -> Baseline:
    """``train eval baseline``: sample ``model`` on the eval set, commit scores.

    ``model`` is the base model, a tinker:// sampler path or a run id
    (:func:`runs.model_of`); ``on_ready`` hears where Tinker answered, after
    the preflight and before anything is sampled.
    """
    eval_set = evals.active(store)
    if eval_set is None:
        raise TrainingError("no eval set yet (draw one with 'machine train eval init')")
    name, base, path, renderer = runs.model_of(store, model, base_model)
    seen = rendering.rendering(base, renderer)
    cases, skipped = evals.cases(store, eval_set)
    if not cases:
        raise TrainingError(f"eval set {eval_set['id']} has no case with a text answer")
    info = preflight.check(base, "sample")
    if on_ready is not None:
        on_ready(info.base_url, info.seconds)
    outputs = sample(
        cases, seen, base_model=base, model_path=path, max_tokens=max_tokens
    )
    details = {
        "base_model": base,
        "model_path": path,
        "renderer": seen.renderer_name,
        "sampling": {"temperature": 0.0, "max_tokens": max_tokens},
    }
    results, commit = evals.record_results(
        store, eval_set, name, details, outputs, skipped
    )
    return Baseline(results, commit)


def sample(
    cases: list[Case],
    seen: Rendering,
    *,
    base_model: str,
    model_path: str | None,
    max_tokens: int,
) -> list[dict[str, Any]]:
    """One greedy answer per case, as ``{row, kind, reference, output, ...}``."""
    client = service.service_client()
    if model_path is not None:
        sampler = service.bounded(
            "creating the sampling client",
            lambda: client.create_sampling_client(model_path=model_path).result(),
            tries=3,
        )
    else:
        sampler = service.bounded(
            "creating the sampling client",
            lambda: client.create_sampling_client(base_model=base_model).result(),
            tries=3,
        )
    params = tinker.SamplingParams(
        max_tokens=max_tokens,
        temperature=0.0,
        stop=seen.renderer.get_stop_sequences(),
    )
    pending = []
    for case in cases:
        messages = datasets.cookbook_messages(case.prompt)
        tools = cast(list[ToolSpec], case.tools) if case.tools else None
        prompt = seen.renderer.build_generation_prompt(
            rendering.with_tools(seen.renderer, messages, tools)
        )
        pending.append(
            (case, sampler.sample(prompt=prompt, num_samples=1, sampling_params=params))
        )
    out: list[dict[str, Any]] = []
    for number, (case, request) in enumerate(pending, start=1):
        answer = service.bounded(f"sampling case {number}", request.result)
        sequence = answer.sequences[0]
        message, _ = seen.renderer.parse_response(list(sequence.tokens))
        calls = [
            {"name": c.function.name, "arguments": c.function.arguments}
            for c in message.get("tool_calls") or []
        ]
        out.append(
            {
                "row": case.row_id,
                "kind": case.kind,
                "reference": case.reference,
                "output": renderers.get_text_content(message),
                "tool_calls": calls,
                "stop_reason": sequence.stop_reason,
                "tokens": len(sequence.tokens),
            }
        )
    return out
