"""git runs with allowed transports only, never prompts, and never waits forever."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from machine_git import sync
from machine_git import transport
from machine_git.errors import RemoteError
from machine_git.errors import UsageError
from machine_git.store import Store
from tests import helpers
from tests.conftest import git
from tests.servers import asking_server  # noqa: F401 (a fixture)
from tests.servers import silent_server  # noqa: F401 (a fixture)
from tests.test_sync import put


@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("/srv/hub.git", "file"),
        ("hub.git", "file"),
        ("./a:b", "file"),
        ("file:///srv/hub.git", "file"),
        ("git://example.com/data.git", "git"),
        ("http://example.com/data.git", "http"),
        ("HTTPS://example.com/data.git", "https"),
        ("ssh://me@example.com/data.git", "ssh"),
        ("git+ssh://example.com/data.git", "ssh"),
        ("git@example.com:me/data.git", "ssh"),
        ("ext::sh -c touch% /tmp/x", "ext::"),
        ("fd::3", "fd::"),
        ("persistent-https::example.com", "persistent-https::"),
        ("ftp://example.com/data.git", "ftp://"),
        ("foo://example.com/data.git", "foo://"),
    ],
)
def test_the_transport_git_would_use(url: str, name: str) -> None:
    assert transport.transport_of(url) == name


@pytest.fixture
def permissive_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user git config that allows every transport; a marker file to watch."""
    config = tmp_path / "gitconfig"
    config.write_text("[protocol]\n\tallow = always\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    return tmp_path / "ran"


@pytest.mark.parametrize(
    "url", ["ext::sh -c touch% /tmp/x", "fd::0", "foo://example.com/x", "ftp://x/y"]
)
def test_a_remote_of_another_transport_is_refused_when_added(
    tmp_path: Path, url: str
) -> None:
    store = Store.create(tmp_path / "s")
    with pytest.raises(UsageError) as e:
        sync.add_remote(store, "origin", url)
    assert str(e.value).startswith(f"remote URL {url!r} is refused: transport ")
    assert "\n" not in str(e.value)
    assert sync.remotes(store) == []


def test_a_command_remote_added_by_hand_never_runs(
    tmp_path: Path, permissive_git: Path
) -> None:
    store = Store.create(tmp_path / "s")
    put(store, helpers.train_row("a1a1a1a1a1a1"))
    url = f"ext::sh -c touch% {permissive_git}"
    git(store.path, "remote", "add", "evil", url)
    for step in (sync.pull, sync.push):
        with pytest.raises(RemoteError) as e:
            step(store, "evil")
        assert str(e.value) == (
            f"remote evil ({url}) is refused: transport 'ext::' is not allowed "
            "(only file paths, git://, http(s):// and ssh: other transports can "
            "run commands or wait forever)"
        )
    # A push URL of its own is checked too.
    git(store.path, "remote", "add", "mixed", str(tmp_path / "hub.git"))
    git(store.path, "remote", "set-url", "--push", "mixed", url)
    with pytest.raises(RemoteError, match="is refused"):
        sync.push(store, "mixed")
    assert not permissive_git.exists()


def test_a_url_rewritten_into_a_command_is_stopped_by_git_itself(
    tmp_path: Path, permissive_git: Path
) -> None:
    # insteadOf turns an allowed URL into ext:: after machine checked it: the
    # allow-list in git's environment is what stops it.
    config = Path(str(permissive_git.parent / "gitconfig"))
    config.write_text(
        "[protocol]\n\tallow = always\n"
        f'[url "ext::sh -c touch% {permissive_git}% #"]\n'
        "\tinsteadOf = https://evil.example/\n"
    )
    store = Store.create(tmp_path / "s")
    sync.add_remote(store, "origin", "https://evil.example/data.git")
    with pytest.raises(RemoteError) as e:
        sync.pull(store)
    assert str(e.value) == (
        "cannot fetch from origin (https://evil.example/data.git): "
        "transport 'ext' not allowed"
    )
    assert not permissive_git.exists()


def test_an_fd_remote_added_by_hand_is_refused_not_waited_on(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "s")
    git(store.path, "remote", "add", "pipe", "fd::0")
    started = time.monotonic()
    with pytest.raises(RemoteError, match=r"^remote pipe \(fd::0\) is refused"):
        sync.pull(store, "pipe")
    assert time.monotonic() - started < 5


def test_a_silent_server_is_given_up_on_at_the_time_limit(
    tmp_path: Path,
    silent_server: int,  # noqa: F811 (a fixture)
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(transport.TIMEOUT_ENV, "1.5")
    store = Store.create(tmp_path / "s")
    sync.add_remote(store, "origin", f"git://127.0.0.1:{silent_server}/data.git")
    started = time.monotonic()
    with pytest.raises(RemoteError) as e:
        sync.pull(store)
    assert str(e.value) == (
        "pull from origin stopped: no answer within 1.5 s "
        "(MACHINE_GIT_TIMEOUT sets the limit)"
    )
    assert time.monotonic() - started < 10


def test_a_bad_time_limit_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(transport.TIMEOUT_ENV, "soon")
    store = Store.create(tmp_path / "s")
    sync.add_remote(store, "origin", str(tmp_path / "hub.git"))
    with pytest.raises(UsageError, match=r"^MACHINE_GIT_TIMEOUT='soon': expected"):
        sync.pull(store)


def test_a_server_asking_for_a_password_gets_no_prompt(
    tmp_path: Path,
    asking_server: int,  # noqa: F811 (a fixture)
    permissive_git: Path,
) -> None:
    store = Store.create(tmp_path / "s")
    url = f"http://127.0.0.1:{asking_server}/data.git"
    sync.add_remote(store, "origin", url)
    started = time.monotonic()
    with pytest.raises(RemoteError) as e:
        sync.pull(store)
    assert str(e.value) == (
        f"cannot fetch from origin ({url}): could not read Username for "
        f"'http://127.0.0.1:{asking_server}': terminal prompts disabled"
    )
    assert time.monotonic() - started < 10
