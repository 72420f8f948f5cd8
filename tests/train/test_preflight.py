from __future__ import annotations

import threading

import pytest

from machine_git.core.errors import TinkerServiceError
from machine_git.core.errors import UsageError
from machine_git.train import preflight
from tests.train import conftest as support
from tests.train.conftest import FakeTinker


def test_no_key_fails_before_any_request(
    fake: FakeTinker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TINKER_API_KEY")
    with pytest.raises(TinkerServiceError) as e:
        preflight.check(support.MODEL, "train")
    assert str(e.value) == (
        "no Tinker API key: set TINKER_API_KEY (or run 'tinker auth login')"
    )
    assert fake.calls == []


def test_a_key_of_the_wrong_shape_is_refused(
    fake: FakeTinker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TINKER_API_KEY", "sk-not-tinker")
    with pytest.raises(TinkerServiceError) as e:
        preflight.check(support.MODEL, "train")
    assert str(e.value) == (
        "TINKER_API_KEY does not look like a Tinker key (they start with 'tml-')"
    )


def test_a_refusing_port_fails_at_once_with_the_real_sdk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = support.refusing_url()
    support.set_key(monkeypatch, url)
    with pytest.raises(TinkerServiceError) as e:
        preflight.check(support.MODEL, "train", timeout=0.5)
    assert str(e.value) == (
        f"Tinker is unreachable at {url}: connection refused "
        "(check the network or TINKER_BASE_URL)"
    )


@pytest.mark.slow
def test_a_silent_service_is_given_up_on_after_the_timeout(
    monkeypatch: pytest.MonkeyPatch, listener: str
) -> None:
    # The port accepts connections but never answers: the real SDK would
    # retry for five minutes; the preflight stops waiting after its timeout.
    support.set_key(monkeypatch, listener)
    monkeypatch.setenv("MACHINE_TINKER_TIMEOUT", "0.5")
    with pytest.raises(TinkerServiceError) as e:
        preflight.check(support.MODEL, "train")
    assert str(e.value) == (
        f"Tinker at {listener} did not answer within 0.5 s "
        "(set MACHINE_TINKER_TIMEOUT to wait longer)"
    )


def test_a_hanging_client_is_bounded(
    fake: FakeTinker, monkeypatch: pytest.MonkeyPatch, listener: str
) -> None:
    fake.hang = threading.Event()
    try:
        with pytest.raises(TinkerServiceError) as e:
            preflight.check(support.MODEL, "train", timeout=0.2)
    finally:
        fake.hang.set()
    assert str(e.value).startswith(f"Tinker at {listener} did not answer within 0.2 s")


def test_the_base_model_must_be_served(fake: FakeTinker) -> None:
    fake.models = ["Qwen/Qwen3-8B", "meta-llama/Llama-3.1-8B"]
    with pytest.raises(TinkerServiceError) as e:
        preflight.check(support.MODEL, "train")
    assert str(e.value) == (
        f"Tinker does not serve {support.MODEL} "
        "(it serves Qwen/Qwen3-8B, meta-llama/Llama-3.1-8B)"
    )


def test_a_good_check_names_the_service_and_its_models(
    fake: FakeTinker, listener: str
) -> None:
    info = preflight.check(support.MODEL, "train")
    assert (info.base_url, info.models) == (listener, [support.MODEL])
    assert fake.names() == ["ServiceClient", "get_server_capabilities"]


def test_timeout_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert preflight.timeout_seconds() == 20.0
    monkeypatch.setenv("MACHINE_TINKER_TIMEOUT", "3.5")
    assert preflight.timeout_seconds() == 3.5
    monkeypatch.setenv("MACHINE_TINKER_TIMEOUT", "")
    assert preflight.timeout_seconds() == 20.0
    for bad in ("soon", "0", "-2", "nan"):
        monkeypatch.setenv("MACHINE_TINKER_TIMEOUT", bad)
        with pytest.raises(UsageError) as caught:
            preflight.timeout_seconds()
        assert str(caught.value) == (
            f"MACHINE_TINKER_TIMEOUT={bad!r}: expected a number of seconds above 0"
        )
