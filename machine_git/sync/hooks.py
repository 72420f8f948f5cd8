"""Git hooks that keep invalid rows out of stores, and installing them.

The hook scripts are templates in the top-level ``hooks/`` folder; installed,
each one execs the Python that installed it (``sys.executable`` baked in), so
it checks rows against the same schemas machine writes with:

- ``pre-receive`` (store): refuses a push whose new commits hold a row that is
  invalid, not canonical, not at the path its id names, or that brings a
  secret (the scanner machine redacts with), unless the commit records an
  explicit ``--no-redact``;
- ``post-receive`` (store): gives the files the push wrote the store's modes;
- ``pre-commit`` (working clone): refuses a commit whose staged rows are bad
  or bring a secret.

Each looks only at what changed (new commits against their first parent, or
the staged paths), so one row costs the same in a store of 100,000 rows.
``validate_main`` and ``secrets_main`` are the pre-commit framework's hooks
(``.pre-commit-hooks.yaml``), with pre-commit-hooks' ``main(argv) -> int``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import re
import shlex
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Sequence
from pathlib import Path

import pygit2
from pygit2 import Commit

from machine_git import bundled
from machine_git.core import jsonio
from machine_git.core.errors import HookError
from machine_git.core.errors import MachineError
from machine_git.core.progress import QUIET
from machine_git.core.progress import Progress
from machine_git.recovery import validate
from machine_git.recovery.validate import Finding
from machine_git.rows import context
from machine_git.rows import images
from machine_git.rows import rows
from machine_git.rows import schemas
from machine_git.store.objects import guard
from machine_git.sync import incoming

STORE_HOOKS = ("pre-receive", "post-receive")
CLONE_HOOKS = ("pre-commit",)
_MARK = b"# Installed by machine"
_ZERO = "0" * 40
_FANOUT = re.compile(r"^[0-9a-f]{2}$")
# post-receive runs right after git moved the pushed objects out of quarantine;
# the folders that gained files were touched within this many seconds.
_RECEIVE_WINDOW = 300.0

BadCommit = tuple[Commit, list[Finding]]


# -- checking rows ---------------------------------------------------------------------


def check_blob(path: str, data: bytes) -> list[Finding]:
    """Why file ``path`` with bytes ``data`` may not be committed; empty if fine.

    The same gate as the store's own writes: files outside ``rows/`` and
    ``context/`` pass; a row must be valid, at the path its id names, and
    canonical JSON; a context must be valid, canonical and named by its hash.
    """
    if context.is_context_path(path):
        return [Finding(path, 1, "$", p) for p in context.file_problems(path, data)]
    if images.is_image_path(path):
        return [Finding(path, 1, "$", p) for p in images.file_problems(path, data)]
    if not path.startswith(f"{rows.ROWS_DIR}/"):
        return []
    row_id = rows.id_of_path(path)
    if row_id is None:
        return [Finding(path, 1, "$", "not a row path (rows/ab/cd/<12 hex>.json)")]
    try:
        value = jsonio.loads(data)
    except jsonio.JSONDecodeError as e:
        return [Finding(path, 1, "$", f"not valid JSON ({e})")]
    problems = schemas.row_problems(value)
    if problems:
        return [Finding(path, 1, p.path, p.message) for p in problems]
    if value.get("id") != row_id:
        return [
            Finding(path, 1, "$.id", f"{value['id']!r} does not match the file name")
        ]
    if jsonio.canonical(value) != data:
        return [Finding(path, 1, "$", "not canonical JSON (sorted keys, indent 2)")]
    return []


def check_secrets(path: str, data: bytes, old: bytes | None) -> list[Finding]:
    """A valid row ``data`` that brings a secret its old version ``old`` lacked.

    The same scanner as machine's own writes: a row pushed or committed by
    hand gets no pass machine would not give it.
    """
    from machine_git.secrets import redaction  # the scanner loads only when rows come

    row = jsonio.loads(data)
    before = None
    if old is not None:
        with contextlib.suppress(ValueError):
            before = jsonio.loads(old)
    kinds = redaction.leaks(row, before if isinstance(before, dict) else None)
    if not kinds:
        return []
    return [Finding(path, 1, "$", f"holds an unredacted secret ({', '.join(kinds)})")]


def check_file_secrets(path: str, data: bytes, old: bytes | None) -> list[Finding]:
    """A file (not a row) that brings a secret its old version ``old`` lacked."""
    from machine_git import secrets  # the scanner loads only when files come

    kinds = secrets.file_leaks(data, old)
    if not kinds:
        return []
    return [Finding(path, 1, "$", f"holds an unredacted secret ({', '.join(kinds)})")]


def check_commits(
    repo: pygit2.Repository,
    ids: Iterable[pygit2.Oid],
    progress: Progress = QUIET,
) -> list[BadCommit]:
    """The commits among ``ids`` that bring a bad file, with what is wrong.

    Only the entries a commit changes against its first parent are read (by
    id and mode): the rest of its tree is the parent's, already checked (or
    already stored). Each must be a file machine writes, at its place, a
    regular file, valid for its kind (incoming.py). A commit that says
    ``Machine-Redaction: off`` (an explicit --no-redact) may hold secrets;
    any other may not, in any file or in its message. ``progress`` counts
    the files checked, of all the commits' files.
    """
    bad: list[BadCommit] = []
    # The changes first (tree walks, cheap next to parsing and scanning
    # rows): then the files to check are known before the first is read.
    changes = [_changed_files(repo, repo[oid].peel(Commit)) for oid in ids]
    progress.begin("checking rows", sum(_rowlike(c[1]) for c in changes))
    for commit, changed, found in changes:
        scan = commit.message_trailers.get("Machine-Redaction") != "off"
        if scan:
            found.extend(_message_secrets(commit))
        for path, kind, old, new in changed:
            if kind in _ROWLIKE:
                progress.advance()
            data = _blob(repo, new)
            if data is None:
                found.append(Finding(path, 1, "$", "not a file (a link or submodule)"))
                continue
            found.extend(_file_problems(repo, commit, path, kind, data, old, scan))
        if found:
            bad.append((commit, found))
    progress.end()
    return bad


_ROWLIKE = ("row", "context")


def _rowlike(changed: list[incoming.Changed]) -> int:
    return sum(kind in _ROWLIKE for _, kind, _, _ in changed)


def _changed_files(
    repo: pygit2.Repository, commit: Commit
) -> tuple[Commit, list[incoming.Changed], list[Finding]]:
    """The files ``commit`` adds or changes, and the entries it may not have."""
    parent = commit.parents[0].tree if commit.parents else None
    problems: list[Finding] = []
    changed = list(incoming.changed_files(repo, parent, commit.tree, problems))
    return commit, changed, problems


def _file_problems(
    repo: pygit2.Repository,
    commit: Commit,
    path: str,
    kind: str,
    data: bytes,
    old: pygit2.Oid | None,
    scan: bool,
) -> list[Finding]:
    if kind in ("release", "signers"):
        # Verified by the release audit: each release file against its step,
        # allowed_signers (public keys, not JSON) by who signed its change.
        return []
    if kind in _ROWLIKE:
        problems = check_blob(path, data) or _reference(path, data, commit)
        if problems or not scan:
            return problems
        if kind == "context":
            return _record_secrets(path, {"context": jsonio.loads(data)})
        return check_secrets(path, data, _blob(repo, old))
    if kind == "signers":  # text lines, verified by the releases' trust check
        return check_file_secrets(path, data, _blob(repo, old)) if scan else []
    # Machine's other records: JSON objects (a JSON object a line for .jsonl).
    try:
        values = (
            [jsonio.loads(line) for line in data.splitlines() if line.strip()]
            if path.endswith(".jsonl")
            else [jsonio.loads(data)]
        )
    except (jsonio.JSONDecodeError, UnicodeDecodeError) as e:
        return [Finding(path, 1, "$", f"not valid JSON ({e})")]
    if not all(isinstance(v, dict) for v in values):
        return [Finding(path, 1, "$", f"not a {kind} (a JSON object)")]
    return check_file_secrets(path, data, _blob(repo, old)) if scan else []


def _record_secrets(path: str, value: dict[str, object]) -> list[Finding]:
    from machine_git.secrets import redaction  # the scanner loads only when files come

    kinds = redaction.leaks(value)
    if not kinds:
        return []
    return [Finding(path, 1, "$", f"holds an unredacted secret ({', '.join(kinds)})")]


def _checked(path: str) -> bool:
    return path.startswith(f"{rows.ROWS_DIR}/") or context.is_context_path(path)


def _reference(path: str, data: bytes, commit: Commit) -> list[Finding]:
    # A row must name a context its own commit's tree holds.
    if rows.id_of_path(path) is None:
        return []
    problem = context.reference_problem(
        jsonio.loads(data), lambda p: context.in_tree(commit.tree, p)
    )
    return [] if problem is None else [Finding(path, 1, "$.context", problem)]


MESSAGE = "(commit message)"


def _message_secrets(commit: Commit) -> list[Finding]:
    from machine_git.secrets import redaction

    kinds = redaction.message_leaks(commit.message or "")
    if not kinds:
        return []
    problem = f"holds an unredacted secret ({', '.join(kinds)})"
    return [Finding(MESSAGE, 1, "$", problem)]


def _blob(repo: pygit2.Repository, oid: pygit2.Oid | str | None) -> bytes | None:
    if oid is None:
        return None
    try:
        return repo[oid].peel(pygit2.Blob).data
    except (KeyError, ValueError, pygit2.GitError):
        return None


def report(bad: list[BadCommit]) -> list[str]:
    """``commit <id>: <summary>`` then its ``file:line: json-path: problem`` lines."""
    lines: list[str] = []
    for commit, findings in bad:
        summary = (commit.message or "").strip().splitlines()[:1] or [""]
        lines.append(f"commit {str(commit.id)[:12]}: {summary[0]}")
        lines.extend(str(f) for f in findings)
    return lines


def count(n: int, noun: str) -> str:
    """``1 row``, ``2 rows``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def invalid_rows(bad: list[BadCommit]) -> int:
    """How many rows, over all ``bad`` commits, had a problem."""
    return sum(
        validate.invalid_count([f for f in findings if _is_row(f.file)])
        for _, findings in bad
    )


