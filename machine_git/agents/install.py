"""Installing machine into Pi and Letta Code, and the Tinker provider for both.

The Pi extension and the Letta Code mod are rendered from templates/ with the
exact command of the machine that installs them baked in (this Python, ``-m
machine_git``), so they work without ``machine`` on PATH and always talk to
the same installation. Both are one file at a fixed path, so installing again
rewrites that file instead of adding a second copy. A first-line marker tells
our files apart from a user's: machine never overwrites or removes a file it
did not write.

machine's skills (skills/<name>/SKILL.md, shipped as package data) reach Pi
through the extension, which offers their folder to pi at startup
(``resources_discover``): nothing is copied, the skills always match the
installed machine, and the global extension stepping aside for a project one
keeps each skill loaded once. Letta Code reads skills only from its folders,
so ``install letta`` copies each one to ``~/.letta/skills/<name>/SKILL.md``
with a marker line after the front matter, and ``uninstall letta`` removes
the copies that carry it.

Tinker's chat models reach Pi as a provider in its ``models.json`` and Letta
Code as a provider mod of its own (``~/.letta/mods/machine-tinker.ts``, kept
apart from the commands: Letta Code's desktop listener loads provider mods
only). Letta Code refuses static model ids with a ``/``, so that mod lists
its models from ``listModels``: the base models, Tinker's ``GET /models``, and
the students ``machine student`` offered, which it reads from
``~/.letta/machine/tinker-models.json`` (written here, removed on uninstall).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from typing import NamedTuple

from machine_git import __version__
from machine_git import bundled
from machine_git.agents import footer
from machine_git.core.errors import INVALID
from machine_git.core.errors import InstallError
from machine_git.core.errors import UsageError
from machine_git.rows.schemas import KINDS
from machine_git.sessions import pi as pi_sessions
from machine_git.store.store import BRANCH
from machine_git.store.store import WORK

EXTENSION_FILE = "machine.ts"
LETTA_PROVIDER_FILE = "machine-tinker.ts"
LETTA_OFFERED_FILE = "tinker-models.json"
MARKER = "// machine-generated:"
SKILL_FILE = "SKILL.md"
# The line after a copied skill's front matter (an HTML comment: invisible).
SKILL_MARKER = (
    "<!-- machine-generated: skill. `machine uninstall letta` removes it. -->"
)
TINKER_PROVIDER = "tinker"
TINKER_PROVIDER_NAME = "Tinker (machine)"
TINKER_OAI_URL = "https://tinker.thinkingmachines.dev/services/tinker-prod/oai/api/v1"
OAI_URL_ENV = "MACHINE_TINKER_OAI_URL"
# Pi reads a provider's apiKey as an environment variable's name, and sends the
# name itself as the key when that variable is unset (resolve-config-value.js:
# ``process.env[config] || config``). A value starting with "!" is a command
# whose output is the key; printenv prints nothing and fails when the variable
# is unset, so Pi refuses the request instead of sending "TINKER_API_KEY".
API_KEY_ENV = "TINKER_API_KEY"
API_KEY_COMMAND = f"!printenv {API_KEY_ENV}"
# Base models offered in Pi's /model before any student is set (tinker.md §9).
CATALOG = (
    "thinkingmachines/Inkling-Small:peft:262144",
    "thinkingmachines/Inkling:peft:262144",
)
_DEFAULT_CONTEXT = 32768
_MAX_TOKENS = 8192
_PLACEHOLDER = re.compile(r"@@[A-Z_]+@@")


@dataclass
class Outcome:
    """What an install or uninstall did to one file: its path and the action."""

    path: Path
    action: str  # installed, updated, unchanged, removed, absent, skipped
    detail: str = ""


# -- where things go -------------------------------------------------------------


def pi_extension_path(project: Path | None = None) -> Path:
    """``$PI_CODING_AGENT_DIR/extensions``, or ``<project>/.pi/extensions``."""
    if project is not None:
        return project / ".pi" / "extensions" / EXTENSION_FILE
    return pi_sessions.agent_dir() / "extensions" / EXTENSION_FILE


def letta_mod_path() -> Path:
    """``~/.letta/mods/machine.ts``: Letta Code loads global mods only."""
    return Path.home() / ".letta" / "mods" / EXTENSION_FILE


def letta_provider_path() -> Path:
    """``~/.letta/mods/machine-tinker.ts``: the Tinker provider mod."""
    return Path.home() / ".letta" / "mods" / LETTA_PROVIDER_FILE


def letta_offered_path() -> Path:
    """The students offered in Letta Code's Tinker catalog (a JSON list)."""
    return Path.home() / ".letta" / "machine" / LETTA_OFFERED_FILE


