"""Files a user names as input: read only if regular, never past a size limit.

A session file (``--session``), a JSONL file (``import``, ``validate``) or a
gates file can be any path. A FIFO would block the read until someone writes
to it, ``/dev/zero`` would fill memory until the process is killed, and a
folder or a socket fails with an unhelpful message. Every such file is opened
without blocking (``O_NONBLOCK``), checked to be a regular file on the open
descriptor (no race with a swap of the path), and read up to a limit that the
error names. A UTF-8 byte-order mark at the start of a text file is dropped.

Standard input (``-`` for ``import`` and ``validate``) is read the same way:
up to the same limit, a byte-order mark dropped, and refused at once when it
is a terminal, where a read would wait for someone to type the rows.

Light on purpose: the session readers of ``machine good`` load this module.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

MIB = 1024 * 1024
SESSION_LIMIT = 512 * MIB  # a long agent session with big tool outputs fits
JSONL_LIMIT = 1024 * MIB  # about 250,000 rows of 4 KB
BOM = b"\xef\xbb\xbf"
STDIN = "-"  # how a user names standard input
STDIN_NAME = "<stdin>"  # how findings and commits name it
_CHUNK = 64 * 1024
_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class Unreadable(Exception):
    """Why a named file cannot be read (the message does not repeat the path)."""

    def __init__(self, why: str, *, missing: bool = False, folder: bool = False):
        super().__init__(why)
        self.missing = missing
        self.folder = folder


def open_regular(path: Path) -> BinaryIO:
    """``path`` opened for reading if it is a regular file; Unreadable if not."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise Unreadable("No such file or directory", missing=True) from None
    except OSError as e:
        raise Unreadable(e.strerror or str(e)) from None
    except ValueError:  # a NUL byte in the path
        raise Unreadable("not a valid path") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise Unreadable("is a folder", folder=True)
        if not stat.S_ISREG(mode):
            raise Unreadable(f"not a regular file ({kind_of(mode)})")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def kind_of(mode: int) -> str:
    """``a FIFO``, ``a character device``...: what a file that is not regular is."""
    return next((name for test, name in _KINDS if test(mode)), "not a file")


def read(path: Path, limit: int) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them."""
    with open_regular(path) as f:
        try:
            size = os.fstat(f.fileno()).st_size
            if size > limit:
                raise Unreadable(too_big(size, limit))
            chunks: list[bytes] = []
            total = 0
            want = size + 1  # one byte more shows a file still growing
            while chunk := f.read(max(want - total, _CHUNK)):
                chunks.append(chunk)
                total += len(chunk)
                if total > limit:
                    raise Unreadable(too_big(total, limit, growing=True))
        except OSError as e:
            raise Unreadable(e.strerror or str(e)) from None
    data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    return data[len(BOM) :] if data.startswith(BOM) else data


def read_stream(stream: BinaryIO, limit: int) -> bytes:
    """The bytes of ``stream`` (standard input) up to EOF, at most ``limit``."""
    if stream.isatty():
        raise Unreadable(
            "standard input is a terminal; pipe the rows in (... - < FILE)"
        )
    chunks: list[bytes] = []
    total = 0
    try:
        while chunk := stream.read(_CHUNK):
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise Unreadable(
                    f"more than the {_size(limit)} machine reads from one input"
                )
    except OSError as e:
        raise Unreadable(e.strerror or str(e)) from None
    data = b"".join(chunks)
    return data[len(BOM) :] if data.startswith(BOM) else data


def too_big(size: int, limit: int, growing: bool = False) -> str:
    """``700 MiB, more than the 512 MiB machine reads from one file``."""
    shown = f"more than {_size(limit)}" if growing else _size(size)
    return f"{shown}, more than the {_size(limit)} machine reads from one file"


def size_text(n: int) -> str:
    """``512 MiB`` or ``100 bytes``: a limit as messages say it."""
    return _size(n)


def _size(n: int) -> str:
    return f"{n / MIB:.0f} MiB" if n >= MIB else f"{n} bytes"


def numbered_lines(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(line number from 1, line) for every line of ``data`` that is not blank."""
    for number, text in enumerate(data.split(b"\n"), start=1):
        if text.strip():
            yield number, text
