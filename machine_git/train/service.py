"""The one place machine constructs a Tinker client, and bounds its calls.

Everything that talks to Tinker (the preflight, the training loop, eval
sampling) gets its client from :func:`service_client` and uses only the SDK's
public surface on it. Tests replace that function with an in-process fake;
the code around it stays the code that runs against the real service. A test
that runs machine as its own process (to kill it) cannot patch it, so
``MACHINE_TEST_TINKER=module:callable`` makes this function call that instead:
the narrowest seam that crosses a process boundary, read only here and set
only by tests.

The SDK retries an unresponsive service for five minutes per request, and
``.result(timeout=...)`` does not bound that (tinker.md §2.6). So every call
goes through :func:`bounded`: it runs in a daemon thread that we stop waiting
for after ``MACHINE_TINKER_TIMEOUT`` seconds. Calls that are safe to repeat
are retried, and each retry is counted and reported.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import Any
from typing import TypeVar

from machine_git.core import env
from machine_git.core.errors import TinkerServiceError

TIMEOUT_ENV = "MACHINE_TINKER_TIMEOUT"
TEST_ENV = "MACHINE_TEST_TINKER"
DEFAULT_TIMEOUT = 20.0
T = TypeVar("T")

# HTTP statuses the SDK raises, named the way a user can act on them.
_STATUS = {
    400: "bad request",
    401: "the API key was refused",
    402: "billing: the account cannot pay for this",
    403: "permission denied",
    404: "not found",
    409: "conflict",
    422: "the request was not accepted",
    429: "rate limited",
}


def service_client(**kwargs: Any) -> Any:
    """A ``tinker.ServiceClient`` (lazy: constructing it makes no request).

    The SDK's telemetry (which posts usage and failures to Tinker) stays off
    unless the user turned it on by setting ``TINKER_TELEMETRY`` themselves.
    """
    os.environ.setdefault("TINKER_TELEMETRY", "0")
    stand_in = env.text(TEST_ENV)
    if stand_in is not None:
        return _stand_in(stand_in)(**kwargs)
    import tinker

    return tinker.ServiceClient(**kwargs)


def _stand_in(spec: str) -> Callable[..., Any]:
    import importlib

    module, _, name = spec.partition(":")
    try:
        found = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as e:
        raise TinkerServiceError(f"{TEST_ENV}={spec!r}: {e}") from None
    if not callable(found):
        raise TinkerServiceError(f"{TEST_ENV}={spec!r}: not callable")
    return found  # type: ignore[no-any-return]


def timeout_seconds() -> float:
    """Each Tinker call's patience: ``$MACHINE_TINKER_TIMEOUT`` or 20 s."""
    return env.seconds(TIMEOUT_ENV, DEFAULT_TIMEOUT)


class Retries:
    """How many calls were repeated after a time-out, and what to tell."""

    def __init__(self, report: Callable[[str], None] | None = None) -> None:
        self.count = 0
        self.report = report

    def note(self, line: str) -> None:
        self.count += 1
        if self.report is not None:
            self.report(line)


def bounded(
    what: str,
    call: Callable[[], T],
    *,
    timeout: float | None = None,
    tries: int = 1,
    retries: Retries | None = None,
) -> T:
    """``call()``, given at most ``timeout`` seconds per try, ``tries`` tries.

    A call that does not answer in time, or answers with a server error
    (5xx), is tried again while tries are left (its thread, a daemon, is
    abandoned); then one line says which call and why. The SDK retries 5xx
    answers itself, for minutes, inside one try: those are counted from its
    log (:class:`ServerErrors`), so a try that ran out of time while the
    service kept failing says the status and how often it was retried, not
    just that it did not answer. An error from the SDK is named (HTTP status
    first).
    """
    limit = timeout if timeout is not None else timeout_seconds()
    failed: list[str] = []  # why each earlier try failed (5xx)
    with ServerErrors() as seen:
        for attempt in range(1, tries + 1):
            box: dict[str, Any] = {}
            thread = threading.Thread(
                target=_run_into, args=(call, box), name=f"tinker {what}", daemon=True
            )
            thread.start()
            thread.join(limit)
            if thread.is_alive():
                why = f"did not answer {what} within {limit:g} s"
            elif "error" in box:
                error = box["error"]
                if isinstance(error, KeyboardInterrupt | TinkerServiceError):
                    raise error
                if not _is_server_error(error) or attempt == tries:
                    raise TinkerServiceError(
                        describe(error) + seen.retried(len(failed))
                    ) from None
                why = f"answered {what} with {describe(error)}"
                failed.append(why)
            else:
                return box["value"]  # type: ignore[no-any-return]
            if attempt < tries:
                if retries is not None:
                    retries.note(
                        f"Tinker {why}; trying again ({attempt + 1} of {tries})"
                    )
                continue
            raise TinkerServiceError(_gave_up(what, limit, tries, seen))
    raise AssertionError("unreachable")  # the loop returns or raises