def refused_files(bad: list[BadCommit]) -> int:
    """How many files other than rows, over all ``bad`` commits, were refused."""
    return sum(
        validate.invalid_count(
            [f for f in findings if f.file != MESSAGE and not _is_row(f.file)]
        )
        for _, findings in bad
    )


def _is_row(path: str) -> bool:
    # A context is part of its rows, and always counted with them.
    return path.startswith(f"{rows.ROWS_DIR}/") or context.is_context_path(path)


def rejected(bad: list[BadCommit]) -> str:
    """``1 invalid row`` / ``1 refused file`` / ``1 commit message with a secret``."""
    parts = []
    if rows_ := invalid_rows(bad):
        parts.append(count(rows_, "invalid row"))
    if files := refused_files(bad):
        parts.append(count(files, "refused file"))
    if messages := sum(f.file == MESSAGE for _, found in bad for f in found):
        parts.append(count(messages, "commit message") + " with a secret")
    return " and ".join(parts)


# -- the installed hooks ---------------------------------------------------------------


def pre_receive(
    git_dir: Path, updates: Iterable[str], audit: Audit | None = None
) -> int:
    """Refuse the push if it moves a ref in a way machine never does, or if a
    new object is too large or a new commit brings a bad file or release record.

    stdin: ``old new ref`` per updated ref. git has checked each object
    already (``receive.fsckObjects``); they wait in its quarantine. ``audit``
    checks release records (the hooks' entry point, machine_git/hooks.py,
    passes the releases layer's); without it a push that touches them is
    refused.
    """
    refs = [(p[0], p[1], p[2]) for p in (u.split() for u in updates) if len(p) == 3]
    if not refs:
        return 0
    repo = guard(pygit2.Repository(str(git_dir)))  # the store's objects may be damaged
    # The pushed objects wait in a quarantine folder that git names in the
    # environment; libgit2 ignores that environment, so add it by hand.
    quarantine = os.environ.get("GIT_QUARANTINE_PATH")
    if quarantine:
        repo.odb.add_disk_alternate(quarantine)
        sizes = incoming.size_problems(incoming.new_objects(quarantine))
        if sizes:
            return _refuse(sizes)
    moves = incoming.update_problems(repo, refs)
    if moves:
        # A rewrite of release history also says so in the release audit's words.
        return _refuse(moves) | _print(_rewritten(repo, refs))
    tips = [new for _, new, _ in refs if new != _ZERO]
    listed = _git(["rev-list", "--reverse", *tips, "--not", "--all"]) if tips else ""
    oids = [pygit2.Oid(hex=h) for h in listed.split()]
    bad = check_commits(repo, oids)
    if bad:
        for line in report(bad):
            print(line, file=sys.stderr)
        print(
            f"machine: push rejected: {rejected(bad)} in "
            f"{count(len(bad), 'commit')}; nothing was stored",
            file=sys.stderr,
        )
    refused = releases_refused(repo, refs, oids, audit) + signed_refused(
        repo, oids, audit
    )
    for line in refused:
        print(line, file=sys.stderr)
    return 1 if bad or refused else 0


