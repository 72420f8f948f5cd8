"""The student: the model trained from this project's rows, to chat with.

A handle is what Tinker's OpenAI-compatible endpoint takes as ``model``
(tinker.md §9): a base model id (``thinkingmachines/Inkling-Small:peft:262144``),
a sampler checkpoint (``tinker://<run>/sampler_weights/<name>``), the two
joined by ``;`` to choose the context length, or a behavior release id
(``BR-001``, stored now and resolved once releases exist).

Committed settings, written together in one commit: ``student`` (the
handle; for a release, its candidate checkpoint, with ``student_release``),
``chat`` (``student`` or ``work``: whether the project last chose to chat with
the student or went back), ``work_model`` (the ``provider/id`` to switch back
to) and ``chat_session`` (the Pi session the student was chosen in).

Inside Pi, choosing the student switches only the session it was asked in
(in Letta Code only the conversation: ``updateLlmConfig``, scope
``conversation``); ``machine work`` (from a shell or ``/machine work``) sets
``chat`` back to ``work``, and a session machine had switched goes back to its
working model when it next starts or takes a prompt (the Pi extension and the
Letta Code mod check ``chat`` then).
``where`` says what is active where: the student, that session's model and
the model new Pi sessions start on (agents.pimodel).

The same endpoint answers ``ask`` (a chat completion) and ``list_models``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from typing import NamedTuple

from machine_git.agents import install
from machine_git.agents import pimodel
from machine_git.core import paths
from machine_git.core.errors import NotFoundError
from machine_git.core.errors import StudentError
from machine_git.core.errors import StudentServiceError
from machine_git.core.errors import UsageError
from machine_git.core.paths import Project
from machine_git.store import settings
from machine_git.store.store import Store
from machine_git.store.store import exists as store_exists

API_KEY_ENV = install.API_KEY_ENV
_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*"
_BASE = re.compile(rf"^{_NAME}/{_NAME}(:[A-Za-z0-9._-]+)*$")
_CHECKPOINT = re.compile(r"^tinker://([^\s/]+)/([a-z_]+)/([^\s/]+)$")
_RELEASE = re.compile(r"^BR-\d{3,}$")
_WORK_MODEL = re.compile(r"^[^\s/]+/\S+$")


@dataclass(frozen=True)
class Handle:
    """A parsed student handle and what it names."""

    text: str
    kind: str  # base, checkpoint, release
    release: str | None = None  # the release id a checkpoint was resolved from

    @property
    def sampleable(self) -> bool:
        """True if Tinker's endpoint can sample it as is (not a bare release id)."""
        return not _RELEASE.match(self.text)

    def describe(self) -> str:
        """``HANDLE (kind)``, or ``BR-001 = CHECKPOINT (release)``."""
        if self.release is not None:
            return f"{self.release} = {self.text} (release)"
        return f"{self.text} ({self.kind})"


def parse(text: str) -> Handle:
    """Check a handle's syntax; one line saying what is wrong if it is bad."""
    text = text.strip()
    if _RELEASE.match(text):
        return Handle(text, "release")
    if ";" in text:
        base, _, checkpoint = text.partition(";")
        if _BASE.match(base) and _checkpoint_ok(checkpoint):
            return Handle(text, "checkpoint")
    elif _BASE.match(text):
        return Handle(text, "base")
    elif _checkpoint_ok(text):
        return Handle(text, "checkpoint")
    raise UsageError(
        f"{text!r} is not a student handle: expected a Tinker model id "
        "(thinkingmachines/Inkling-Small:peft:262144), a sampler checkpoint "
        "(tinker://RUN/sampler_weights/NAME) or a release id (BR-001)"
    )


def _checkpoint_ok(text: str) -> bool:
    match = _CHECKPOINT.match(text)
    if match is None:
        return False
    if match.group(2) != "sampler_weights":
        raise UsageError(
            f"{text!r} is a {match.group(2)} checkpoint; only sampler_weights "
            "checkpoints can be sampled"
        )
    return True


