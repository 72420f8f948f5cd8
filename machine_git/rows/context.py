"""The context a turn ran with: its system prompt and the tools it was offered.

A model learns from a trace to call tools; it must see the tools it may call
(name, description, JSON-schema parameters) and the system prompt that framed
the turn, or it is taught to call tools it was never shown. Agents send both
with every request and keep them nowhere in most session files, so each
reader takes them where its host keeps them (Pi: a ``machine-context`` entry
the extension writes at every agent start; Letta Code's local backend:
``system-prompt.json``; a Letta message list or Agent File: its system
message, and an Agent File's tool schemas; Codex: the rollout's
instructions) and says ``None`` for what it cannot know.

Every turn of a session carries the same few kilobytes of context, so the
store keeps each distinct context once, content-addressed:
``context/<sha[0:2]>/<sha256>.json``, the sha256 of its canonical bytes. A
stored row names its context by that hash (``"context": "<sha256>"``), or
``null`` when it is unknown or left out. In memory, and in a JSONL file
written with ``--out``, a row carries the context itself (``inline``); the
store's write path turns it into the hash and the file (:func:`stored`), and
readers that need it put it back (:func:`inline`). So redaction, which scans
a row's content, scans its context too, with the row, in the one place rows
are redacted.

Light on purpose: ``machine good`` loads it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any
from typing import TypedDict
from typing import TypeVar
from typing import cast

import pygit2

from machine_git.core import jsonio
from machine_git.core.errors import RowValidationError
from machine_git.core.errors import SecretFoundError
from machine_git.rows import rows

CONTEXT_DIR = "context"
FIELD = "context"
_SHA = re.compile(r"^[0-9a-f]{64}$")
R = TypeVar("R", bound=Mapping[str, Any])  # a row, typed or not


class Tool(TypedDict):
    """One tool as the model was offered it (the OpenAI function shape)."""

    name: str
    description: str
    parameters: dict[str, Any]


class Context(TypedDict):
    """What a turn ran with; ``None`` where the host does not say."""

    system: str | None
    tools: list[Tool] | None


Reader = Callable[[str], bytes | None]  # a store path -> its bytes, or None


def make(system: Any, tools: Any) -> Context | None:
    """A context from what a host recorded; None when neither part is known.

    Tools keep the agent's order; one without a name is dropped (a model
    cannot call it), a missing description is ``""`` and missing parameters
    are an object schema with no properties.
    """
    prompt = system if isinstance(system, str) and system.strip() else None
    offered: list[Tool] | None = None
    if isinstance(tools, list):
        offered = [t for t in (_tool(item) for item in tools) if t is not None]
    if prompt is None and offered is None:
        return None
    return {"system": prompt, "tools": offered}


def _tool(item: Any) -> Tool | None:
    # The agent's key order is kept (a chat template writes the tool as it
    # came); what is missing or malformed is filled in after it.
    if not isinstance(item, dict):
        return None
    name = item.get("name")
    if not isinstance(name, str) or not name:
        return None
    description = item.get("description")
    parameters = item.get("parameters")
    fixed: dict[str, Any] = {
        "name": name,
        "description": description if isinstance(description, str) else "",
        "parameters": parameters
        if isinstance(parameters, dict)
        else {"type": "object", "properties": {}},
    }
    ordered = {key: fixed[key] for key in item if key in fixed}
    ordered.update((key, value) for key, value in fixed.items() if key not in ordered)
    return cast(Tool, ordered)


# -- the store's files ---------------------------------------------------------


def canonical(context: Mapping[str, Any]) -> bytes:
    """The stored bytes of a context (what its hash is taken over).

    Indent 2, ``system`` then ``tools``, and the tools exactly in the order
    and key order the agent sent them: the model saw them so, and a chat
    template renders them so. (A store written before kept them sorted;
    sorted is an order too, so those files are canonical by this rule and
    keep their hashes.)
    """
    return jsonio.ordered(
        {"system": context.get("system"), "tools": context.get("tools")}
    )


def digest(data: bytes) -> str:
    """The id of a context: the sha256 of its canonical bytes."""
    return hashlib.sha256(data).hexdigest()


def path_of(sha: str) -> str:
    """Where context ``sha`` lives in the store's tree."""
    if not _SHA.match(sha):
        raise RowValidationError(f"bad context id {sha!r}: expected 64 hex characters")
    return f"{CONTEXT_DIR}/{sha[:2]}/{sha}.json"