def letta_skills_dir() -> Path:
    """``~/.letta/skills``: Letta Code's global skills (``<name>/SKILL.md``)."""
    return Path.home() / ".letta" / "skills"


def skills_dir() -> Path:
    """The skills shipped with this machine (a real folder: pi reads it)."""
    where = Path(str(bundled.folder("skills")))
    if not where.is_dir():
        raise InstallError(f"machine's skills folder is missing: {where}")
    return where


def skills() -> dict[str, str]:
    """Each shipped skill's name (its folder) and SKILL.md text, by name."""
    found: dict[str, str] = {}
    for child in sorted(skills_dir().iterdir()):
        path = child / SKILL_FILE
        if path.is_file():
            found[child.name] = path.read_text()
    return found


def pi_models_path() -> Path:
    """Pi's custom models file: ``$PI_CODING_AGENT_DIR/models.json``."""
    return pi_sessions.agent_dir() / "models.json"


def oai_url() -> str:
    """Tinker's OpenAI-compatible base URL (``$MACHINE_TINKER_OAI_URL`` overrides)."""
    return (os.environ.get(OAI_URL_ENV) or TINKER_OAI_URL).rstrip("/")


def machine_argv() -> list[str]:
    """The command that runs this very machine: no PATH lookup, no shell."""
    return [sys.executable, "-m", "machine_git"]


# -- rendering -------------------------------------------------------------------


def render(template: str, values: dict[str, str]) -> str:
    """Fill ``@@NAME@@`` placeholders; every placeholder must get a value."""
    text = template
    for name, value in values.items():
        text = text.replace(f"@@{name}@@", value)
    left = _PLACEHOLDER.search(text)
    if left is not None:
        raise InstallError(f"template placeholder {left.group(0)} has no value")
    return text


def _template(name: str) -> str:
    try:
        return bundled.read_bytes("templates", name).decode()
    except OSError as e:
        raise InstallError(f"the template {name} is missing: {e.strerror}") from None


def render_pi_extension(scope: str) -> str:
    """The Pi extension for ``scope`` (``global`` or ``project``)."""
    return render(
        _template("pi-extension.ts.tmpl"),
        {
            "MACHINE_ARGV": json.dumps(machine_argv()),
            "SCOPE": json.dumps(scope),
            "VERSION": __version__,
            "UNINSTALL_FLAG": " --project" if scope == "project" else "",
            "SKILLS_DIR": json.dumps(str(skills_dir())),
            "BRANCH": json.dumps(BRANCH),
            "STATS_FILE": json.dumps(f"{WORK}/{footer.CACHE_FILE}"),
            "KINDS": json.dumps(list(KINDS)),
            "TINKER_PROVIDER": json.dumps(TINKER_PROVIDER),
            "KEY_ENV": json.dumps(API_KEY_ENV),
            "INVALID_EXIT": str(INVALID),
            "CONTEXT_ENTRY": json.dumps(pi_sessions.CONTEXT_ENTRY),
        },
    )


def render_letta_mod() -> str:
    """The Letta Code mod: commands, footer panel, observed runs, the student."""
    return render(
        _template("letta-mod.ts.tmpl"),
        {
            "MACHINE_ARGV": json.dumps(machine_argv()),
            "VERSION": __version__,
            "BRANCH": json.dumps(BRANCH),
            "STATS_FILE": json.dumps(f"{WORK}/{footer.CACHE_FILE}"),
            "KINDS": json.dumps(list(KINDS)),
            "TINKER_PROVIDER": json.dumps(TINKER_PROVIDER),
            "KEY_ENV": json.dumps(API_KEY_ENV),
        },
    )


