from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from machine_git.agents import pimodel
from machine_git.core.errors import InstallError
from machine_git.sessions import pi
from tests.conftest import PI_SESSIONS


def settings() -> Path:
    path = pi.agent_dir() / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def test_pi_s_default_model() -> None:
    assert pimodel.default_model() is None  # no settings yet
    settings().write_text(json.dumps({"defaultProvider": "fake"}))
    assert pimodel.default_model() is None  # half a choice is none
    settings().write_text(
        json.dumps({"defaultProvider": "fake", "defaultModel": "fake-1"})
    )
    assert pimodel.default_model() == "fake/fake-1"
    settings().write_text("{broken")
    assert pimodel.default_model() is None


def test_setting_the_default_keeps_every_other_setting() -> None:
    path = settings()
    path.write_text(
        json.dumps(
            {
                "defaultProvider": "tinker",
                "defaultModel": "thinkingmachines/Inkling-Small:peft:262144",
                "theme": "dark",
                "compaction": {"enabled": False},
            }
        )
    )
    path.chmod(0o600)
    pimodel.set_default_model("anthropic/claude-sonnet-4-5")
    assert json.loads(path.read_text()) == {
        "defaultProvider": "anthropic",
        "defaultModel": "claude-sonnet-4-5",
        "theme": "dark",
        "compaction": {"enabled": False},
    }
    assert path.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in path.parent.iterdir()) == ["settings.json"]


def test_a_model_id_with_slashes_keeps_them() -> None:
    pimodel.set_default_model("tinker/tinker://run-1:train:0/sampler_weights/final")
    assert json.loads(settings().read_text()) == {
        "defaultProvider": "tinker",
        "defaultModel": "tinker://run-1:train:0/sampler_weights/final",
    }


def test_pi_s_lock_is_respected(monkeypatch: pytest.MonkeyPatch) -> None:
    path = settings()
    path.write_text("{}")
    lock = path.with_name("settings.json.lock")
    lock.mkdir()  # a pi is writing its settings
    monkeypatch.setattr(pimodel, "_LOCK_TRIES", 3)
    with pytest.raises(InstallError) as caught:
        pimodel.set_default_model("fake/fake-1")
    assert str(caught.value) == f"{path} stays locked by another pi; try again"
    assert path.read_text() == "{}"
    # a lock left by a pi that died is taken over once it is stale
    old = time.time() - 60
    os.utime(lock, (old, old))
    pimodel.set_default_model("fake/fake-1")
    assert pimodel.default_model() == "fake/fake-1"
    assert not lock.exists()


def test_settings_that_are_not_an_object_are_left_alone() -> None:
    settings().write_text("[1, 2]")
    with pytest.raises(InstallError, match="is not a JSON object; left as it is"):
        pimodel.set_default_model("fake/fake-1")
    assert settings().read_text() == "[1, 2]"


def test_a_session_s_model() -> None:
    # every fixture was written by the real pi on the fake provider
    assert pimodel.session_model(PI_SESSIONS / "basic.jsonl") == "fake/fake-1"
    assert pimodel.session_model(PI_SESSIONS / "compaction-branch.jsonl") == (
        "fake/fake-1"
    )
    assert pimodel.session_model(Path("/nonexistent/session.jsonl")) is None