def _print(lines: list[str]) -> int:
    for line in lines:
        print(line, file=sys.stderr)
    return 1 if lines else 0


def _refuse(problems: list[str]) -> int:
    for problem in problems:
        print(f"machine: push rejected: {problem}; nothing was stored", file=sys.stderr)
    return 1


# -- release records (machine_git/releases/audit.py) ----------------------------------


# Release records are checked by the releases layer, which sits above this
# one: whoever runs the hook passes its audit in (pushed commits -> each
# tampered commit with what is wrong with it).
Audit = Callable[
    [pygit2.Repository, list[Commit], Path], Sequence[tuple[Commit, Sequence[object]]]
]


def releases_refused(
    repo: pygit2.Repository,
    updates: list[tuple[str, str, str]],
    oids: list[pygit2.Oid],
    audit: Audit | None = None,
) -> list[str]:
    """Why the push may not change release records; empty if it may.

    A new commit may touch ``releases/`` only as one of machine's release
    steps, verified by content; and no forced push may drop history that
    holds release records. The release modules (and pydantic) are loaded
    only when a pushed commit touches ``releases/`` or claims a release step.
    """
    lines = _rewritten(repo, updates)
    commits = [repo[oid].peel(Commit) for oid in oids]
    if not any(touches_releases(c) for c in commits):
        return lines
    if audit is None:  # fail closed: nothing here can check release records
        return [*lines, "machine: release records were pushed and cannot be checked"]
    found = audit(repo, commits, Path(repo.path))
    for commit, tampered in found:
        summary = (commit.message or "").strip().splitlines()[:1] or [""]
        lines.append(f"commit {str(commit.id)[:12]}: {summary[0]}")
        lines.extend(str(t) for t in tampered)
    if found:
        lines.append(
            f"machine: push rejected: {count(len(found), 'commit')} "
            f"{'changes' if len(found) == 1 else 'change'} release records that "
            "only machine's release commands write; nothing was stored"
        )
    return lines