def render_letta_provider() -> str:
    """The Letta Code provider mod for Tinker's OpenAI-compatible endpoint."""
    return render(
        _template("letta-tinker-provider.ts.tmpl"),
        {
            "VERSION": __version__,
            "TINKER_PROVIDER": json.dumps(TINKER_PROVIDER),
            "TINKER_NAME": json.dumps(TINKER_PROVIDER_NAME),
            "BASE_URL": json.dumps(oai_url()),
            "KEY_ENV": json.dumps(API_KEY_ENV),
            "CATALOG": json.dumps(list(CATALOG)),
            "OFFERED_FILE": json.dumps(str(letta_offered_path())),
            "DEFAULT_CONTEXT": str(_DEFAULT_CONTEXT),
            "MAX_TOKENS": str(_MAX_TOKENS),
        },
    )


# -- install and uninstall -------------------------------------------------------

HOSTS = ("pi", "letta")  # agents machine installs into (Claude Code: claude_commands)


class Installed(NamedTuple):
    """What ``machine install`` did: each file, and the skills the agent gets."""

    outcomes: list[Outcome]
    skills: list[str]
    skills_dir: Path


def install(host: str, project: Path | None = None) -> Installed:
    """Install machine into ``host``: Pi (globally, or in ``project``) or Letta Code."""
    _check_project(host, project)
    done = install_pi(project) if host == "pi" else install_letta()
    return Installed(done, list(skills()), skills_dir())


def uninstall(host: str, project: Path | None = None) -> list[Outcome]:
    """Remove what :func:`install` wrote (only files machine wrote)."""
    _check_project(host, project)
    return uninstall_pi(project) if host == "pi" else uninstall_letta()


def _check_project(host: str, project: Path | None) -> None:
    if host not in HOSTS:
        raise InstallError(f"machine installs into {' and '.join(HOSTS)}, not {host}")
    if host == "letta" and project is not None:
        raise UsageError(
            "Letta Code loads mods from ~/.letta/mods only; drop --project"
        )


# -- Pi --------------------------------------------------------------------------


def install_pi(project: Path | None = None) -> list[Outcome]:
    """Write the Pi extension (global, or in ``project``) and the Tinker provider."""
    models = _read_models(pi_models_path())  # refuse a broken file before writing
    scope = "global" if project is None else "project"
    done = [_place(pi_extension_path(project), render_pi_extension(scope))]
    done.append(_add_provider(pi_models_path(), models, ()))
    return done


def uninstall_pi(project: Path | None = None) -> list[Outcome]:
    """Remove the Pi extension; the provider goes with the last global extension.

    Folders machine's file was the last thing in (``<project>/.pi/extensions``,
    then ``<project>/.pi``) go too, and so does a ``models.json`` that holds
    nothing once the provider is out: uninstalling leaves no empty traces.
    """
    target = pi_extension_path(project)
    done = [_remove(target)]
    if project is not None and done[0].action == "removed":
        _remove_empty(target.parent, project)
    if not _ours(pi_extension_path()):
        done.append(_remove_provider(pi_models_path()))
    return done


def _remove_empty(folder: Path, stop: Path) -> None:
    """Remove ``folder`` and its parents up to (not including) ``stop`` while empty."""
    while folder != stop and folder.is_relative_to(stop):
        try:
            folder.rmdir()  # only succeeds on an empty folder
        except OSError:
            return
        folder = folder.parent


def add_pi_model(handle: str) -> Outcome:
    """Offer ``handle`` in Pi's Tinker provider, if machine installed it."""
    path = pi_models_path()
    models = _read_models(path)
    provider = models.get("providers", {}).get(TINKER_PROVIDER)
    if not _our_provider(provider):
        return Outcome(path, "skipped", "machine install pi adds the Tinker provider")
    return _add_provider(path, models, (handle,))


# -- Letta Code ------------------------------------------------------------------