def sha_of_path(path: str) -> str | None:
    """The context id a tree path names, or None if it is not a context file."""
    parts = path.split("/")
    if len(parts) != 3 or parts[0] != CONTEXT_DIR or not parts[2].endswith(".json"):
        return None
    sha = parts[2][:-5]
    return sha if _SHA.match(sha) and parts[1] == sha[:2] else None


def is_context_path(path: str) -> bool:
    """True for any path under ``context/`` (valid or not)."""
    return path.startswith(f"{CONTEXT_DIR}/")


def stored(
    row: dict[str, Any], present: Callable[[str], bool] | None = None
) -> tuple[dict[str, Any], dict[str, bytes | None]]:
    """``row`` as the store keeps it, and the context file to write with it.

    An inline context becomes its hash; the file is returned unless
    ``present`` says the store has it already (content-addressed: the same
    bytes are already there). A row with a hash or ``null`` is unchanged.
    """
    value = row.get(FIELD)
    if not isinstance(value, dict):
        return row, {}
    data = canonical(value)
    sha = digest(data)
    path = path_of(sha)
    out = {**row, FIELD: sha}
    if present is not None and present(path):
        return out, {}
    return out, {path: data}


def inline(row: R, read: Reader) -> R:
    """``row`` with its stored context put back in place of the hash.

    A hash whose file is missing or unreadable becomes ``None`` (unknown):
    a reader never fails on a context (the store refuses to write one
    missing, and ``machine validate`` reports it).
    """
    value = row.get(FIELD)
    if not isinstance(value, str):
        return row
    return cast("R", {**row, FIELD: load(value, read)})


def shown(row: dict[str, Any], read: Reader) -> dict[str, Any]:
    """``row`` for people (``show``, ``diff``): its context put back with its id.

    ``{"id": sha, "system": ..., "tools": [...]}``, so a diff of two rows
    names what changed inside the context, and that the context changed.
    """
    value = row.get(FIELD)
    if not isinstance(value, str):
        return row
    found = load(value, read)
    resolved: dict[str, Any] = {"id": value}
    if found is None:
        resolved["missing"] = True
    else:
        resolved.update(found)
    return {**row, FIELD: resolved}


def from_shown(row: Any, read: Reader | None = None) -> Any:
    """A row as :func:`shown` gave it, back in a form the store takes.

    ``machine show`` (and so Pi's ``/machine edit``) gives the context with
    its ``id``; an edit may change the prompt or the tools. The context goes
    inline (the store keeps it by hash, a new one if it was changed); one
    that was missing stays the hash it was. With ``read``, a context whose
    content is the stored one's stays that hash: shown JSON has sorted keys,
    and the stored context keeps the agent's key order.
    """
    if not isinstance(row, dict):
        return row
    value = row.get(FIELD)
    if not isinstance(value, dict) or "id" not in value:
        return row
    if value.get("missing"):
        return {**row, FIELD: value["id"]}
    edited = {k: v for k, v in value.items() if k != "id"}
    sha = value["id"]
    if read is not None and isinstance(sha, str):
        stored_one = load(sha, read)
        if stored_one is not None and stored_one == make(
            edited.get("system"), edited.get("tools")
        ):
            return {**row, FIELD: sha}
    return {**row, FIELD: edited}


def load(sha: str, read: Reader) -> Context | None:
    """Context ``sha`` from the store, or None if it is not there."""
    if not _SHA.match(sha):
        return None
    data = read(path_of(sha))
    if data is None:
        return None
    try:
        value = jsonio.loads(data)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    return make(value.get("system"), value.get("tools")) or {
        "system": None,
        "tools": None,
    }


def of_row(row: Mapping[str, Any]) -> Context | None:
    """A row's inline context (None: unknown, left out, or still a hash)."""
    value = row.get(FIELD)
    if not isinstance(value, dict):
        return None
    return {"system": value.get("system"), "tools": value.get("tools")}


def without(row: R) -> R:
    """``row`` with its context left out (``--no-context``)."""
    if FIELD not in row:
        return row
    return cast("R", {**row, FIELD: None})


# -- checks: the store's write path, the pre-receive hook, machine validate -----


