from __future__ import annotations

from typing import Any

import pytest

from machine_git.train import service


def stand_in(**kwargs: Any) -> dict[str, Any]:
    """What MACHINE_TEST_TINKER points at: no client, no request."""
    return kwargs


def test_telemetry_is_off_unless_the_user_turned_it_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tinker.lib import telemetry

    monkeypatch.setenv("MACHINE_TEST_TINKER", f"{__name__}:stand_in")
    monkeypatch.delenv("TINKER_TELEMETRY", raising=False)
    assert telemetry._is_telemetry_enabled()  # the SDK's default: on
    assert service.service_client(api_key="tml-x") == {"api_key": "tml-x"}
    assert not telemetry._is_telemetry_enabled()  # as the SDK reads it
    monkeypatch.setenv("TINKER_TELEMETRY", "1")  # the user's own choice stands
    service.service_client()
    assert telemetry._is_telemetry_enabled()
