"""The tag path: a turn of an agent's session becomes a row, then a commit.

:func:`tag` is ``machine good``, ``machine bad`` and ``machine observe``, top
to bottom, for every caller (the console script's fast path, the click
commands, a fork recording its run):

    session   sessions.detect.locate   which session file, of which agent
    turn      detect.Found.read        its last turn, as trajectory-v1 records
    row       rows.build               a train, traces, rejected or observed row
    redact    redaction.redact_row     secrets replaced before any byte is written
    validate  Store.write (outfile.append with --out): the schema, checked once
    commit    turns.commit             one commit: a tag, a label, a move, or none

It prints nothing: what happened comes back as data (:class:`Tagged`), with
the notices a caller may show (which session, skipped lines, what was
redacted, a new store), each also handed to ``notify`` as it happens, so a
command that then fails has said them first.

No click here, no dataclasses and no pydantic: this is the start-up path of
``machine good`` (bench/RESULTS.md).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Literal
from typing import NamedTuple

from machine_git.core import paths
from machine_git.core.paths import Project
from machine_git.core.plain import Plain
from machine_git.rows import rows
from machine_git.secrets import redaction
from machine_git.sessions import detect
from machine_git.store.store import Redaction
from machine_git.store.store import Store
from machine_git.tagging import outfile
from machine_git.tagging import turns

if TYPE_CHECKING:
    from machine_git.rows.rowtypes import Row

Label = Literal["good", "bad", "observed"]
Action = Literal["tag", "label", "move", "duplicate", "observed", "out", "off"]


class TagOptions(NamedTuple):
    """What to tag, and how (the options of ``good``, ``bad`` and ``observe``)."""

    label: Label
    note: str | None = None
    rewrite: str | None = None
    """The answer to keep instead of the agent's (``--as``)."""
    trace: bool = False
    """Keep the whole turn as trajectory records (observed rows always do)."""
    reasoning: bool = False
    out: str | None = None
    """Append the row to this JSONL file instead of the store."""
    host: str = detect.AUTO
    session: Path | None = None
    entry: str | None = None
    redact: bool = True
    context: bool = True
    """Keep the system prompt and tools the turn ran with (``--no-context``)."""
    images: bool = True
    """Keep the turn's images (``--no-images``: the ``[image]`` text alone)."""
    parent: str | None = None
    """Observed: the row a forked run corrects (default: MACHINE_FORK_PARENT)."""
    if_auto: bool = False
    """Observed: record only if the project has auto-capture on."""


# -- notices ------------------------------------------------------------------------


class SessionUsed(Plain):
    """The session ``--host auto`` chose, when it is worth saying."""

    __slots__ = ("host", "path")

    def __init__(self, host: str, path: Path) -> None:
        self.host = host
        self.path = path

    def __str__(self) -> str:
        return f"using {self.host} session {self.path}"


class Skipped(Plain):
    """Lines of the session the reader skipped (corrupt, of unknown type)."""

    __slots__ = ("what",)

    def __init__(self, what: str) -> None:
        self.what = what

    def __str__(self) -> str:
        return f"warning: {self.what}"


class Redacted(Plain):
    """The secrets replaced in the row: how many of each kind."""

    __slots__ = ("found",)

    def __init__(self, found: dict[str, int]) -> None:
        self.found = found

    def __str__(self) -> str:
        return f"redacted {redaction.describe(self.found)}"


class NewStore(Plain):
    """A store made for a folder outside git (each folder would get its own)."""

    __slots__ = ("line", "project")

    def __init__(self, project: Path, line: str) -> None:
        self.project = project
        self.line = line

    def __str__(self) -> str:
        return self.line


Notice = SessionUsed | Skipped | Redacted | NewStore
"""Something a tag says besides its result; ``str()`` is the line to show."""


# -- the result ---------------------------------------------------------------------


class Tagged(Plain):
    """What a tag did.

    ``action``: ``tag``, ``label``, ``move``, ``duplicate`` and ``observed``
    as turns.Committed says; ``out`` (appended to ``out``, no store); ``off``
    (``if_auto`` and auto-capture is off: nothing read, ``row`` None).
    """

    __slots__ = (
        "action",
        "also",
        "commit",
        "notices",
        "out",
        "previous_kind",
        "row",
        "store",
    )

    def __init__(
        self,
        action: Action,
        row: Row | None,
        notices: list[Notice],
        *,
        committed: turns.Committed | None = None,
        store: Path | None = None,
        out: Path | None = None,
    ) -> None:
        self.action = action
        self.row = row
        self.notices = notices
        self.previous_kind = None if committed is None else committed.previous_kind
        self.commit = None if committed is None else committed.commit
        self.also: list[turns.Moved] = [] if committed is None else committed.also
        self.store = store
        self.out = out


# -- the path -----------------------------------------------------------------------


def tag(
    project: Project,
    options: TagOptions,
    notify: Callable[[Notice], None] | None = None,
) -> Tagged:
    """Tag (or observe) the turn ``options`` name, in ``project``'s store."""
    notices: list[Notice] = []

    def say(notice: Notice) -> None:
        notices.append(notice)
        if notify is not None:
            notify(notice)

    if options.if_auto and not _auto_on(project):
        return Tagged("off", None, notices)
    rows.check_answer(options.rewrite)
    found = detect.locate(project.root, options.host, options.session)
    if found.announce:
        say(SessionUsed(found.host, found.path))
    turn, report = found.read(options.entry)
    if (skipped := report.warning()) is not None:
        say(Skipped(skipped))
    row = rows.build(
        turn,
        label=options.label,
        trace=options.trace,
        note=options.note,
        rewrite=options.rewrite,
        reasoning=options.reasoning,
        parent=_parent(options),
        context=options.context,
    )
    if not options.images:
        from machine_git.rows import images

        row = images.without(row)
    if options.redact:
        row, secrets = redaction.redact_row(row)
        if secrets:
            say(Redacted(secrets))
    if options.out is not None:
        target = paths.check_out_path(options.out, devices=True)
        if options.images:
            from machine_git.rows import images

            row = images.cleaned(row)  # stripped here too: a file is shared
        outfile.append(target, row)
        return Tagged("out", row, notices, out=target)
    store = Store.create(project.store_path, project.root)
    line = paths.new_store_notice(project.root, project.chosen, store.created)
    if line is not None:
        say(NewStore(project.root, line))
    mode = Redaction.SCANNED if options.redact else Redaction.OFF
    done = turns.commit(store, row, mode)
    return Tagged(done.action, done.row, notices, committed=done, store=store.path)


def _auto_on(project: Project) -> bool:
    from machine_git.tagging import capture  # only machine observe --if-auto asks

    return capture.auto_on(project.store_path)


def _parent(options: TagOptions) -> str | None:
    if options.label != "observed" or options.parent is not None:
        return options.parent
    from machine_git.tagging import capture

    return capture.parent_from_env()