def install_letta() -> list[Outcome]:
    """Write the Letta Code mod and the Tinker provider mod, and copy machine's
    skills to ``~/.letta/skills``.

    Skills machine copied before and no longer ships are removed.
    """
    shipped = skills()
    targets = {
        letta_skills_dir() / name / SKILL_FILE: text for name, text in shipped.items()
    }
    # refuse a file of the user's before writing anything
    _refuse_foreign(letta_mod_path(), _ours)
    _refuse_foreign(letta_provider_path(), _ours)
    for target in targets:
        _refuse_foreign(target, _our_skill)
    done = [
        _place(letta_mod_path(), render_letta_mod()),
        _place(letta_provider_path(), render_letta_provider()),
    ]
    for target, text in targets.items():
        done.append(_place(target, marked_skill(text), _our_skill))
    done += [
        _remove_skill(path)
        for path in _copied_skills()
        if path.parent.name not in shipped
    ]
    return done


def uninstall_letta() -> list[Outcome]:
    """Remove the Letta Code mods, the students they offered and every skill
    machine copied."""
    done = [_remove(letta_mod_path()), _remove(letta_provider_path())]
    offered = letta_offered_path()
    if offered.exists():
        try:
            offered.unlink()
        except OSError as e:
            raise InstallError(f"cannot remove {offered}: {e.strerror}") from None
        done.append(Outcome(offered, "removed"))
    with contextlib.suppress(OSError):
        offered.parent.rmdir()  # only if it held nothing else
    return [*done, *map(_remove_skill, _copied_skills())]


def add_letta_model(handle: str) -> Outcome:
    """Offer ``handle`` in Letta Code's Tinker catalog, if machine installed it."""
    path = letta_offered_path()
    if not _ours(letta_provider_path()):
        return Outcome(
            path, "skipped", "machine install letta adds the Tinker provider"
        )
    try:
        value = json.loads(path.read_text())
    except FileNotFoundError:
        value = []
    except (OSError, ValueError):
        value = []  # unreadable: written again whole, as machine keeps it
    known = [h for h in value if isinstance(h, str)] if isinstance(value, list) else []
    if handle in known:
        return Outcome(path, "unchanged")
    _write(path, (json.dumps([*known, handle], indent=2) + "\n").encode())
    return Outcome(path, "updated" if known else "installed")


# -- skills ----------------------------------------------------------------------


def marked_skill(text: str, marker: str = SKILL_MARKER) -> str:
    """A skill's SKILL.md with machine's marker as the first line after the front
    matter (the front matter must stay first: hosts parse it from line one)."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip() != "---":
        raise InstallError("a shipped skill has no front matter")
    for i in range(1, len(lines)):
        if lines[i].rstrip() == "---":
            return "".join([*lines[: i + 1], marker + "\n", *lines[i + 1 :]])
    raise InstallError("a shipped skill's front matter is not closed")


def _our_skill(path: Path) -> bool:
    try:
        head = path.read_text(errors="replace")[:8192]
    except OSError:
        return False
    return f"\n---\n{SKILL_MARKER}\n" in head


def _copied_skills() -> list[Path]:
    """The SKILL.md files in Letta's skills folder that machine wrote."""
    try:
        children = sorted(letta_skills_dir().iterdir())
    except OSError:
        return []
    return [c / SKILL_FILE for c in children if _our_skill(c / SKILL_FILE)]


def _remove_skill(path: Path) -> Outcome:
    done = _remove(path, _our_skill)
    with contextlib.suppress(OSError):
        path.parent.rmdir()  # only if machine's file was all it held
    return done


# -- files -----------------------------------------------------------------------