def resolve(store: Store | None, handle: Handle) -> Handle:
    """A release id as the checkpoint it releases; any other handle as it is.

    A release id that names no release of this project is refused: setting it
    would change nothing Pi or Tinker can use.
    """
    if handle.kind != "release" or handle.sampleable:
        return handle  # a model id, a checkpoint, or a release already resolved
    from machine_git import releases  # only for a release id: off every other path

    record = None
    if store is not None:
        # A tampered release is refused with its reason, like every release
        # command; only a missing one is "no release".
        with contextlib.suppress(NotFoundError):
            record = releases.frozen(store, handle.text)
    if record is None:
        raise NotFoundError(
            f"no release {handle.text} in this project (machine release list)"
        )
    checkpoint = record.candidate.checkpoint
    if not checkpoint:
        raise StudentError(f"release {handle.text} names no checkpoint to sample")
    return Handle(checkpoint, "release", release=handle.text)


# -- settings --------------------------------------------------------------------


NOTHING: dict[str, Any] = {
    "student": None,
    "student_release": None,
    "chat": "work",
    "work_model": None,
    "chat_session": None,
}


def current(store: Store | None) -> dict[str, Any]:
    """The student's settings as committed (NOTHING without a store)."""
    if store is None:
        return dict(NOTHING)
    values = settings.read(store)
    found = {key: getattr(values, key) or NOTHING[key] for key in NOTHING}
    # settings.json alone is never believed: the student is what signed
    # commits (machine student, release trial/activate) chose.
    from machine_git.releases import audit

    chosen = audit.of_store(store).student or {}
    for key in ("student", "student_release"):
        found[key] = chosen.get(key) or NOTHING[key]
    return found


def check_work_model(work_model: str) -> str:
    """``PROVIDER/MODEL``, or a one-line error."""
    if not _WORK_MODEL.match(work_model):
        raise UsageError(f"--work-model {work_model!r}: expected PROVIDER/MODEL")
    return work_model


def choose(
    store: Store,
    handle: Handle,
    work_model: str | None = None,
    session: str | None = None,
) -> str | None:
    """Chat with ``handle`` from now on (one commit); remembers the work model.

    ``session`` is the Pi session it was chosen in (the extension passes it).
    """
    values: dict[str, Any] = {
        "student": handle.text,
        "chat": "student",
        "student_release": handle.release,
    }
    if work_model is not None:
        values["work_model"] = check_work_model(work_model)
    if session is not None:
        values["chat_session"] = session
    return _commit(store, values, f"student {handle.release or handle.text}")


def back_to_work(store: Store, work_model: str | None = None) -> str | None:
    """Chat with the working model again (one commit, or none if already)."""
    values: dict[str, Any] = {"chat": "work"}
    if work_model is not None:
        values["work_model"] = check_work_model(work_model)
    return _commit(store, values, "chat with the working model")


@dataclass
class Where:
    """What is active where: the project's choice, one Pi session, Pi's default."""

    values: dict[str, Any]
    session: str | None  # the Pi session reported on
    session_model: str | None  # provider/model that session continues with
    default_model: str | None  # provider/model new Pi sessions start on

    @property
    def student_model(self) -> str | None:
        """``tinker/<handle>``: the student as Pi names it."""
        handle = self.values.get("student")
        return f"{install.TINKER_PROVIDER}/{handle}" if handle else None

    def lines(self) -> list[str]:
        """What ``machine student`` prints."""
        handle = self.values.get("student")
        if handle is None:
            out = [
                "no student set; choose one with machine student HANDLE "
                "(e.g. thinkingmachines/Inkling-Small:peft:262144)"
            ]
        else:
            release = self.values.get("student_release")
            out = [f"student {release} = {handle}" if release else f"student {handle}"]
        if self.session is not None and self.session_model is not None:
            name = Path(self.session).name
            out.append(f"Pi session {name}: {self._name(self.session_model)}")
        if self.default_model is not None:
            out.append(f"new Pi sessions start on {self._name(self.default_model)}")
        return out

    def _name(self, model: str) -> str:
        if model == self.student_model:
            return f"the student ({model})"
        if model.startswith(f"{install.TINKER_PROVIDER}/"):
            return f"{model} (Tinker)"
        return model

    def to_json(self) -> dict[str, Any]:
        """The settings and where each model is active, for ``--json``."""
        return {
            **self.values,
            "pi_session": self.session,
            "pi_session_model": self.session_model,
            "pi_default_model": self.default_model,
        }