def signed_refused(
    repo: pygit2.Repository, oids: list[pygit2.Oid], audit: Audit | None = None
) -> list[str]:
    """Why the push may not change signed records; empty if it may.

    Run records, the student in ``settings.json`` and ``allowed_signers``
    change only in commits signed by an allowed signer (releases/trust.py).
    A push that touches ``releases/`` was audited whole, signatures included,
    by :func:`releases_refused`; this covers the pushes that do not.
    """
    commits = [repo[oid].peel(Commit) for oid in oids]
    if any(touches_releases(c) for c in commits):
        return []
    if not any(_touches_signed(c) for c in commits):
        return []
    if audit is None:  # fail closed, as releases_refused does
        return ["machine: signed records were pushed and cannot be checked"]
    found = audit(repo, commits, Path(repo.path))
    lines: list[str] = []
    for commit, tampered in found:
        summary = (commit.message or "").strip().splitlines()[:1] or [""]
        lines.append(f"commit {str(commit.id)[:12]}: {summary[0]}")
        lines.extend(str(t) for t in tampered)
    if found:
        lines.append(
            f"machine: push rejected: {count(len(found), 'commit')} "
            f"{'changes' if len(found) == 1 else 'change'} signed records "
            "(runs, the student, allowed signers) without an allowed signer's "
            "signature; nothing was stored"
        )
    return lines


