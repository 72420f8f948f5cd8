"""Building trajectory-v1 records: the conventions every session reader shares.

Each host's reader decodes its own rows and calls a :class:`Records` builder,
so the rules below hold whatever agent wrote the session:

- consecutive tool calls of one model response share one ``assistant`` record
  (``content: null``); text, reasoning, a result or a new response ends the group;
- a tool result pairs with its call by id, then by tool name, then (when the
  result names no call at all) with the nearest unanswered call; a result that
  pairs with nothing is dropped and reported;
- a failed result gets ``ok: false`` and its content prefixed ``Error: ``
  (unless it already starts with "error", as agent-trajectory does); ``ok`` is
  present only when the source states a status;
- images become the placeholder ``[image]`` in the text, and a user or tool
  record lists them inline under ``images`` (rows/images.py stores them);
  empty text is never a record;
- a turn that stopped on an error or was aborted ended that way unless an
  answer in words came after (:meth:`Records.stopped`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any
from typing import Generic
from typing import NamedTuple
from typing import TypeVar

from machine_git.core.errors import TurnError
from machine_git.sessions import ReadReport
from machine_git.sessions import Turn
from machine_git.sessions import files
from machine_git.sessions.values import EPOCH
from machine_git.sessions.values import args_text
from machine_git.sessions.values import error_text
from machine_git.sessions.values import iso

if TYPE_CHECKING:
    from machine_git.rows.rowtypes import Image
    from machine_git.rows.rowtypes import MetaRecord
    from machine_git.rows.rowtypes import Record
    from machine_git.rows.rowtypes import RecordToolCall
    from machine_git.rows.rowtypes import ToolRecord
    from machine_git.rows.rowtypes import UserRecord

if TYPE_CHECKING:
    from machine_git.rows.context import Context

T = TypeVar("T")


class Records:
    """Trajectory-v1 records of one turn, in order, with tool results paired."""

    def __init__(self, fallback: str = EPOCH) -> None:
        self.fallback = fallback
        self.records: list[Record] = []
        self.dropped: list[str] = []
        self.open_calls: list[tuple[str, str]] = []  # (id, name), unanswered
        self._calls: list[RecordToolCall] = []
        self._calls_stamp = fallback
        # ("error" or "aborted", why): how the turn ended, if not by an answer.
        self.ending: tuple[str, str | None] | None = None

    def stamp(self, *values: Any) -> str:
        """The first value that is a valid timestamp, else the fallback."""
        for value in values:
            found = iso(value)
            if found is not None:
                return found
        return self.fallback

    def moment(self, *values: Any) -> str:
        """:meth:`stamp`, which also becomes the fallback of the entries after it."""
        self.fallback = self.stamp(*values)
        return self.fallback

    def user(self, text: str, stamp: str, images: list[Image] | None = None) -> None:
        self.end_calls()
        record: UserRecord = {"role": "user", "content": text, "timestamp": stamp}
        if images:
            record["images"] = images
        self.records.append(record)

    def reasoning(self, text: str, stamp: str) -> None:
        self.end_calls()
        if text.strip():
            self.records.append(
                {"role": "reasoning", "content": text, "timestamp": stamp}
            )

    def say(self, text: str, stamp: str) -> None:
        """An assistant message in words (nothing if it is blank)."""
        self.end_calls()
        if text.strip():
            self.records.append(
                {"role": "assistant", "content": text, "timestamp": stamp}
            )
            self.ending = None  # an answer after an error: the turn went on

    def stopped(self, how: str, why: str | None) -> None:
        """The turn stopped (``error`` or ``aborted``), unless an answer follows."""
        self.ending = (how, why)

    def call(
        self, call_id: Any, name: Any, args: Any, stamp: str, where: str
    ) -> str | None:
        """Add a tool call to the current group; its id, or None if unusable."""
        if (
            not isinstance(call_id, str)
            or not call_id
            or not isinstance(name, str)
            or not name
        ):
            self.dropped.append(f"tool call without id or name ({where})")
            return None
        if not self._calls:
            self._calls_stamp = stamp
        self._calls.append({"id": call_id, "name": name, "args": args_text(args)})
        self.open_calls.append((call_id, name))
        return call_id

    def end_calls(self) -> None:
        """Close the current group of tool calls (one model response)."""
        if self._calls:
            self.records.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": list(self._calls),
                    "timestamp": self._calls_stamp,
                }
            )
            self._calls.clear()

    def result(
        self,
        call_id: Any,
        name: Any,
        text: str,
        failed: bool | None,
        stamp: str,
        where: str,
        images: list[Image] | None = None,
    ) -> bool:
        """Add a tool result; False (and reported) if it answers no open call."""
        self.end_calls()
        match = self._match(call_id, name)
        if match is None:
            self.dropped.append(f"tool result with no matching call ({where})")
            return False
        paired, _ = self.open_calls.pop(match)
        record: ToolRecord = {
            "role": "tool",
            "tool_call_id": paired,
            "content": error_text(text) if failed else text,
            "timestamp": stamp,
        }
        if failed is not None:
            record["ok"] = not failed
        if images:
            record["images"] = images
        self.records.append(record)
        return True

    def finish(
        self,
        report: ReadReport,
        *,
        host: str,
        source: str,
        path: Path,
        session_id: str,
        entry_ids: list[str],
        leaf_id: str | None,
        cwd: str | None = None,
        model: str | None = None,
        branch: str | None = None,
        provider: str | None = None,
        stop_reason: str | None = None,
        error: str | None = None,
        context: Context | None = None,
    ) -> tuple[Turn, ReadReport]:
        """The Turn of these records, led by its ``meta`` record.

        The last group of calls is closed and what was dropped is reported. A
        turn that :meth:`stopped` reports how, in place of ``stop_reason`` and
        ``error``.
        """
        self.end_calls()
        report.dropped.extend(self.dropped)
        if self.ending is not None:
            stop_reason, error = self.ending
        turn = Turn(
            host=host,
            session_id=session_id,
            session_file=str(path),
            records=[meta(source, cwd, model, branch), *self.records],
            entry_ids=entry_ids,
            leaf_id=leaf_id,
            model=model,
            provider=provider,
            cwd=cwd,
            git_branch=branch,
            stop_reason=stop_reason,
            error=error,
            dropped=self.dropped,
            context=context,
        )
        return turn, report

    def _match(self, call_id: Any, name: Any) -> int | None:
        # Nearest unanswered call first: ids are not promised unique per session.
        for field, wanted in ((0, call_id), (1, name)):
            if not isinstance(wanted, str) or not wanted:
                continue
            for index in range(len(self.open_calls) - 1, -1, -1):
                if self.open_calls[index][field] == wanted:
                    return index
        if not (isinstance(call_id, str) and call_id) and self.open_calls:
            return len(self.open_calls) - 1
        return None


class Window(NamedTuple, Generic[T]):
    """A session's entries up to the turn's end, and where the turn starts."""

    items: list[T]
    ids: list[str]
    texts: list[str]
    """What the user typed in each entry ("" where it is not the user speaking)."""
    start: int
    """The turn's first entry: the last one the user typed in."""


def window(
    items: list[T],
    ids: list[str],
    entry: str | None,
    path: Path,
    user: Callable[[T], str],
) -> Window[T]:
    """The entries of a session in order up to ``entry`` (all if None), ``ids``
    naming each, with the turn that ends there: from the last user message."""
    end = files.entries_until(ids, entry, path)
    items, ids = items[:end], ids[:end]
    texts = [user(item) for item in items]
    for start in range(len(texts) - 1, -1, -1):
        if texts[start]:
            return Window(items, ids, texts, start)
    raise TurnError(f"{path}: no user message in this session")


def meta(
    source: str, cwd: str | None, model: str | None, branch: str | None
) -> MetaRecord:
    """The ``meta`` record: keys only for what is known."""
    record: MetaRecord = {"role": "meta", "source": source}
    if cwd:
        record["cwd"] = cwd
    if branch:
        record["git_branch"] = branch
    if model:
        record["model"] = model
    return record
