"""Output is text, never control: stored text reaches a terminal escaped (issue 25).

A prompt, a note or a commit summary can hold escape sequences (a title
change, a clear screen, the one-character C1 CSI) and NUL bytes. Run
through a real pseudo-terminal, ``tagged``, ``log``, ``diff`` and
``versions`` show them as ``\\x1b``, ``\\x9b``, ``\\0``: no such byte
reaches the screen. ``--json`` keeps them as JSON escapes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from machine_git.core import paths
from machine_git.core.table import printable
from machine_git.store.store import Redaction
from machine_git.store.store import Store
from machine_git.tagging import turns
from tests import helpers
from tests.conftest import Run

EVIL = "title\x1b]0;pwned\x07clear\x1b[2Jcsi\x9b31mnul\x00bell\x07end"
ROW = "a00000000001"
# Bytes that must never come from stored text: ESC, BEL, NUL, C1 CSI (UTF-8).
CONTROL = (b"\x1b", b"\x07", b"\x00", b"\xc2\x9b")


def on_terminal(project: Path, *args: str) -> bytes:
    """What ``machine ARGS`` writes to stdout when stdout is a real terminal."""
    master, slave = os.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "machine_git", *args],
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=subprocess.PIPE,
        cwd=project,
        env={**os.environ, "COLUMNS": "200"},
    )
    os.close(slave)
    received = b""
    while True:
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:  # EIO: the process closed the terminal
            break
        if not chunk:
            break
        received += chunk
    os.close(master)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    return received


@pytest.fixture
def store(project: Path) -> Store:
    made = Store.create(paths.store_path(project))
    row = helpers.train_row(
        ROW,
        note=EVIL,
        messages=[
            {"role": "user", "content": EVIL},
            {"role": "assistant", "content": "ok"},
        ],
    )
    turns.commit(made, row, Redaction.SCANNED)
    return made


def test_printable_escapes_c0_c1_and_nul_and_keeps_the_rest() -> None:
    assert printable("é€ plain") == "é€ plain"
    assert printable(EVIL) == (
        "title\\x1b]0;pwned\\x07clear\\x1b[2Jcsi\\x9b31mnul\\0bell\\x07end"
    )
    assert printable("a\tb\nc\rd\x7f") == "a\\tb\\nc\\rd\\x7f"


@pytest.mark.parametrize(
    "args",
    [["tagged"], ["log"], ["diff", "HEAD~1", "HEAD"], ["tagged", "--kind", "train"]],
)
def test_stored_control_characters_never_reach_the_terminal(
    store: Store, project: Path, args: list[str]
) -> None:
    shown = on_terminal(project, *args)
    for byte in CONTROL:
        assert byte not in shown, (byte, shown)
    assert b"\\x1b]0;pwned" in shown or b"\\x1b" in shown, shown


def test_json_keeps_them_as_json_escapes(store: Store, project: Path) -> None:
    shown = on_terminal(project, "tagged", "--json")
    for byte in CONTROL:
        assert byte not in shown, (byte, shown)
    rows = json.loads(shown)
    assert rows[0]["note"] == EVIL


def test_a_pulled_version_name_with_a_c1_csi_is_shown_escaped(
    store: Store, project: Path, tmp_path: Path, run: Run
) -> None:
    # git allows U+009B (bytes C2 9B) in a ref name: a remote's version
    # named so is a valid version, and its name is printed escaped.
    hub = tmp_path / "hub.git"
    subprocess.run(
        ["git", "clone", "-q", "--bare", str(store.path), str(hub)], check=True
    )
    subprocess.run(
        ["git", "-C", str(hub), "tag", "-a", "-m", "v", "v\x9b31m", "main"],
        check=True,
        env={**os.environ, "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@b"},
    )
    other = tmp_path / "other"
    (other / ".git").mkdir(parents=True)
    assert run("remote", "add", "hub", str(hub), "--project", str(other)).exit_code == 0
    done = run("pull", "hub", "--project", str(other))
    assert done.exit_code == 0, done.stderr
    assert done.stdout.splitlines()[-1].endswith(" version v\\x9b31m from hub")
