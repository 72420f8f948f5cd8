"""A store's remotes: named URLs git fetches from and pushes to.

A URL is checked when it is added and again whenever it is used
(transport.py allows some transports only), so a remote added with git by
hand gets the same refusal as ``machine remote add``. A local path is kept
absolute, since git runs inside the store.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from machine_git.core import paths
from machine_git.core.errors import ConflictError
from machine_git.core.errors import RemoteError
from machine_git.core.errors import UsageError
from machine_git.store.store import Store
from machine_git.sync import hooks
from machine_git.sync import transport

DEFAULT_REMOTE = "origin"


@dataclass(frozen=True)
class Remote:
    """A remote of the store: a name and the URL git fetches from."""

    name: str
    url: str


def add_remote(store: Store, name: str, url: str) -> Remote:
    """Add remote ``name``; a local path is kept absolute (git runs in the store)."""
    paths.check_name(name, "remote name")
    refused = transport.refusal(url)
    if refused is not None:
        raise UsageError(f"remote URL {url!r} is refused: {refused}")
    if transport.is_local(url):
        url = str(Path(url).expanduser().resolve())
    if name in store.repo.remotes.names():
        existing = store.repo.remotes[name].url
        raise ConflictError(f"remote {name!r} already exists ({existing})")
    store.repo.remotes.create(name, url)
    hooks.install_store_hooks(store.path)
    return Remote(name, url)


def remotes(store: Store) -> list[Remote]:
    """Every remote of the store, by name."""
    found = [Remote(r.name or "", r.url or "") for r in store.repo.remotes]
    return sorted(found, key=lambda r: r.name)


def get_remote(store: Store, name: str) -> Remote:
    """Remote ``name``, or a one-line error saying how to add it.

    Its URLs are checked again here: a remote added with git by hand gets
    the same refusal as ``machine remote add``.
    """
    paths.check_name(name, "remote name")
    for remote in store.repo.remotes:
        if remote.name != name:
            continue
        for url in (remote.url, remote.push_url):
            refused = transport.refusal(url) if url is not None else None
            if refused is not None:
                raise RemoteError(f"remote {name} ({url}) is refused: {refused}")
        return Remote(name, remote.url or "")
    raise RemoteError(
        f"no remote {name!r} (add one with 'machine remote add {name} URL')"
    )
