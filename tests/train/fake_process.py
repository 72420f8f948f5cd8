"""The fake Tinker service for machine running as its own process.

A test that kills ``machine train`` must run it as a subprocess, where the
in-process fake of conftest.py cannot be patched in; the test sets
``MACHINE_TEST_TINKER=tests.train.fake_process:service_client`` (machine's
one seam for this, machine_git/train/service.py) and ``PYTHONPATH`` to the
repository. ``FAKE_TINKER_STALL_AT=N`` makes the N-th ``forward_backward``
never answer, so the process is caught mid-run.
"""

from __future__ import annotations

import os
from typing import Any

from tests.train.conftest import FakeServiceClient
from tests.train.conftest import FakeTinker

STALL_ENV = "FAKE_TINKER_STALL_AT"
_FAKE = FakeTinker()


def _stall_from(n: int) -> None:
    if n >= int(os.environ.get(STALL_ENV) or 0) > 0:
        _FAKE.stall.add("forward_backward")


_FAKE.on_call["forward_backward"] = _stall_from


def service_client(**kwargs: Any) -> FakeServiceClient:
    return _FAKE.service_client(**kwargs)