_SIGNED = ("runs", "settings.json", "allowed_signers", "adopted.json")


def _touches_signed(commit: Commit) -> bool:
    def entries(c: Commit) -> list[pygit2.Oid | None]:
        out: list[pygit2.Oid | None] = []
        for name in _SIGNED:
            try:
                out.append(c.tree[name].id)
            except KeyError:
                out.append(None)
        return out

    mine = entries(commit)
    if not commit.parents:
        return any(e is not None for e in mine)
    return any(entries(p) != mine for p in commit.parents)


def _rewritten(
    repo: pygit2.Repository, updates: list[tuple[str, str, str]]
) -> list[str]:
    lines = []
    for old, new, ref in updates:
        if old == _ZERO or new == _ZERO:
            continue
        before = repo[old].peel(Commit)
        if repo.descendant_of(pygit2.Oid(hex=new), before.id):
            continue
        if _releases_tree(before) is not None:
            lines.append(
                f"machine: push rejected: {ref} would drop history holding release "
                f"records ({old[:12]} is not an ancestor of {new[:12]}); "
                "release history is append-only"
            )
    return lines


def touches_releases(commit: Commit) -> bool:
    """Does ``commit`` change ``releases/`` or claim a release step in a trailer?

    Cheap on purpose (one tree entry per parent, no blob read): the full audit
    runs only for the commits this picks out.
    """
    mine = _releases_tree(commit)
    if any(_releases_tree(p) != mine for p in commit.parents):
        return True
    if not commit.parents and mine is not None:
        return True
    return "Machine-Action: release-" in (commit.message or "")


def _releases_tree(commit: Commit) -> pygit2.Oid | None:
    try:
        return commit.tree["releases"].id
    except KeyError:
        return None


def post_receive(git_dir: Path) -> int:
    """Give what the push wrote the store's modes (git leaves objects 0400)."""
    fix_permissions(git_dir, since=time.time() - _RECEIVE_WINDOW)
    return 0


def pre_commit(git_dir: Path) -> int:
    """Refuse the commit if a staged row is bad (only staged paths are read)."""
    raw = _git(
        [
            *("diff", "--cached", "--raw", "-z", "--no-abbrev", "--no-renames"),
            "--diff-filter=AMT",
        ]
    )
    parts = raw.split("\0")
    repo = pygit2.Repository(str(git_dir))
    found: list[Finding] = []
    for meta, path in zip(parts[0::2], parts[1::2], strict=False):
        fields = meta.split()
        if len(fields) < 4:
            continue
        try:
            data = repo[fields[3]].peel(pygit2.Blob).data
        except (KeyError, ValueError, pygit2.GitError):
            if _checked(path):  # a submodule elsewhere is no row's business
                found.append(Finding(path, 1, "$", "not a file (a link or submodule)"))
            continue
        old = None if fields[2] == _ZERO else _blob(repo, fields[2])
        if not _checked(path):  # any other file: its secrets alone
            found.extend(check_file_secrets(path, data, old))
            continue
        problems = check_blob(path, data)
        if not problems:  # a hand edit may not bring a secret in
            problems = check_secrets(path, data, old)
        found.extend(problems)
    for finding in found:
        print(finding, file=sys.stderr)
    if found:
        bad = count(validate.invalid_count(found), "invalid staged row")
        print(f"machine: commit refused: {bad}", file=sys.stderr)
        return 1
    return 0


def _git(args: list[str]) -> str:
    # Inside a hook the environment (GIT_DIR, quarantine, GIT_INDEX_FILE) is
    # exactly the one to honour, so it is passed through untouched.
    done = subprocess.run(
        ["git", *args], capture_output=True, text=True, errors="replace", check=False
    )
    if done.returncode != 0:
        raise HookError(f"git {args[0]} failed: {done.stderr.strip()}")
    return done.stdout


# -- installing ------------------------------------------------------------------------


# git's own checks of what a push brings, before the pre-receive hook runs:
# each object (unsorted trees, duplicate entries, bad modes, '..' and '.git'
# names, .gitmodules), no deletion, no rewrite, no shallow history.
RECEIVE_CONFIG = {
    "receive.fsckObjects": "true",
    "receive.denyDeletes": "true",
    "receive.denyNonFastForwards": "true",
    "receive.shallowUpdate": "false",
}


