"""The exceptions machine raises. The CLI turns each into one line on stderr."""

from __future__ import annotations


class MachineError(Exception):
    """Base of every error machine reports to a user."""


# -- the store -------------------------------------------------------------


class StoreError(MachineError):
    """The store is missing, unreadable or damaged, or git refused a write."""


class ConcurrentUpdateError(StoreError):
    """Another process held the store's lock for too long."""


class ReadOnlyStoreError(StoreError):
    """The store cannot be written (permissions or a read-only filesystem)."""


class DiskFullError(StoreError):
    """The filesystem ran out of space while writing the store."""


class RowNotFoundError(MachineError):
    """No row has this id or id prefix."""


class AmbiguousIdError(MachineError):
    """An id prefix matches more than one row."""


class BadRevisionError(MachineError):
    """A revision does not name a commit of the store."""


# -- rows and schemas --------------------------------------------------------


class RowValidationError(MachineError):
    """A row does not match its JSON Schema."""


class SchemaError(MachineError):
    """A schema file that ships with machine is missing or broken."""


class SecretScanError(MachineError):
    """The secret scanner failed; nothing was written (fail closed)."""


# -- sessions ------------------------------------------------------------------


class SessionError(MachineError):
    """A session could not be found or read."""


class NoSessionError(SessionError):
    """No session exists for the project."""


class TurnError(SessionError):
    """The session holds no turn that can be tagged (errored, aborted, empty)."""


# -- user input ----------------------------------------------------------------


class UsageError(MachineError):
    """An argument is malformed: a bad id, name or path."""
