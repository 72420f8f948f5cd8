"""A working clone of the store, for editing rows by hand with git.

The clone gets machine's pre-commit hook (the store's pre-receive hook
checks the push again), private permissions, and an identity of its own if
the user's git config has none, so ``git commit -a && git push`` works.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pygit2

from machine_git.core.errors import HookError
from machine_git.store.store import Store
from machine_git.sync import hooks
from machine_git.sync import transport
from machine_git.sync.remotes import DEFAULT_REMOTE


def clone(store: Store, dest: Path) -> Path:
    """A working clone of the store at ``dest``, with the pre-commit hook."""
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise HookError(f"{dest} exists and is not empty; clone into a new folder")
    hooks.install_store_hooks(store.path)
    target = dest.resolve()
    done = transport.run(
        None,
        "clone",
        "--quiet",
        "--template=",  # no sample hooks: ours are the only ones
        "--origin",
        DEFAULT_REMOTE,
        "--branch",
        "main",
        str(store.path),
        str(target),
        what=f"clone into {dest}",
    )
    if done.returncode != 0:
        raise HookError(
            f"cannot clone into {dest}: {transport.first_error(done.stderr)}"
        )
    git_dir = target / ".git"
    config = pygit2.Repository(str(git_dir)).config
    config["core.sharedRepository"] = "0600"  # later git writes stay private
    hooks.install_clone_hooks(git_dir)
    hooks.fix_permissions(git_dir)
    return target


@dataclass
class Cloned:
    """A working clone for editing rows, and the identity set in it, if any."""

    path: Path
    identity: str | None  # "Name <email>" set in the clone's own config


def clone_for_editing(store: Store, dest: Path) -> Cloned:
    """:func:`clone`, made ready for ``git commit -a && git push``.

    git refuses to commit without an identity (user.name and user.email). If
    the user's git config has none, the clone gets one in its own config: the
    parts the user's config does have, then GIT_AUTHOR_NAME/EMAIL, then
    machine's (as the store signs tags made without one).
    """
    target = clone(store, dest)
    found = {key: _git_config(target, f"user.{key}") for key in ("name", "email")}
    if found["name"] and found["email"]:
        return Cloned(target, None)
    name = found["name"] or _environment_or("GIT_AUTHOR_NAME", "machine")
    email = found["email"] or _environment_or("GIT_AUTHOR_EMAIL", "machine@localhost")
    config = pygit2.Repository(str(target / ".git")).config
    config["user.name"] = name
    config["user.email"] = email
    return Cloned(target, f"{name} <{email}>")


def _git_config(target: Path, key: str) -> str | None:
    # Asked of git itself: it reads every file git commit will (global, XDG,
    # system, includes, GIT_CONFIG_GLOBAL), which libgit2 does not all honor.
    done = transport.run(
        None, "-C", str(target), "config", "--get", key, what=f"read {key}"
    )
    return (done.stdout.strip() or None) if done.returncode == 0 else None


def _environment_or(variable: str, default: str) -> str:
    return os.environ.get(variable) or default
