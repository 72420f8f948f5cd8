"""The training tests' Tinker: a fake service, the environment, and stores.

The fake stands in for ``tinker.ServiceClient`` at machine's one client seam
(``machine_git.train.service.service_client``) and returns real
``tinker.types`` objects, so the real cookbook, renderer, tokenizer and
machine code run around it; it is the only thing these tests fake. It pins the
tinker 0.38 surface machine uses: change it together with the version pins in
pyproject.toml.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import tinker
from tinker import types

from machine_git.core import paths
from machine_git.train import rendering
from machine_git.train import service
from tests.conftest import Run
from tests.conftest import entry_with_text
from tests.conftest import install_session

# Captured before any test clears it: the opt-in real-service test uses it.
REAL_KEY = os.environ.get("TINKER_API_KEY")
MODEL = "Qwen/Qwen3-30B-A3B"
_TINKER_ENVS = (
    "TINKER_API_KEY",
    "TINKER_BASE_URL",
    "TINKER_CREDENTIAL_CMD",
    "TINKER_PROJECT_ID",
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
)
# Sessions whose last turn can be tagged good, in a fixed order.
SESSIONS = (
    "basic",
    "file-repair",
    "mixed",
    "multi-turn",
    "bash-execution",
    "image",
    "compaction-branch",
    "branch-summary",
)


def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No developer key, URL or proxy leaks into a test; no telemetry, no Hub."""
    for name in _TINKER_ENVS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TINKER_TELEMETRY", "0")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@contextlib.contextmanager
def listening() -> Iterator[str]:
    """A loopback URL whose port accepts TCP connections (nothing answers)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


def refusing_url() -> str:
    """A loopback URL whose port refuses connections (bound, then closed)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}"


def set_key(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv("TINKER_API_KEY", "tml-test-key")
    monkeypatch.setenv("TINKER_BASE_URL", url)
    monkeypatch.setenv("MACHINE_TINKER_TIMEOUT", "2")


def tag(run: Run, project: Path, names: tuple[str, ...], *flags: str) -> None:
    """Tag the last turn of each fixture session with ``machine good FLAGS``.

    The ``image`` session is tagged ``--no-images``: these tests train the
    text model MODEL, which refuses rows with images (tests/train/
    test_images.py tags its image and trains it on Qwen3-VL).
    """
    for name in names:
        install_session(project, name)
        extra = ("--no-images",) if name == "image" else ()
        result = run("good", *flags, *extra)
        assert result.exit_code == 0, result.stderr


def tag_multi_turn(run: Run, project: Path, *flags: str) -> None:
    """Tag all three turns of the multi-turn session (one session, three rows)."""
    install_session(project, "multi-turn")
    for text in ("Turn one", "Turn two"):
        entry = answer_entry("multi-turn", text)
        result = run("good", "--entry", entry, *flags)
        assert result.exit_code == 0, result.stderr
    result = run("good", *flags)
    assert result.exit_code == 0, result.stderr


def answer_entry(name: str, user_text: str) -> str:
    # The entry that ends the turn started by ``user_text``: the last message
    # entry before the next user message.
    from tests.conftest import fixture_lines

    lines = fixture_lines(name)
    start = entry_with_text(name, user_text)
    ids = [str(line["id"]) for line in lines]
    index = ids.index(start)
    last = start
    for line in lines[index + 1 :]:
        message = line.get("message") or {}
        if message.get("role") == "user":
            break
        if line.get("type") == "message":
            last = str(line["id"])
    return last


def store_path(project: Path) -> Path:
    return paths.store_path(project)


def only(items: list[Any]) -> Any:
    assert len(items) == 1, items
    return items[0]


# -- the fake service ------------------------------------------------------------


class Done:
    """A resolved APIFuture."""

    def __init__(self, value: Any) -> None:
        self._value = value

    def result(self, timeout: float | None = None) -> Any:
        return self._value


@dataclass
class FakeTinker:
    """The fake service's state: what it was asked, and how it should behave."""

    models: list[str] = field(default_factory=lambda: [MODEL])
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    batches: list[list[tinker.Datum]] = field(default_factory=list)
    fail_at_step: int | None = None  # forward_backward number (1-based) that fails
    nan_at_step: int | None = None  # forward_backward number whose log-probs are NaN
    hang: threading.Event | None = None  # set: capabilities wait on it (never answer)
    answers: dict[str, str] = field(default_factory=dict)  # prompt substring -> answer
    raise_on: dict[str, BaseException] = field(default_factory=dict)  # call -> raise
    tokenizer: Any = None  # for sampling answers (the real offline tokenizer)
    run_id: str = "fake-run:train:0"
    stall: set[str] = field(default_factory=set)  # calls that never answer
    on_call: dict[str, Any] = field(default_factory=dict)  # call -> f(nth call)
    released: threading.Event = field(default_factory=threading.Event)
    dpo_metrics: list[dict[str, float]] = field(default_factory=list)

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]

    def record(self, name: str, args: dict[str, Any]) -> None:
        """Log a call; then stall, act or raise if the test asked for it."""
        self.calls.append((name, args))
        if name in self.on_call:
            self.on_call[name](self.names().count(name))
        if name in self.stall:
            self.released.wait()  # a service that stopped answering
            raise RuntimeError("released at the end of the test")
        if name in self.raise_on:
            raise self.raise_on.pop(name)

    def service_client(self, **kwargs: Any) -> FakeServiceClient:
        self.calls.append(("ServiceClient", kwargs))
        return FakeServiceClient(self)


