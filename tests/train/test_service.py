from __future__ import annotations

import http.server
import logging
import re
import threading
from typing import Any

import httpx
import pytest
import tinker

from machine_git.core.errors import TinkerServiceError
from machine_git.train import service
from tests.train import conftest as support


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


class _Failing(http.server.BaseHTTPRequestHandler):
    """A Tinker service whose every answer is HTTP 500."""

    def do_POST(self) -> None:
        self.send_response(500)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"detail": "worker lost"}')

    do_GET = do_POST

    def log_message(self, *args: Any) -> None:
        pass


def test_repeated_server_errors_name_the_status_and_the_retries(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The real SDK against a local service that answers 500 to everything:
    # the SDK retries on its own for minutes, so the call runs out of time;
    # machine says it was HTTP 500, retried, not just "did not answer".
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Failing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("TINKER_API_KEY", "tml-test-key")
    monkeypatch.setenv("TINKER_BASE_URL", f"http://127.0.0.1:{server.server_port}")
    logger = logging.getLogger(service.ServerErrors.LOGGER)
    level = logger.level
    try:
        with pytest.raises(TinkerServiceError) as e:
            service.bounded(
                "creating the training client",
                lambda: (
                    service.service_client()
                    .create_lora_training_client(base_model=support.MODEL)
                    .result()
                ),
                timeout=2,
            )
    finally:
        server.shutdown()
        server.server_close()
    found = re.fullmatch(
        r"Tinker answered creating the training client with HTTP 500 \(the service "
        r"failed\), retried (\d+) times, and gave up after 2 s \(set "
        r"MACHINE_TINKER_TIMEOUT to wait longer\)",
        str(e.value),
    )
    assert found is not None, str(e.value)
    assert int(found.group(1)) >= 2
    assert logger.level == level  # restored
    assert capsys.readouterr().err == ""  # counting printed nothing


def test_a_call_safe_to_repeat_is_retried_on_a_server_error_and_says_so() -> None:
    calls: list[int] = []

    def failing() -> None:
        calls.append(1)
        request = httpx.Request("POST", "http://tinker.test/api/v1/save_weights")
        raise tinker.InternalServerError(
            "disk lost", response=httpx.Response(503, request=request), body=None
        )

    told: list[str] = []
    with pytest.raises(TinkerServiceError) as e:
        service.bounded(
            "saving checkpoint 000002",
            failing,
            timeout=5,
            tries=3,
            retries=service.Retries(told.append),
        )
    assert len(calls) == 3
    assert str(e.value) == ("HTTP 503 (the service failed): disk lost, retried 2 times")
    assert told == [
        "Tinker answered saving checkpoint 000002 with HTTP 503 (the service "
        f"failed): disk lost; trying again ({n} of 3)"
        for n in (2, 3)
    ]