def where(store: Store | None, session: str | None = None) -> Where:
    """The student, the model of ``session`` (default: the one it was chosen
    in) and the model new Pi sessions start on."""
    values = current(store)
    session = session or values.get("chat_session")
    model = pimodel.session_model(Path(session)) if session else None
    return Where(values, session, model, pimodel.default_model())


def reset_pi_default(values: dict[str, Any]) -> str | None:
    """Pi's default back to the work model if it is on Tinker; the old default.

    An older machine wrote the student as Pi's default, so every new session
    went to Tinker; ``machine work`` undoes that (and ``/model tinker/...``
    made global), when the work model is known.
    """
    before = pimodel.default_model()
    work_model = values.get("work_model")
    if (
        before is None
        or not before.startswith(f"{install.TINKER_PROVIDER}/")
        or not work_model
    ):
        return None
    pimodel.set_default_model(str(work_model))
    return before


def _commit(store: Store, values: dict[str, Any], summary: str) -> str | None:
    return settings.update(store, values, summary)


def pi_model(handle: Handle) -> str | None:
    """``tinker/<handle>``: the model Pi chats with for it (None if not sampleable)."""
    return f"{install.TINKER_PROVIDER}/{handle.text}" if handle.sampleable else None


def offer_in_pi(handle: Handle) -> install.Outcome | None:
    """Add the handle to Pi's Tinker provider (if installed) so /model lists it."""
    if not handle.sampleable:
        return None
    return install.add_pi_model(handle.text)


def offer_in_letta(handle: Handle) -> install.Outcome | None:
    """Add the handle to Letta Code's Tinker catalog (if installed) so /model and
    ``/machine student`` find it there."""
    if not handle.sampleable:
        return None
    return install.add_letta_model(handle.text)


# -- the commands' work ------------------------------------------------------------


class Chosen(NamedTuple):
    """What ``machine student HANDLE`` did."""

    handle: Handle
    commit: str | None
    message: str
    """What to tell the user: the student, and how to chat with it."""
    missing_key: str | None
    """Why Pi and ``machine ask`` cannot reach Tinker yet, if they cannot."""
    new_store: str | None
    """The note for a store made for a folder outside git."""
    settings: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        """What ``--json`` prints (without the message)."""
        return {
            **self.settings,
            "kind": self.handle.kind,
            "release": self.handle.release,
            "warning": self.missing_key,
            "switch_to": pi_model(self.handle),
        }


def set_student(
    project: Project,
    text: str,
    work_model: str | None = None,
    session: str | None = None,
) -> Chosen:
    """Choose the student ``text`` names for ``project`` (one commit), and offer
    it in Pi and Letta Code where machine installed the Tinker provider."""
    location = project.store_path
    # A release id must name a release before anything is written.
    handle = resolve(_existing(location), parse(text))
    store = Store.create(location, project.root)
    new_store = paths.new_store_notice(project.root, project.chosen, store.created)
    commit = choose(store, handle, work_model, session)
    offered = offer_in_pi(handle)
    in_letta = offer_in_letta(handle)  # Letta Code's catalog, if installed
    message = f"student {handle.describe()}"
    if session is None:  # from a shell: how to chat with it
        message += (
            "; machine install pi offers it in Pi"
            if offered is None or offered.action == "skipped"
            else f"; in Pi: /machine student {text} switches one session to it"
        )
        if in_letta is not None and in_letta.action != "skipped":
            message += (
                f"; in Letta Code: /machine student {text} switches one "
                "conversation to it"
            )
    return Chosen(handle, commit, message, missing_key(), new_store, current(store))


def missing_key() -> str | None:
    """Why Pi and ``machine ask`` cannot reach Tinker, or None if they can."""
    if has_key():
        return None
    return f"{API_KEY_ENV} is not set; pi and machine ask cannot reach Tinker"


class Worked(NamedTuple):
    """What ``machine work`` did: the settings now, and Pi's default it replaced."""

    settings: dict[str, Any]
    pi_default_was: str | None


def work(project: Project, work_model: str | None = None) -> Worked:
    """Chat with the working model again, and take Pi's default off Tinker."""
    store = _existing(project.store_path)
    values = {**current(None), "work_model": work_model}
    if store is not None:
        back_to_work(store, work_model)
        values = current(store)
    return Worked(values, reset_pi_default(values))


