from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from machine_git.core import jsonio
from machine_git.core.errors import INVALID
from machine_git.core.errors import RecordError
from machine_git.core.models import Settings
from machine_git.store import settings
from machine_git.store.store import Change
from machine_git.store.store import Store
from tests.conftest import Run
from tests.conftest import git


def test_settings_are_commits_with_defaults(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    assert settings.read(store) == Settings()
    assert settings.read(store).auto is False
    assert settings.write(store, "auto", False) is None  # the default: no commit
    commit = settings.write(store, "auto", True)
    assert commit is not None
    assert settings.read(store).auto is True
    assert settings.auto(store) is True
    assert settings.write(store, "auto", True) is None
    assert git(store.path, "log", "-1", "--format=%s%n%(trailers:only)") == (
        "set auto = true\nMachine-Action: setting\nMachine-Setting: auto\n\n"
    )
    assert git(store.path, "show", "HEAD:settings.json") == '{\n  "auto": true\n}\n'


def test_update_keeps_the_keys_it_does_not_set(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    settings.write(store, "auto", True)
    commit = settings.update(store, {"chat": "student", "student": "m/x"}, "student")
    assert commit is not None
    assert settings.update(store, {"chat": "student"}, "again") is None
    assert git(store.path, "show", "HEAD:settings.json") == (
        '{\n  "auto": true,\n  "chat": "student",\n  "student": "m/x"\n}\n'
    )
    assert git(store.path, "log", "-1", "--format=%(trailers:only)") == (
        "Machine-Action: setting\nMachine-Setting: chat, student\n\n"
    )


def _hand_write(store: Store, data: bytes) -> None:
    # As a push from a clone would: machine's own writers refuse bad values.
    store.write(lambda snap: Change("hand edit", {settings.SETTINGS: data}))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            b'{"auto": "yes"}',
            "settings.json: $.auto: Input should be a valid boolean",
        ),
        (
            b'{"chat": "teacher"}',
            "settings.json: $.chat: Input should be 'work' or 'student'",
        ),
        (
            b'{"autoo": true}',
            "settings.json: $.autoo: Extra inputs are not permitted",
        ),
        (
            b"[1]",
            "settings.json: $: Input should be a valid dictionary or instance of "
            "Settings",
        ),
        (b"{", "settings.json: not valid JSON (unexpected end of data: line 1 "),
    ],
)
def test_a_bad_record_is_one_line_naming_the_field(
    tmp_path: Path, data: bytes, message: str
) -> None:
    store = Store.create(tmp_path / "s")
    _hand_write(store, data)
    with pytest.raises(RecordError) as caught:
        settings.read(store)
    assert str(caught.value).startswith(message)
    assert caught.value.exit_code == INVALID
    with pytest.raises(RecordError):  # and nothing is written over it unread
        settings.write(store, "auto", True)


def test_auto_reads_only_its_own_value(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    _hand_write(store, b'{"auto": true, "chat": "teacher"}')
    assert settings.auto(store) is True  # a bad other setting is not its business
    _hand_write(store, b'{"auto": 1}')
    with pytest.raises(RecordError, match=r"^settings.json: \$.auto: Input should"):
        settings.auto(store)


def test_a_writer_cannot_write_a_bad_value(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    with pytest.raises(RecordError, match=r"^settings.json: \$.auto: Input should"):
        settings.write(store, "auto", "on")
    assert git(store.path, "log", "--format=%s") == "init store\n"


def test_the_auto_question_never_loads_pydantic(tmp_path: Path) -> None:
    # Asked after every agent turn (observe --if-auto) and by machine data.
    store = Store.create(tmp_path / "s")
    settings.write(store, "auto", True)
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from machine_git.store import settings\n"
        "from machine_git.store.store import Store\n"
        f"print(settings.auto(Store.open(Path({str(store.path)!r}))))\n"
        "print('pydantic' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert done.stdout == "True\nFalse\n"


def test_machine_data_says_what_is_wrong_with_settings(project: Path, run: Run) -> None:
    assert run("auto", "on").exit_code == 0
    store = Store.open(Path(jsonio.loads(run("data", "--json").stdout)["store"]))
    _hand_write(store, b'{"auto": "on"}')
    done = run("data")
    assert done.exit_code == INVALID
    assert done.stderr == (
        "Error: settings.json: $.auto: Input should be a valid boolean\n"
    )
