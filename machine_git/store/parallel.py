"""Reading a whole version in several processes (export, validate --store).

Reading every row is bound by zlib: libgit2 inflates one blob at a time, at
about 110 MB/s of rows on the benchmark machine, and Python's parsing and
rendering run on that same core (bench/RESULTS.md). So a whole-version read
splits ``rows/`` at its first fan-out level (``rows/ab``, up to 256 parts)
and hands the parts to worker processes, each with its own repository
handle. Results come back in tree order, so the output is byte for byte what
one process writes, and at most a few parts are in flight at a time, so
memory stays flat however large the store.

Small stores are read in the calling process: starting workers costs more
than it saves there. ``MACHINE_JOBS`` overrides the choice (1: never fork).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections import deque
from collections.abc import Callable
from collections.abc import Iterator
from concurrent.futures import Future
from typing import TypeVar

import pygit2

from machine_git.core import env
from machine_git.core.errors import StoreError
from machine_git.store.objects import CorruptObjectError
from machine_git.store.objects import Objects

JOBS_ENV = "MACHINE_JOBS"
MIN_ROWS = 4000  # below this a whole-store read takes well under a second
_MAX_JOBS = 8
_AHEAD = 3  # parts in flight per worker: enough to keep every worker busy

T = TypeVar("T")
# work(objects, path, oid, is_tree) -> result: one entry of rows/ and all below.
Work = Callable[[Objects, str, pygit2.Oid, bool], T]
Part = tuple[str, pygit2.Oid, bool]


def parts(top: pygit2.Tree, prefix: str) -> list[Part]:
    """The entries of ``top`` (the ``rows/`` tree) as units of work, in order."""
    return [(f"{prefix}{e.name}", e.id, e.type_str == "tree") for e in top]


def jobs(objects: Objects, pieces: list[Part]) -> int:
    """How many processes should read ``pieces``: 1 unless the store is large."""
    if env.text(JOBS_ENV) is not None:
        wanted = env.count(JOBS_ENV, 1)
        return min(wanted, _MAX_JOBS, max(1, len(pieces)))
    cores = _cores()
    if cores < 2 or _estimate_rows(objects, pieces) < MIN_ROWS:
        return 1
    return min(cores, _MAX_JOBS)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def _estimate_rows(objects: Objects, pieces: list[Part]) -> int:
    # Ids are random, so every rows/ab holds about as many rows as the first:
    # its rows/ab/cd leaves times the entries of one leaf.
    trees = [oid for _, oid, is_tree in pieces if is_tree]
    if not trees:
        return len(pieces)
    try:
        first = objects.tree(trees[0])
        leaves = [e for e in first if e.type_str == "tree"]
        per_leaf = len(objects.tree(leaves[0].id)) if leaves else 1
        return len(trees) * max(1, len(leaves)) * per_leaf
    except (KeyError, ValueError, OSError, pygit2.GitError, CorruptObjectError):
        return 0  # a damaged tree: read in this process, which reports it


def run(
    objects: Objects, pieces: list[Part], work: Work[T], workers: int
) -> Iterator[T]:
    """``work`` applied to every piece, results in the order of ``pieces``.

    ``work`` must be a module-level function (or a partial of one): with more
    than one worker it runs in another process. Exceptions it raises come
    back here; a worker that dies is a StoreError.
    """
    if workers <= 1:
        with bulk_reads():
            for path, oid, is_tree in pieces:
                yield work(objects, path, oid, is_tree)
        return
    yield from _run_pool(objects.repo.path, pieces, work, workers)


@contextlib.contextmanager
def bulk_reads() -> Iterator[None]:
    """Read objects without libgit2 hashing each one again.

    libgit2 re-hashes every object it reads (with collision-detecting SHA-1),
    which halves the read speed of a whole store: 57 against 109 MB/s of rows
    on the benchmark machine. git itself does not re-hash on reads either;
    zlib's checksum still catches damaged data, and ``validate --store``
    hashes every row itself (plain SHA-1, several times faster).
    """
    pygit2.settings.enable_strict_hash_verification(False)
    try:
        yield
    finally:
        pygit2.settings.enable_strict_hash_verification(True)  # libgit2's default


def _run_pool(
    path: str, pieces: list[Part], work: Work[T], workers: int
) -> Iterator[T]:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    # fork: the workers start with everything imported (spawn would import
    # pygit2 and machine again in each). macOS's system libraries are not
    # fork-safe, so elsewhere workers are spawned.
    method = "fork" if sys.platform.startswith("linux") else "spawn"
    pool = ProcessPoolExecutor(
        workers,
        mp_context=multiprocessing.get_context(method),
        initializer=_start_worker,
        initargs=(path,),
    )
    pending: deque[Future[T]] = deque()
    todo = iter(pieces)

    def submit(piece: Part) -> None:
        path, oid, is_tree = piece
        pending.append(pool.submit(_in_worker, work, path, str(oid), is_tree))

    try:
        for piece in todo:
            submit(piece)
            if len(pending) >= workers * _AHEAD:
                break
        while pending:
            try:
                result = pending.popleft().result()
            except _GitError as e:
                raise pygit2.GitError(str(e)) from None  # as one process raises it
            except BrokenProcessPool:
                raise StoreError(
                    "a process reading the store died (out of memory, or killed); "
                    f"nothing was finished: rerun, or set {JOBS_ENV}=1"
                ) from None
            piece_next = next(todo, None)
            if piece_next is not None:
                submit(piece_next)
            yield result
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


_objects: list[Objects] = []  # the worker's own repository handle, opened once


def _start_worker(path: str) -> None:
    # Ctrl-C reaches the whole process group; the parent stops the pool, and
    # workers must not each print a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    pygit2.settings.enable_strict_hash_verification(False)  # see bulk_reads()
    _objects.append(Objects(pygit2.Repository(path)))


class _GitError(Exception):
    """pygit2.GitError on its way back from a worker (it does not pickle)."""


def _in_worker(work: Work[T], path: str, oid: str, is_tree: bool) -> T:
    try:
        return work(_objects[0], path, pygit2.Oid(hex=oid), is_tree)
    except KeyError as e:  # a missing object (pygit2's NotFoundError is one)
        raise KeyError(*(str(a) for a in e.args)) from None
    except pygit2.GitError as e:
        raise _GitError(str(e)) from None
