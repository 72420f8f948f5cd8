"""The generated Letta Code mod, driven by node with a stand-in ``letta`` object.

Letta Code with mods (>= 0.30) does not install here; drive_letta_mod.mjs
loads the mod the way a TypeScript host does (jiti, from the Pi install of
install_pi.sh) and runs its commands. A recorder stands in for machine where
the exact argv and the history file matter; the real CLI answers the rest
(its Letta API reader reads the history file the mod wrote).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from machine_git import bundled
from machine_git import paths
from machine_git import rows
from machine_git.agents import install
from tests.conftest import FIXTURES
from tests.conftest import git

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent
HISTORY = FIXTURES / "letta" / "api-history.json"
RECORDER = """\
import json, pathlib, sys
args = sys.argv[1:]
history = None
if "--session" in args:
    path = pathlib.Path(args[args.index("--session") + 1])
    history = json.loads(path.read_text())
    mode = oct(path.stat().st_mode & 0o777)
else:
    mode = None
pathlib.Path(sys.argv[0]).with_suffix(".out").write_text(
    json.dumps({"args": args, "history": history, "mode": mode})
)
print("recorded", " ".join(args))
"""


def drive(pi: Path, mod: Path, command: str, args: str, cwd: Path) -> dict[str, Any]:
    jiti_home = pi.parent.parent  # <cache>/node_modules/.bin/pi -> node_modules
    done = subprocess.run(
        [
            "node",
            str(HERE / "drive_letta_mod.mjs"),
            str(jiti_home),
            str(mod),
            str(HISTORY),
            command,
            args,
            str(cwd),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    value = json.loads(done.stdout)
    assert isinstance(value, dict)
    return value


def recording_mod(tmp_path: Path) -> tuple[Path, Path]:
    recorder = tmp_path / "recorder.py"
    recorder.write_text(RECORDER)
    template = bundled.read_bytes("templates", "letta-mod.ts.tmpl").decode()
    mod = tmp_path / "machine.ts"
    mod.write_text(
        install.render(
            template,
            {
                "MACHINE_ARGV": json.dumps([sys.executable, str(recorder)]),
                "VERSION": "test",
            },
        )
    )
    return mod, recorder.with_suffix(".out")


def test_good_passes_the_history_as_a_private_file(
    pi_bin: Path,
    project: Path,
    tmp_path: Path,
) -> None:
    mod, out = recording_mod(tmp_path)
    driven = drive(pi_bin, mod, "good", '--as "It is flaky." timing', project)
    assert driven["ids"] == ["good", "bad", "tagged", "machine", "train"]
    assert driven["left"] == 0  # the disposer unregisters every command
    assert driven["historyCalls"] == [{"limit": 500, "order": "asc"}]
    record = json.loads(out.read_text())
    session = record["args"][4]
    assert record["args"] == [
        "good",
        "--host",
        "letta",
        "--session",
        session,
        "--as",
        "It is flaky.",
        "timing",
    ]
    assert Path(session).name == "conv-e2e.json"
    assert not Path(session).parent.exists()  # deleted after the command
    assert record["history"] == json.loads(HISTORY.read_text())
    assert record["mode"] == "0o600"
    assert driven["result"] == {
        "type": "output",
        "output": (
            f"recorded good --host letta --session {session} --as It is flaky. timing"
        ),
        "success": True,
    }


def test_machine_subcommands_get_the_history_only_when_they_read_it(
    pi_bin: Path,
    project: Path,
    tmp_path: Path,
) -> None:
    mod, out = recording_mod(tmp_path)
    drive(pi_bin, mod, "machine", "fork 'use Julia'", project)
    assert json.loads(out.read_text())["args"] == ["fork", "use Julia"]
    driven = drive(pi_bin, mod, "machine", "observe", project)
    assert json.loads(out.read_text())["args"][:3] == ["observe", "--host", "letta"]
    assert driven["historyCalls"] == [{"limit": 500, "order": "asc"}]
    unbalanced = drive(pi_bin, mod, "bad", '"oops', project)
    assert unbalanced["result"] == {
        "type": "output",
        "output": 'machine: unbalanced " in: "oops',
        "success": False,
    }


def test_the_installed_mod_runs_this_machine(
    pi_bin: Path,
    project: Path,
) -> None:
    outcome = install.install_letta()[0]  # the mod; then the skills
    driven = drive(pi_bin, outcome.path, "tagged", "", project)
    assert driven["result"] == {
        "type": "output",
        "output": "nothing tagged yet",
        "success": True,
    }
    # the history file the mod writes is read by machine's Letta API reader
    good = drive(pi_bin, outcome.path, "good", "timing", project)
    assert good["result"]["success"] is True
    (line,) = good["result"]["output"].splitlines()
    assert line.startswith("good ") and line.endswith(
        " -> train: Make it deterministic and run the tests."
    )
    row = json.loads(
        git(paths.store_path(project), "show", f"HEAD:{rows.row_path(line.split()[1])}")
    )
    assert (row["source"]["host"], row["note"]) == ("letta", "timing")
    # observe reads the same history: the turn is in the dataset already, once
    observed = drive(pi_bin, outcome.path, "machine", "observe", project)
    assert observed["result"]["output"] == (
        f"already recorded {line.split()[1]} as train; nothing changed"
    )
    status = drive(pi_bin, outcome.path, "machine", "auto status", project)
    assert status["result"]["output"] == f"auto-capture off for {project}"
    failed = drive(pi_bin, outcome.path, "machine", "label nope good", project)
    assert failed["result"] == {
        "type": "output",
        "output": "Error: bad row id 'nope': expected 1 to 12 hex characters",
        "success": False,
    }
