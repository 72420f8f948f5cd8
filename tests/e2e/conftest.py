"""The real Pi agent for the end-to-end tests, installed once per session."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).parent


@pytest.fixture(scope="session")
def pi_bin() -> Path:
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        reason = (
            f"{' and '.join(missing)} not found: the Pi end-to-end tests need "
            "node >= 20 and npm"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (CI=true: these tests must run in CI)")
        pytest.skip(reason)
    done = subprocess.run(
        ["bash", str(HERE / "install_pi.sh")],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"tests/e2e/install_pi.sh failed:\n{done.stderr}")
    return Path(done.stdout.strip().splitlines()[-1])
