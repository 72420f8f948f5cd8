"""The exceptions machine raises. The CLI turns each into one line on stderr.

Each class carries the exit code the command ends with; :data:`EXIT_CODES` is
the one table of them (docs/reference.md lists the same). Scripts can
tell "no such row" from "the store is damaged" from "the disk is full"
without reading the message.
"""

from __future__ import annotations

from typing import ClassVar

# Exit codes, by meaning. 2 is click's own code for a usage error, and 130 is
# the shell's for an interrupt (128 + SIGINT).
OK = 0
FAILED = 1  # a MachineError with no more specific meaning
USAGE = 2  # a malformed argument, option, id, name, path or variable
NOT_FOUND = 3  # no such row, revision, run, release, session or store
INVALID = 4  # data that does not pass: a row, a session, a secret left in
CONFLICT = 5  # another writer, a diverged remote, two versions of one row
DAMAGED = 6  # the store's objects or refs are damaged
IO = 7  # a file or the store cannot be written: disk full, permissions
REMOTE = 8  # a git remote is unreachable, refused, or sent bad data
SERVICE = 9  # the Tinker service: no key, unreachable, slow, an HTTP error
INTERRUPTED = 130


class MachineError(Exception):
    """Base of every error machine reports to a user."""

    exit_code: ClassVar[int] = FAILED


# -- the store -------------------------------------------------------------


class StoreError(MachineError):
    """The store is missing, unreadable or damaged, or git refused a write."""


# Where every message about damage points: the dry run of `machine recover`
# names the newest intact commit and what going back to it loses.
RECOVER_HINT = "'machine recover' shows the way back"


class NoStoreError(StoreError):
    """The project has no store yet (nothing was ever tagged or imported)."""

    exit_code: ClassVar[int] = NOT_FOUND


class DamagedStoreError(StoreError):
    """The store's objects, refs or head commit are damaged (not merely empty)."""

    exit_code: ClassVar[int] = DAMAGED


class ConcurrentUpdateError(StoreError):
    """Another process held the store's lock for too long."""

    exit_code: ClassVar[int] = CONFLICT


class ReadOnlyStoreError(StoreError):
    """The store cannot be written (permissions or a read-only filesystem)."""

    exit_code: ClassVar[int] = IO


class DiskFullError(StoreError):
    """The filesystem ran out of space while writing the store."""

    exit_code: ClassVar[int] = IO


class NotFoundError(MachineError):
    """Something named by the user (a run, a release, a file) does not exist."""

    exit_code: ClassVar[int] = NOT_FOUND


class RowNotFoundError(MachineError):
    """No row has this id or id prefix."""

    exit_code: ClassVar[int] = NOT_FOUND


class AmbiguousIdError(MachineError):
    """An id prefix matches more than one row."""

    exit_code: ClassVar[int] = USAGE


class BadRevisionError(MachineError):
    """A revision does not name a commit of the store."""

    exit_code: ClassVar[int] = NOT_FOUND


# -- rows and schemas --------------------------------------------------------


class RowValidationError(MachineError):
    """A row does not match its JSON Schema."""

    exit_code: ClassVar[int] = INVALID


class RecordError(MachineError):
    """A record machine wrote and reads back (``settings.json``) does not match
    its model; the message names the field."""

    exit_code: ClassVar[int] = INVALID


class SchemaError(MachineError):
    """A schema file that ships with machine is missing or broken."""


class SecretScanError(MachineError):
    """The secret scanner failed; nothing was written (fail closed)."""


class SecretFoundError(MachineError):
    """A row about to be written still holds a secret; nothing was written."""

    exit_code: ClassVar[int] = INVALID


# -- sessions ------------------------------------------------------------------


class SessionError(MachineError):
    """A session could not be found or read."""

    exit_code: ClassVar[int] = INVALID


class NoSessionError(SessionError):
    """No session exists for the project."""

    exit_code: ClassVar[int] = NOT_FOUND


class TurnError(SessionError):
    """The session holds no turn that can be tagged (errored, aborted, empty)."""

    exit_code: ClassVar[int] = INVALID


# -- user input ----------------------------------------------------------------


class UsageError(MachineError):
    """An argument is malformed: a bad id, name or path."""

    exit_code: ClassVar[int] = USAGE


class FileWriteError(MachineError):
    """A file outside the store (``--out``, ``export -o``) cannot be written.

    An I/O failure, not a usage error: a full disk or a read-only folder.
    """

    exit_code: ClassVar[int] = IO


class ConflictError(MachineError):
    """Two versions of one thing disagree (a row edited on both sides, a version
    name on two commits); nothing was changed."""

    exit_code: ClassVar[int] = CONFLICT


# -- import ----------------------------------------------------------------------


class ImportProblemsError(MachineError):
    """Lines of an import file are invalid; nothing was imported.

    ``str()`` is the one-line summary; ``problems`` holds one
    ``file:line: json-path: problem`` line per problem, for the CLI to print.
    """

    exit_code: ClassVar[int] = INVALID

    def __init__(self, file: str, problems: list[str], bad_lines: int) -> None:
        self.problems = problems
        noun = "line" if bad_lines == 1 else "lines"
        super().__init__(f"{file}: {bad_lines} bad {noun}; nothing imported")