class FakeServiceClient:
    def __init__(self, fake: FakeTinker) -> None:
        self.fake = fake

    def get_server_capabilities(self) -> types.GetServerCapabilitiesResponse:
        self.fake.calls.append(("get_server_capabilities", {}))
        if self.fake.hang is not None:
            self.fake.hang.wait()
        return types.GetServerCapabilitiesResponse(
            supported_models=[
                types.SupportedModel(model_name=m, trainable=True, sampleable=True)
                for m in self.fake.models
            ]
        )

    def create_lora_training_client(
        self, base_model: str, rank: int = 32, **kw: Any
    ) -> Done:
        self.fake.record(
            "create_lora_training_client",
            {"base_model": base_model, "rank": rank, **kw},
        )
        return Done(FakeTrainingClient(self.fake))

    def create_training_client_from_state_with_optimizer(
        self, path: str, base_model: str | None = None, **kw: Any
    ) -> Done:
        """A training client with the weights and optimizer state at ``path``."""
        self.fake.record(
            "create_training_client_from_state_with_optimizer", {"path": path, **kw}
        )
        return Done(FakeTrainingClient(self.fake))

    def create_sampling_client(
        self, model_path: str | None = None, base_model: str | None = None, **kw: Any
    ) -> Done:
        self.fake.calls.append(
            (
                "create_sampling_client",
                {"model_path": model_path, "base_model": base_model},
            )
        )
        return Done(FakeSamplingClient(self.fake))


class FakeTrainingClient:
    def __init__(self, fake: FakeTinker) -> None:
        self.fake = fake
        self.steps = 0

    def forward_backward(
        self, data: list[tinker.Datum], loss_fn: str, loss_fn_config: Any = None
    ) -> Done:
        self.steps += 1
        self.fake.record("forward_backward", {"loss_fn": loss_fn, "n": len(data)})
        self.fake.batches.append(list(data))
        if self.fake.fail_at_step == self.steps:
            request = httpx.Request(
                "POST", "http://tinker.test/api/v1/forward_backward"
            )
            raise tinker.InternalServerError(
                "worker lost", response=httpx.Response(500, request=request), body=None
            )
        # logprob -0.5 per token for step 1, -0.25 for step 2, ...: a falling loss
        value = -0.5 / self.steps
        if self.fake.nan_at_step == self.steps:
            value = float("nan")  # what a diverged (or empty) batch gives back
        outs = [
            {
                "logprobs": types.TensorData.from_numpy(
                    np.full(d.model_input.length, value, np.float32)
                )
            }
            for d in data
        ]
        return Done(
            types.ForwardBackwardOutput(
                loss_fn_output_type="ArrayRecord", loss_fn_outputs=outs, metrics={}
            )
        )

    def forward_backward_custom(self, data: list[tinker.Datum], loss_fn: Any) -> Done:
        """As the real client does it: a forward pass (here: fixed log-probs,
        falling step by step), then the caller's loss computed locally with
        torch, its metrics returned. The chosen sequences (even indices) get
        higher log-probs than the rejected ones, as after some learning."""
        import torch

        self.steps += 1
        self.fake.record("forward_backward_custom", {"n": len(data)})
        self.fake.batches.append(list(data))
        logprobs = [
            torch.full(
                (d.model_input.length,),
                -0.5 / self.steps if i % 2 == 0 else -1.0,
                requires_grad=True,
            )
            for i, d in enumerate(data)
        ]
        loss, metrics = loss_fn(data, logprobs)
        loss.backward()  # the gradients the real client sends back
        self.fake.dpo_metrics.append(dict(metrics))
        return Done(
            types.ForwardBackwardOutput(
                loss_fn_output_type="ArrayRecord", loss_fn_outputs=[], metrics=metrics
            )
        )

    def save_weights_and_get_sampling_client(self, **kw: Any) -> Done:
        self.fake.record("save_weights_and_get_sampling_client", kw)
        return Done(FakeSamplingClient(self.fake))

    def optim_step(self, adam_params: types.AdamParams) -> Done:
        self.fake.record("optim_step", {"learning_rate": adam_params.learning_rate})
        return Done(types.OptimStepResponse(metrics={}))

    def save_state(self, name: str, ttl_seconds: int | None = None, **kw: Any) -> Done:
        self.fake.record("save_state", {"name": name, "ttl_seconds": ttl_seconds, **kw})
        return Done(
            types.SaveWeightsResponse(
                path=f"tinker://{self.fake.run_id}/weights/{name}"
            )
        )

    def save_weights_for_sampler(
        self, name: str, ttl_seconds: int | None = None, **kw: Any
    ) -> Done:
        self.fake.record(
            "save_weights_for_sampler", {"name": name, "ttl_seconds": ttl_seconds, **kw}
        )
        return Done(
            types.SaveWeightsForSamplerResponse(
                path=f"tinker://{self.fake.run_id}/sampler_weights/{name}"
            )
        )