def _gave_up(what: str, limit: float, tries: int, seen: ServerErrors) -> str:
    tried = f" ({tries} tries)" if tries > 1 else ""
    if seen.statuses:
        status = seen.statuses[-1]
        meaning = _STATUS.get(status) or "the service failed"
        return (
            f"Tinker answered {what} with HTTP {status} ({meaning}), retried "
            f"{_times(len(seen.statuses))}, and gave up after {limit:g} s{tried} "
            f"(set {TIMEOUT_ENV} to wait longer)"
        )
    return (
        f"Tinker did not answer {what} within {limit:g} s{tried} (set "
        f"{TIMEOUT_ENV} to wait longer)"
    )


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def _is_server_error(error: BaseException) -> bool:
    status = getattr(error, "status_code", None)
    return isinstance(status, int) and status >= 500


class ServerErrors:
    """The 5xx answers the SDK retried by itself while it is active.

    The SDK's HTTP client logs each retry at DEBUG ("Retrying due to status
    code 500") on ``tinker._base_client``. While active, that logger lets
    DEBUG records reach this filter, which counts them and passes on only
    what the logger passed before, so nothing new is printed.
    """

    LOGGER = "tinker._base_client"
    _RETRY = "Retrying due to status code"

    def __init__(self) -> None:
        self.statuses: list[int] = []
        self._logger = logging.getLogger(self.LOGGER)
        self._level = logging.NOTSET
        self._shown = logging.WARNING

    def __enter__(self) -> ServerErrors:
        self._level = self._logger.level
        self._shown = self._logger.getEffectiveLevel()
        self._logger.addFilter(self.filter)
        self._logger.setLevel(logging.DEBUG)
        return self

    def __exit__(self, *exc: object) -> None:
        self._logger.setLevel(self._level)
        self._logger.removeFilter(self.filter)

    def filter(self, record: logging.LogRecord) -> bool:
        # The format string and its first argument, never the formatted
        # message: other DEBUG records hold whole request bodies.
        if (
            isinstance(record.msg, str)
            and record.msg.startswith(self._RETRY)
            and isinstance(record.args, tuple)
            and record.args
            and isinstance(record.args[0], int)
        ):
            self.statuses.append(record.args[0])
        return record.levelno >= self._shown

    def retried(self, ours: int) -> str:
        """``, retried N times`` when the SDK or we repeated the call."""
        n = len(self.statuses) + ours
        return f", retried {_times(n)}" if n else ""


def _run_into(call: Callable[[], Any], box: dict[str, Any]) -> None:
    try:
        box["value"] = call()
    except BaseException as e:  # noqa: BLE001 - the caller reports it, in one line
        box["error"] = e


def describe(error: BaseException) -> str:
    """An SDK exception as one line; an HTTP error names its status."""
    status = getattr(error, "status_code", None)
    text = " ".join(str(getattr(error, "message", "") or error).split())
    if len(text) > 300:
        text = text[:299] + "…"
    if isinstance(status, int):
        meaning = _STATUS.get(status) or (
            "the service failed" if status >= 500 else "refused"
        )
        return f"HTTP {status} ({meaning}): {text or type(error).__name__}"
    return f"{type(error).__name__}: {text or type(error).__name__}"
