from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from machine_git.cli import FAST
from machine_git.cli import cli
from tests.conftest import Run

CLI = Path(__file__).parents[2] / "machine_git" / "cli"


@pytest.mark.parametrize("name", sorted(FAST))
def test_a_fast_command_is_the_one_registered_under_its_name(name: str) -> None:
    module, attribute = FAST[name]
    command = getattr(importlib.import_module(module), attribute)
    assert cli.commands[name] is command
    assert command.name == name


def test_machine_good_loads_no_other_command() -> None:
    code = (
        "import sys, click\n"
        "from machine_git.cli import cli\n"
        "cli.get_command(click.Context(cli), 'good')\n"
        "print('\\n'.join(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    others = {
        f"machine_git.cli.{p.stem}"
        for p in CLI.glob("*.py")
        if p.stem not in {"__init__", "common", "tag"}
    }
    assert others
    assert others & set(done.stdout.split()) == set()


def test_help_lists_every_command(run: Run) -> None:
    listed = run("--help").stdout
    for name in cli.commands:
        assert f"  {name} " in listed or f"  {name}\n" in listed


# Commands that read the store but write no new text never scan for secrets:
# the scanner (machine_git.secrets, about 300 patterns behind it) stays off
# their import path. Rows tagged by machine record that they were scanned, so
# even an export does not scan them again.
_PROBE = """
import os, sys
from machine_git.cli import cli
out = open(sys.argv[1], "w")
for line in sys.argv[2:]:
    args = line.split()
    pid = os.fork()
    if pid == 0:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        try:
            cli.main(args, standalone_mode=False)
        except BaseException:
            pass
        out.write(f"{line}\\t{'machine_git.secrets' in sys.modules}\\n")
        out.flush()
        os._exit(0)
    os.waitpid(pid, 0)
"""
_NOT_SCANNING = ("tagged", "data", "log", "show HEAD", "diff", "export", "gc")


def test_commands_that_do_not_scan_never_load_the_scanner(
    project: Path, run: Run, tmp_path: Path
) -> None:
    from tests.conftest import PI_SESSIONS

    assert run("good", "--session", str(PI_SESSIONS / "basic.jsonl")).exit_code == 0
    report = tmp_path / "loaded.tsv"
    lines = [*_NOT_SCANNING, f"good --session {PI_SESSIONS / 'multi-turn.jsonl'}"]
    subprocess.run(
        [sys.executable, "-c", _PROBE, str(report), *lines], check=True, cwd=project
    )
    loaded = dict(line.split("\t") for line in report.read_text().splitlines())
    assert loaded == {
        **{name: "False" for name in _NOT_SCANNING},
        lines[-1]: "True",  # a tag scans: the probe sees the scanner when it is used
    }


def test_only_machine_review_loads_the_web_stack() -> None:
    # machine review's extra (starlette, jinja2, uvicorn) is optional: no other
    # command, nor --help of any command, may import it or machine_git.review.
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from machine_git.cli import cli\n"
        "runner = CliRunner()\n"
        "runner.invoke(cli, ['--help'])\n"
        "for name in list(cli.commands):\n"
        "    runner.invoke(cli, [name, '--help'])\n"
        "print('\\n'.join(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    web = {"starlette", "jinja2", "uvicorn", "markupsafe", "httpx2"}
    loaded = [
        m
        for m in done.stdout.split()
        if m.split(".")[0] in web or m.startswith("machine_git.review")
    ]
    assert loaded == []
    assert "machine_git.cli.review" in done.stdout.split()  # it was looked at