def _ours(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.readline(200).startswith(MARKER.encode())
    except OSError:
        return False


def _refuse_foreign(path: Path, ours: Callable[[Path], bool]) -> None:
    if path.exists() and not ours(path):
        raise InstallError(
            f"{path} exists and was not written by machine; move it away first"
        )


def _place(path: Path, text: str, ours: Callable[[Path], bool] = _ours) -> Outcome:
    _refuse_foreign(path, ours)
    try:
        if path.read_text() == text:
            return Outcome(path, "unchanged")
    except OSError:
        pass
    action = "updated" if path.exists() else "installed"
    _write(path, text.encode())
    return Outcome(path, action)


def _remove(path: Path, ours: Callable[[Path], bool] = _ours) -> Outcome:
    if not path.exists():
        return Outcome(path, "absent")
    if not ours(path):
        raise InstallError(f"{path} was not written by machine; left in place")
    try:
        path.unlink()
    except OSError as e:
        raise InstallError(f"cannot remove {path}: {e.strerror}") from None
    return Outcome(path, "removed")


def _write(path: Path, data: bytes) -> None:
    """Replace ``path`` atomically with a private (0600) file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    old = os.umask(0o077)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError as e:
        raise InstallError(f"cannot write {path}: {e.strerror}") from None
    finally:
        os.umask(old)
        with contextlib.suppress(OSError):
            tmp.unlink()


# -- Pi's models.json ------------------------------------------------------------


def read_user_json(path: Path) -> Any:
    """An agent's own JSON settings file as the user left it ({} if missing).

    Refused with one line, never rewritten, if it can't be read or parsed:
    install and uninstall edit these files and must not clobber them.
    """
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise InstallError(f"cannot read {path}: {e.strerror}") from None
    try:
        return json.loads(text) if text.strip() else {}
    except ValueError:
        raise InstallError(
            f"{path} is not valid JSON; fix it or move it away, then install again"
        ) from None


def _read_models(path: Path) -> dict[str, Any]:
    value = read_user_json(path)
    if not isinstance(value, dict) or not isinstance(
        value.setdefault("providers", {}), dict
    ):
        raise InstallError(f"{path} has no 'providers' object; fix it first")
    return value


def _our_provider(provider: Any) -> bool:
    return isinstance(provider, dict) and provider.get("name") == TINKER_PROVIDER_NAME


def _add_provider(
    path: Path, models: dict[str, Any], handles: tuple[str, ...]
) -> Outcome:
    providers: dict[str, Any] = models["providers"]
    current = providers.get(TINKER_PROVIDER)
    if current is not None and not _our_provider(current):
        return Outcome(
            path, "skipped", f"a {TINKER_PROVIDER!r} provider is already configured"
        )
    known = [
        m
        for m in (current or {}).get("models", [])
        if isinstance(m, dict) and isinstance(m.get("id"), str)
    ]
    ids = [m["id"] for m in known]
    entries = list(known)
    for handle in (*CATALOG, *handles):
        if handle not in ids:
            entries.append(model_entry(handle))
            ids.append(handle)
    provider = {
        "name": TINKER_PROVIDER_NAME,
        "baseUrl": oai_url(),
        "api": "openai-completions",
        "apiKey": API_KEY_COMMAND,
        "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
        "models": entries,
    }
    if current == provider:
        return Outcome(path, "unchanged")
    providers[TINKER_PROVIDER] = provider
    _write(path, (json.dumps(models, indent=2) + "\n").encode())
    return Outcome(path, "updated" if current is not None else "installed")


def _remove_provider(path: Path) -> Outcome:
    models = _read_models(path)
    if not _our_provider(models["providers"].get(TINKER_PROVIDER)):
        return Outcome(path, "absent")
    del models["providers"][TINKER_PROVIDER]
    if models == {"providers": {}}:
        # nothing of the user's is left in it: no empty file stays behind
        try:
            path.unlink()
        except OSError as e:
            raise InstallError(f"cannot remove {path}: {e.strerror}") from None
    else:
        _write(path, (json.dumps(models, indent=2) + "\n").encode())
    return Outcome(path, "removed")


def model_entry(handle: str) -> dict[str, Any]:
    """Pi's model definition for a Tinker handle (context from ``:peft:N``)."""
    base = handle.split(";", 1)[0]
    window = _DEFAULT_CONTEXT
    if not base.startswith("tinker://"):
        last = base.rsplit(":", 1)[-1]
        if last.isdigit():
            window = int(last)
    if base.startswith("tinker://"):
        label = "checkpoint " + base.rsplit("/", 1)[-1]
    else:
        label = base.split(":", 1)[0].rsplit("/", 1)[-1]
    return {
        "id": handle,
        "name": f"{label} (Tinker)",
        "reasoning": False,
        "input": ["text"],
        "contextWindow": window,
        "maxTokens": min(_MAX_TOKENS, window),
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
    }