def ask_student(
    project: Project,
    prompt: str,
    handle: str | None = None,
    *,
    timeout: float = 30.0,
    max_tokens: int = 1024,
) -> str:
    """The answer of the student (or of ``handle``) to ``prompt``."""
    require_key()
    store = _existing(project.store_path)
    if handle is None:
        handle = None if store is None else current(store)["student"]
        if handle is None:
            raise StudentError("no student set; choose one with machine student HANDLE")
    chosen = resolve(store, parse(handle))
    return ask(chosen, prompt, timeout=timeout, max_tokens=max_tokens)


def _existing(location: Path) -> Store | None:
    return Store.open(location) if store_exists(location) else None


# -- sampling --------------------------------------------------------------------


def has_key() -> bool:
    """True if ``TINKER_API_KEY`` is set."""
    return bool(os.environ.get(API_KEY_ENV, "").strip())


def require_key() -> str:
    """The Tinker API key, or one line saying it is missing."""
    key = os.environ.get(API_KEY_ENV, "").strip()
    if not key:
        raise StudentServiceError(
            f"{API_KEY_ENV} is not set; create a key in the Tinker console and "
            f"export {API_KEY_ENV}"
        )
    return key


def ask(
    handle: Handle,
    prompt: str,
    *,
    timeout: float = 30.0,
    max_tokens: int = 1024,
) -> str:
    """The student's answer to ``prompt`` from Tinker's OpenAI-compatible API."""
    key = require_key()
    if not handle.sampleable:
        raise StudentError(
            f"{handle.text} is a release id; releases cannot be sampled yet "
            "(set a model id or a tinker:// checkpoint with machine student)"
        )
    body = {
        "model": handle.text,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
    }
    data = _call(key, "chat/completions", body, timeout)
    try:
        content = data["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise StudentServiceError(
            f"Tinker sent an answer machine cannot read: {_clip(data)}"
        ) from None
    return content if isinstance(content, str) else ""


def list_models(*, timeout: float = 10.0) -> list[str]:
    """The model ids Tinker's OpenAI-compatible endpoint offers (``GET /models``)."""
    key = require_key()
    data = _call(key, "models", None, timeout)
    listed = data.get("data") if isinstance(data, dict) else None
    if not isinstance(listed, list):
        raise StudentServiceError(
            f"Tinker sent a model list machine cannot read: {_clip(data)}"
        )
    ids = {
        m["id"] for m in listed if isinstance(m, dict) and isinstance(m.get("id"), str)
    }
    return sorted(ids)


def _call(key: str, path: str, body: dict[str, Any] | None, timeout: float) -> Any:
    """One request to the endpoint (POST with ``body``, else GET), as parsed JSON."""
    import urllib.error
    import urllib.request

    base = install.oai_url()
    headers = {"Authorization": f"Bearer {key}"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(
        f"{base}/{path}",
        data=None if body is None else json.dumps(body).encode(),
        headers=headers,
        method="GET" if body is None else "POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            payload = response.read()
    except urllib.error.HTTPError as e:
        raise StudentServiceError(
            f"Tinker refused the request ({e.code}): {_error_text(e)}"
        ) from None
    except (urllib.error.URLError, TimeoutError, OSError) as e:
        reason = getattr(e, "reason", None) or e
        why = f"Tinker is unreachable at {base}: {reason}"
        raise StudentServiceError(why) from None
    try:
        return json.loads(payload)
    except ValueError:
        raise StudentServiceError(
            f"Tinker sent an answer machine cannot read: {payload[:200]!r}"
        ) from None


def _clip(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 200 else text[:199] + "…"


def _error_text(e: Any) -> str:
    """The message of an HTTP error answer (OpenAI error shape), on one line."""
    try:
        raw = e.read()[:2000]
    except OSError:
        return str(e.reason)
    try:
        value = json.loads(raw)
        error = value.get("error", value) if isinstance(value, dict) else value
        message = error.get("message") if isinstance(error, dict) else None
        if isinstance(message, str) and message:
            return " ".join(message.split())[:300]
    except ValueError:
        pass
    text = " ".join(raw.decode(errors="replace").split())
    return text[:300] or str(e.reason)