def install_store_hooks(store_path: Path) -> list[str]:
    """Install ``pre-receive`` and ``post-receive`` in a store; the names changed.

    The store's git config gets :data:`RECEIVE_CONFIG` too.
    """
    changed = _install(store_path, STORE_HOOKS, hooks_path="hooks")
    old_umask = os.umask(0o077)  # the config file stays 0600
    try:
        config = pygit2.Repository(str(store_path)).config
        for key, value in RECEIVE_CONFIG.items():
            if _get(config, key) != value:
                config[key] = value
    except (OSError, pygit2.GitError) as e:
        raise HookError(f"cannot configure {store_path}: {e}") from None
    finally:
        os.umask(old_umask)
    return changed


def _get(config: pygit2.Config, key: str) -> str | None:
    try:
        return str(config[key])
    except KeyError:
        return None


def install_clone_hooks(git_dir: Path) -> list[str]:
    """Install ``pre-commit`` in a working clone's ``.git``; the names changed."""
    return _install(git_dir, CLONE_HOOKS, hooks_path=".git/hooks")


def render(name: str) -> bytes:
    """Hook ``name`` as installed: the template with this Python baked in."""
    try:
        template = bundled.read_bytes("hooks", name)
    except (OSError, ModuleNotFoundError) as e:
        raise HookError(f"hook {name!r} is missing from the install: {e}") from None
    return template.replace(b"@PYTHON@", shlex.quote(sys.executable).encode())


def _install(git_dir: Path, names: Sequence[str], hooks_path: str) -> list[str]:
    folder = git_dir / "hooks"
    changed: list[str] = []
    old_umask = os.umask(0o077)
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        # A core.hooksPath in the user's ~/.gitconfig would make git skip
        # these hooks; the repository's own setting wins. git resolves it
        # from the top of the work tree, or from the git dir when bare.
        config = pygit2.Repository(str(git_dir)).config
        try:
            current: str | None = config["core.hooksPath"]
        except KeyError:
            current = None
        if current != hooks_path:
            config["core.hooksPath"] = hooks_path
        for name in names:
            if _write_hook(folder / name, render(name)):
                changed.append(name)
    except (OSError, pygit2.GitError) as e:
        raise HookError(f"cannot install hooks in {folder}: {e}") from None
    finally:
        os.umask(old_umask)
    return changed


