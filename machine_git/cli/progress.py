"""Progress bars for long commands: click's progressbar on stderr.

Only when stderr is a terminal and the command prints no JSON: a pipe, a
file or ``--json`` gets nothing at all (click would still print the label
once). Each stage of the work (machine_git/core/progress.py) is one bar: done /
total, percent, time left once it is known, and the rate. A bar is
transient: its line is cleared when the stage ends, so what stays on the
screen is the command's own output.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

import click

from machine_git.core.progress import QUIET
from machine_git.core.progress import Progress

_CLEAR = "\r\x1b[K\x1b[?25h"  # back to the start, clear the line, show the cursor
_EVERY = 0.1  # seconds between two drawings of a bar
_INFO = 44  # columns of "20000/20000  100%  00:00:12  12,345/s" and the gaps


def _width(label: str) -> int:
    """Columns for the bar itself, so the whole line fits the terminal."""
    try:
        columns = os.get_terminal_size(sys.stderr.fileno()).columns
    except OSError:
        columns = 80
    return max(10, min(40, (columns or 80) - len(label) - _INFO))


def _unsized() -> Iterator[int]:
    """An iterator click cannot take a length from."""
    yield from ()


def wanted(as_json: bool = False) -> bool:
    """True if progress should be shown: stderr is a terminal, and no --json."""
    return not as_json and sys.stderr.isatty()


class Bars:
    """:class:`~machine_git.core.progress.Progress` drawn with click's progressbar."""

    def __init__(self) -> None:
        self.bar: Any = None  # click's ProgressBar[int] of the current stage
        self.started = self.shown = 0.0
        self.pending = 0  # units done since the bar was last drawn

    def begin(self, label: str, total: int | None) -> None:
        self.end()
        self.started = self.shown = time.monotonic()
        self.pending = 0
        self.bar = click.progressbar(
            # No total: a count and a moving mark (an iterator with no length).
            _unsized() if total is None else None,
            length=total,
            label=label,
            file=sys.stderr,
            show_pos=True,
            show_percent=total is not None,
            show_eta=True,
            item_show_func=self._rate,
            width=_width(label),
        )
        self.bar.__enter__()

    def advance(self, count: int = 1) -> None:
        if self.bar is None:
            return
        # Drawn at most ten times a second: a line per row would cost more
        # than the row.
        self.pending += count
        now = time.monotonic()
        if now - self.shown >= _EVERY:
            self.shown = now
            self.bar.update(self.pending)
            self.pending = 0

    def end(self) -> None:
        if self.bar is None:
            return
        # Not the bar's own finish: that leaves the line and a newline behind.
        self.bar = None
        sys.stderr.write(_CLEAR)
        sys.stderr.flush()

    def _rate(self, _: object) -> str | None:
        elapsed = time.monotonic() - self.started
        if self.bar is None or elapsed < 0.5 or not self.bar.pos:
            return None
        return f"{self.bar.pos / elapsed:,.0f}/s"


@contextlib.contextmanager
def bars(as_json: bool = False) -> Iterator[Progress]:
    """Progress for a command: bars on a terminal, else nothing; always cleared."""
    if not wanted(as_json):
        yield QUIET
        return
    shown = Bars()
    try:
        yield shown
    finally:
        shown.end()  # an error or Ctrl-C mid-stage: its one line starts clean
