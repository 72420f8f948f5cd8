"""How long work reports how far it has got, without knowing who shows it.

A library function that takes a while (an import, an export, checking a
whole store, packing) takes a :class:`Progress` and reports stages: ``begin``
with a label and the total, ``advance`` as units get done, ``end``. The
command line shows them as bars on stderr when it is a terminal
(machine_git/cli/progress.py); everyone else passes nothing and gets
:data:`QUIET`. No library module imports click for it.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Iterator
from typing import Protocol
from typing import TypeVar

T = TypeVar("T")


class Progress(Protocol):
    """Where long work reports its stages."""

    def begin(self, label: str, total: int | None) -> None:
        """A stage starts: ``total`` units (None: not known)."""

    def advance(self, count: int = 1) -> None:
        """``count`` more units of the current stage are done."""

    def end(self) -> None:
        """The current stage is over."""


class _Quiet:
    """Progress that nobody shows."""

    def begin(self, label: str, total: int | None) -> None:
        pass

    def advance(self, count: int = 1) -> None:
        pass

    def end(self) -> None:
        pass


QUIET: Progress = _Quiet()


def track(
    items: Iterable[T], progress: Progress, label: str, total: int | None
) -> Iterator[T]:
    """``items``, one at a time, as one stage of ``progress``."""
    progress.begin(label, total)
    for item in items:
        yield item
        progress.advance()
    progress.end()