def _write_hook(target: Path, text: bytes) -> bool:
    try:
        current: bytes | None = target.read_bytes()
    except FileNotFoundError:
        current = None
    if current == text and stat.S_IMODE(target.stat().st_mode) == 0o700:
        return False
    if current is not None and _MARK not in current:
        raise HookError(
            f"{target} exists and was not written by machine; "
            "move it away, then run 'machine hooks install' again"
        )
    tmp = target.with_name(f".{target.name}.machine-tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o700)
    with os.fdopen(fd, "wb") as f:
        f.write(text)
    tmp.chmod(0o700)
    os.replace(tmp, target)  # a push never sees half a hook
    return True


def fix_permissions(git_dir: Path, since: float | None = None) -> int:
    """Folders 0700, files 0600, executable hooks 0700; how many modes changed.

    ``core.sharedRepository=0600`` keeps git's own writes private but leaves
    objects and packs read-only (0400). With ``since``, loose-object folders
    not modified since then are not even listed: they hold most of a store's
    files, and a file only lands in a folder by a write that bumps its mtime.
    """
    changed = 0
    hooks = git_dir / "hooks"
    objects = git_dir / "objects"
    for root, dirs, files in os.walk(git_dir):
        here = Path(root)
        with contextlib.suppress(FileNotFoundError):  # removed under us (git gc)
            changed += _set_mode(here, here.stat().st_mode, 0o700)
        if since is not None and here == objects:
            dirs[:] = [d for d in dirs if not _untouched(here / d, since)]
        for name in files:
            path = here / name
            with contextlib.suppress(FileNotFoundError):
                mode = path.lstat().st_mode
                if stat.S_ISLNK(mode):
                    continue
                want = 0o700 if here == hooks and mode & stat.S_IXUSR else 0o600
                changed += _set_mode(path, mode, want)
    return changed


def _untouched(folder: Path, since: float) -> bool:
    if not _FANOUT.match(folder.name):
        return False  # pack/, info/: few files, always checked
    try:
        return folder.stat().st_mtime < since
    except FileNotFoundError:
        return True


def _set_mode(path: Path, mode: int, want: int) -> int:
    if stat.S_IMODE(mode) == want:
        return 0
    path.chmod(want)
    return 1


# -- the pre-commit framework's hooks --------------------------------------------------


def validate_main(argv: Sequence[str] | None = None) -> int:
    """``machine-validate``: check JSONL files (and row files) against the schemas."""
    parser = argparse.ArgumentParser(prog="machine-validate")
    parser.add_argument("filenames", nargs="*", help="JSONL or JSON row files")
    args = parser.parse_args(argv)
    retval = 0
    for name in args.filenames:
        for finding in _validate_file(name):
            print(finding)
            retval = 1
    return retval


def _validate_file(name: str) -> list[Finding]:
    parts = Path(name).parts
    if len(parts) >= 4 and parts[-4] == rows.ROWS_DIR and name.endswith(".json"):
        # A row file of a clone: also its path and its byte form.
        try:
            data = Path(name).read_bytes()
        except OSError as e:
            return [Finding(name, 0, "$", f"cannot read: {e.strerror}")]
        found = check_blob("/".join(parts[-4:]), data)
        return [dataclasses.replace(f, file=name) for f in found]
    return list(validate.check_file(Path(name), validate.Tally()))


def secrets_main(argv: Sequence[str] | None = None) -> int:
    """``machine-secrets``: report credentials found in text files."""
    # Imported here: the scanner's patterns compile at import, and only this
    # hook needs them.
    from machine_git import secrets

    parser = argparse.ArgumentParser(prog="machine-secrets")
    parser.add_argument("filenames", nargs="*", help="text files to scan")
    parser.add_argument(
        "--version", action="store_true", help="the engine's version and rule count"
    )
    args = parser.parse_args(argv)
    if args.version:
        try:
            print(f"machine-secrets: {secrets.version()}")
        except MachineError as e:
            print(f"machine-secrets: {e}")
            return 1
        return 0
    retval = 0
    for name in args.filenames:
        try:
            data = Path(name).read_bytes()
        except OSError as e:
            print(f"{name}:0: cannot read: {e.strerror}")
            retval = 1
            continue
        if b"\0" in data[:8000]:
            continue  # not text: pre-commit's types filter should have left it out
        text = data.decode("utf-8", "surrogateescape")  # as scan_bytes reads it
        try:
            found = secrets.scan_bytes(data)
        except MachineError as e:
            print(f"{name}:0: the secret scanner failed: {e}")
            retval = 1
            continue
        for finding in found:
            line = text.count("\n", 0, finding.start) + 1
            print(f"{name}:{line}: secret of kind {finding.kind}")
            retval = 1
    return retval


# -- python -m machine_git.hooks <hook> (machine_git/hooks.py) ------------------------


def main(argv: Sequence[str] | None = None, audit: Audit | None = None) -> int:
    """Run one installed hook: ``pre-receive``, ``post-receive`` or ``pre-commit``."""
    args = list(sys.argv[1:] if argv is None else argv)
    name = args[0] if args else ""
    # git sets GIT_DIR for a store's hooks; a clone's hook runs at its top.
    git_dir = Path(
        os.environ.get("GIT_DIR") or pygit2.discover_repository(os.getcwd()) or "."
    )
    try:
        if name == "pre-receive":
            return pre_receive(git_dir, sys.stdin, audit)
        if name == "post-receive":
            return post_receive(git_dir)
        if name == "pre-commit":
            return pre_commit(git_dir)
    except MachineError as e:
        # Fail closed: a hook that cannot check lets nothing through.
        print(f"machine: {e}", file=sys.stderr)
        return 1
    print(
        "usage: python -m machine_git.hooks pre-receive|post-receive|pre-commit",
        file=sys.stderr,
    )
    return 2