class ImportConflictError(MachineError):
    """Rows of an import file are stored with different content; nothing imported."""

    exit_code: ClassVar[int] = CONFLICT

    def __init__(self, file: str, ids: list[str]) -> None:
        self.ids = ids
        shown = ", ".join(ids[:10]) + (", ..." if len(ids) > 10 else "")
        noun = "row is" if len(ids) == 1 else "rows are"
        super().__init__(
            f"{file}: {len(ids)} {noun} already in the store with different "
            f"content ({shown}); nothing imported"
        )


# -- sharing and hooks -----------------------------------------------------------


class RemoteError(MachineError):
    """A remote is unknown or unreachable, refused a push, or sent invalid rows.

    ``str()`` is the one-line summary; ``details`` holds the lines worth
    showing above it (the remote hook's ``file:line`` findings), if any.
    """

    exit_code: ClassVar[int] = REMOTE

    def __init__(self, message: str, details: list[str] | None = None) -> None:
        super().__init__(message)
        self.details = details or []


class HookError(MachineError):
    """A git hook could not be installed, or a clone could not be made."""


# -- agents and the student --------------------------------------------------------


class InstallError(MachineError):
    """An agent extension or mod could not be installed or removed."""


class StudentError(MachineError):
    """The student model is not set, or names no model that can be sampled."""


class StudentServiceError(StudentError):
    """The student cannot be asked: no Tinker key, Tinker unreachable, a
    refused request or an answer that does not read."""

    exit_code: ClassVar[int] = SERVICE


# -- training on Tinker ------------------------------------------------------------


class TrainingError(MachineError):
    """A training command cannot go on: bad data, zero steps, a run's state."""


class TrainingStackMissingError(TrainingError):
    """The optional training stack (tinker, tinker-cookbook, torch) is missing."""


class RunNotFoundError(TrainingError):
    """No training run has this id or id prefix (or none made a checkpoint)."""

    exit_code: ClassVar[int] = NOT_FOUND


class AmbiguousRunError(TrainingError):
    """A run id prefix matches more than one run."""

    exit_code: ClassVar[int] = USAGE


class TinkerServiceError(TrainingError):
    """Tinker cannot be used: no key, unreachable, slow, or a call failed."""

    exit_code: ClassVar[int] = SERVICE


class ReleaseError(MachineError):
    """A behavior release cannot be preregistered, checked, tried or activated."""


class ReleaseRecordError(ReleaseError):
    """A release record or gates file does not match its model (names the field)."""

    exit_code: ClassVar[int] = INVALID


class TamperedReleaseError(ReleaseError):
    """A release's records were changed outside machine's release commands."""

    exit_code: ClassVar[int] = INVALID


class SigningError(MachineError):
    """A record cannot be signed: no ssh-keygen, no key, or a key not allowed."""


class UntrustedSignerError(SigningError):
    """This user's signing key is not one of the store's allowed signers."""

    exit_code: ClassVar[int] = INVALID


# -- machine review --------------------------------------------------------------


class ReviewStackMissingError(MachineError):
    """The optional web stack of ``machine review`` (starlette, jinja2, uvicorn)
    is not installed."""


# Every class above, for docs/reference.md's table and tests/core/test_errors.py.
def exit_codes() -> dict[str, int]:
    """Each error class's name and exit code, base classes first."""
    found: dict[str, int] = {}
    pending: list[type[MachineError]] = [MachineError]
    while pending:
        cls = pending.pop(0)
        found[cls.__name__] = cls.exit_code
        pending.extend(cls.__subclasses__())
    return found


def user_message(e: Exception) -> str | None:
    """The one line a user sees for ``e``, or None if ``e`` is a bug.

    Both entry points (the click group and the console script's fast path for
    good/bad) print ``Error: <this>`` and exit with :func:`exit_code`.
    """
    if isinstance(e, MachineError):
        return str(e)
    return store_read_error(e)


def exit_code(e: Exception) -> int:
    """The exit code for an error :func:`user_message` describes."""
    if isinstance(e, MachineError):
        return e.exit_code
    return DAMAGED  # the only other errors users see are damaged reads


class CorruptObjectError(Exception):
    """An object whose bytes are not the object its id names (store/objects.py).

    Not a MachineError: it is caught where a read fails and told as damage.
    """


def store_read_error(e: Exception) -> str | None:
    """The one line for a failed read of a damaged store, or None.

    Reads fail inside libgit2 wherever they happen (a flipped byte in a pack,
    a missing object); writes turn such failures into StoreErrors themselves.
    """
    import pygit2  # loaded already by whatever raised

    why: str | None = None
    # pygit2 raises KeyError(object id) for a missing object. A KeyError whose
    # key is a full object id comes from there, not from a bug in a dict lookup.
    if isinstance(e, KeyError) and len(e.args) == 1:
        key = str(e.args[0])
        if len(key) == 40 and all(c in "0123456789abcdef" for c in key):
            why = f"object {key} is missing"
    if why is None and isinstance(e, pygit2.GitError | CorruptObjectError):
        why = str(e)
    if why is None:
        return None
    return f"cannot read the store: {why} ({RECOVER_HINT})"