class FakeSamplingClient:
    def __init__(self, fake: FakeTinker) -> None:
        self.fake = fake

    def compute_logprobs(self, prompt: types.ModelInput) -> Done:
        """The reference model's log-probs: -0.75 per token, the first None."""
        self.fake.calls.append(("compute_logprobs", {"length": prompt.length}))
        return Done([None, *([-0.75] * (prompt.length - 1))])

    def sample(
        self,
        prompt: types.ModelInput,
        num_samples: int,
        sampling_params: types.SamplingParams,
        **kw: Any,
    ) -> Done:
        text = self.fake.tokenizer.decode(prompt.to_ints())
        self.fake.calls.append(
            ("sample", {"prompt": text, "temperature": sampling_params.temperature})
        )
        answer = next(
            (a for key, a in self.fake.answers.items() if key in text), "I do not know."
        )
        ids = [*self.fake.tokenizer.encode(answer), self.fake.tokenizer.eos_token_id]
        sequence = types.SampledSequence(
            stop_reason="stop", sequence_id="s0", tokens_np=np.array(ids, np.int32)
        )
        return Done(types.SampleResponse(sequences=[sequence]))


# -- fixtures -------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _tinker_env(monkeypatch: pytest.MonkeyPatch) -> None:
    clean_env(monkeypatch)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, listener: str) -> Iterator[FakeTinker]:
    """A key, a reachable loopback port, and the fake service at the seam."""
    set_key(monkeypatch, listener)
    fake_service = FakeTinker(tokenizer=rendering.tokenizer(MODEL))
    monkeypatch.setattr(service, "service_client", fake_service.service_client)
    yield fake_service
    fake_service.released.set()  # free the threads of stalled calls


@pytest.fixture
def listener() -> Iterator[str]:
    with listening() as url:
        yield url


# -- the fake for machine running as its own process ---------------------------------
#
# A test that kills `machine train` runs it as a subprocess, where the fake
# above cannot be patched in; it sets MACHINE_TEST_TINKER to
# "tests.train.conftest:process_service_client" (machine's one seam for this,
# machine_git/train/service.py) and PYTHONPATH to the repository.
# FAKE_TINKER_STALL_AT=N makes the N-th forward_backward never answer, so the
# process is caught mid-run.

STALL_ENV = "FAKE_TINKER_STALL_AT"
_PROCESS_FAKE = FakeTinker()


def _stall_from(n: int) -> None:
    if n >= int(os.environ.get(STALL_ENV) or 0) > 0:
        _PROCESS_FAKE.stall.add("forward_backward")


_PROCESS_FAKE.on_call["forward_backward"] = _stall_from


def process_service_client(**kwargs: Any) -> FakeServiceClient:
    """``tinker.ServiceClient`` in a subprocess: the fake, one per process."""
    return _PROCESS_FAKE.service_client(**kwargs)