def file_problems(path: str, data: bytes) -> list[str]:
    """Why file ``path`` with bytes ``data`` is not a valid context file."""
    from machine_git.rows import schemas

    sha = sha_of_path(path)
    if sha is None:
        return ["not a context path (context/ab/<64 hex>.json)"]
    try:
        value = jsonio.loads(data)
    except ValueError as e:
        return [f"not valid JSON ({e})"]
    problems = schemas.check(schemas.validator("context"), value)
    if problems:
        return [str(p) for p in problems]
    if not isinstance(value, dict) or canonical(value) != data:
        return ["not canonical JSON (indent 2, system then tools)"]
    if digest(data) != sha:
        return [f"its content hashes to {digest(data)[:12]}, not its name"]
    return []


def reference_problem(row: Any, exists: Callable[[str], bool]) -> str | None:
    """Why a stored row's context reference is wrong, or None.

    A row in the store names its context by hash (never inline, which is
    only for JSONL files), and that context must be in the same tree.
    """
    if not isinstance(row, dict):
        return None
    value = row.get(FIELD)
    if isinstance(value, dict):
        return "a stored row names its context by sha256, not inline"
    if isinstance(value, str) and _SHA.match(value) and not exists(path_of(value)):
        return f"its context {value[:12]} is not in the store"
    return None


def stored_ids(tree: Any) -> set[str]:
    """The ids of every context in a commit's git tree (empty if none)."""
    return addressed_ids(tree, CONTEXT_DIR, sha_of_path)


def addressed_ids(
    tree: Any, folder: str, sha_of: Callable[[str], str | None]
) -> set[str]:
    """The ids of the files stored by content under ``folder/<xx>/`` in a
    commit's git tree (contexts here, images in rows/images.py)."""
    if tree is None or folder not in tree:
        return set()
    found: set[str] = set()
    for fan in tree[folder].peel(pygit2.Tree):
        if fan.type_str != "tree":
            continue
        for entry in fan.peel(pygit2.Tree):
            sha = sha_of(f"{folder}/{fan.name}/{entry.name}")
            if sha is not None:
                found.add(sha)
    return found


def in_tree(tree: Any, path: str) -> bool:
    """True if the git tree ``tree`` (or None) has an entry at ``path``."""
    if tree is None:
        return False
    try:
        tree[path]
    except KeyError:
        return False
    return True


def check_change(files: Mapping[str, bytes | None], tree: Any, scan: bool) -> None:
    """The store's gate for contexts in one commit; raises on the first problem.

    Context files must be valid, canonical and named by their hash; rows
    must name contexts the commit's tree holds (``files``, or ``tree``, the
    git tree the commit starts from).
    With ``scan`` (a writer that did not redact), a secret in a context
    stops the commit, as it does in a row.
    """
    written = {p for p, d in files.items() if d is not None}

    def there(path: str) -> bool:
        return path in written or (
            files.get(path, b"") is not None and in_tree(tree, path)
        )

    for path, data in files.items():
        if data is None:
            continue
        if is_context_path(path):
            problems = file_problems(path, data)
            if problems:
                raise RowValidationError(f"{path}: {problems[0]}")
            if scan:
                _refuse_secrets(path, data)
        elif rows.id_of_path(path) is not None:
            try:
                row = jsonio.loads(data)
            except ValueError:
                continue  # the row check names it
            problem = reference_problem(row, there)
            if problem is not None:
                raise RowValidationError(f"{path}: {problem}")


def _refuse_secrets(path: str, data: bytes) -> None:
    from machine_git.secrets import redaction

    kinds = redaction.leaks({"context": jsonio.loads(data)})
    if kinds:
        raise SecretFoundError(
            f"{path}: holds an unredacted secret ({', '.join(kinds)}); "
            "nothing was written"
        )


# -- what exports and training take from it ------------------------------------


def openai_tools(context: Context | None) -> list[dict[str, Any]] | None:
    """The ``tools`` list of the OpenAI chat format, or None if unknown."""
    if context is None or context.get("tools") is None:
        return None
    return [
        {"type": "function", "function": dict(tool)} for tool in context["tools"] or []
    ]


def system_message(context: Context | None) -> dict[str, Any] | None:
    """The system prompt as the first chat message, or None if unknown."""
    if context is None or not context.get("system"):
        return None
    return {"role": "system", "content": context["system"]}
