"""Which model Pi chats with, and where: its default and one session's model.

Pi keeps two choices. Its default (``defaultProvider``/``defaultModel`` in
``$PI_CODING_AGENT_DIR/settings.json``) is what every new session starts on;
a session's own model (its last ``model_change``) is what that session
continues with. Choosing the student inside Pi changes only the session it was
asked in (the extension puts Pi's default back right after the switch), so
``machine student`` reads both to say what is active where, and ``machine
work`` puts Pi's default back when an older machine (or ``/model``) left it on
the student.

Pi locks ``settings.json`` while it rewrites it (proper-lockfile: a
``settings.json.lock`` folder); machine takes the same lock, keeps every other
setting, and replaces the file atomically.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from machine_git.core.errors import InstallError
from machine_git.core.errors import MachineError
from machine_git.sessions import pi as pi_sessions

SETTINGS_FILE = "settings.json"
_LOCK_TRIES = 50  # 50 x 20 ms: Pi itself gives up after 10 x 20 ms
_LOCK_WAIT = 0.02
_STALE = 10.0  # seconds; proper-lockfile's default


def settings_path() -> Path:
    """Pi's global settings: ``$PI_CODING_AGENT_DIR/settings.json``."""
    return pi_sessions.agent_dir() / SETTINGS_FILE


def _read() -> dict[str, Any] | None:
    """Pi's global settings, or None if there are none (or they cannot be read)."""
    try:
        value = json.loads(settings_path().read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def default_model() -> str | None:
    """``provider/model`` new Pi sessions start on, if Pi's settings name one."""
    values = _read() or {}
    provider, model = values.get("defaultProvider"), values.get("defaultModel")
    if isinstance(provider, str) and isinstance(model, str) and provider and model:
        return f"{provider}/{model}"
    return None


def set_default_model(model: str) -> None:
    """Make ``provider/model`` Pi's default, keeping every other setting."""
    provider, _, model_id = model.partition("/")
    path = settings_path()
    with _locked(path):
        try:
            text = path.read_text()
        except FileNotFoundError:
            text = "{}"
        except OSError as e:
            raise InstallError(f"cannot read {path}: {e.strerror}") from None
        try:
            values = json.loads(text) if text.strip() else {}
        except ValueError:
            values = None
        if not isinstance(values, dict):
            raise InstallError(f"{path} is not a JSON object; left as it is")
        values.update(defaultProvider=provider, defaultModel=model_id)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps(values, indent=2))
            with contextlib.suppress(OSError):
                os.chmod(tmp, path.stat().st_mode & 0o777)
            os.replace(tmp, path)
        except OSError as e:
            raise InstallError(f"cannot write {path}: {e.strerror}") from None
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold Pi's lock on ``path`` (the ``<path>.lock`` folder proper-lockfile makes)."""
    lock = path.with_name(path.name + ".lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(_LOCK_TRIES):
        try:
            lock.mkdir()
            break
        except FileExistsError:
            with contextlib.suppress(OSError):
                if time.time() - lock.stat().st_mtime > _STALE:
                    lock.rmdir()  # left by a process that died holding it
                    continue
            time.sleep(_LOCK_WAIT)
        except OSError as e:
            raise InstallError(f"cannot lock {path}: {e.strerror}") from None
    else:
        raise InstallError(f"{path} stays locked by another pi; try again")
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            lock.rmdir()


def session_model(session: Path) -> str | None:
    """``provider/model`` the Pi session ``session`` continues with, if known."""
    try:
        return pi_sessions.model_of(session)
    except MachineError:
        return None  # gone or unreadable: nothing to report
