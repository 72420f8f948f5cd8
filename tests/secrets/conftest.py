"""``MACHINE_TEST_SECRETS_VIA=daemon``: every engine scan of these tests goes
through a warm scanner (daemon.py) and must be answered by it, so the whole
folder checks that scanning there finds what scanning in-process finds."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from machine_git.secrets import engine
from machine_git.secrets import warm

VIA = os.environ.get("MACHINE_TEST_SECRETS_VIA", "")


@pytest.fixture(autouse=True)
def _via_daemon(
    monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Iterator[None]:
    if VIA != "daemon" or request.module.__name__.endswith("test_warm"):
        yield
        return
    path = warm.socket_path(engine.cache_dir(), engine.gates_digest())
    assert path is not None
    if warm.ask(path, warm.STATUS, 2.0) is None:  # tests/conftest.py stops it
        subprocess.Popen(
            [sys.executable, "-m", warm.MODULE, str(path)],
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 30
        while warm.ask(path, warm.STATUS, 2.0) is None:
            assert time.monotonic() < deadline, "no warm scanner"
            time.sleep(0.05)

    def through_daemon(data: bytes) -> list[Any]:
        found = warm.scan(path, data)
        assert found is not None, "the warm scanner did not answer"
        return list(found)

    monkeypatch.setattr(engine, "_engine_scan", through_daemon)
    yield
