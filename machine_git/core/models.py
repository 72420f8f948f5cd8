"""pydantic models of the records machine writes and reads back, and their loader.

Such records can be edited or damaged by hand (``machine clone``, then a
push), so each is validated whenever it is read: a bad one is one line naming
the field (``<file>: $.json.path: problem``), not a traceback later.
:func:`load` is that check for every record model (settings here, the
training records in ``train.records``, the release records in
``releases.records``). Rows are not here: they are checked by their JSON
Schemas and typed by ``rowtypes`` (pydantic costs about 0.25 s of start-up,
and the tag path never loads it).

``settings.json``: loaded by the commands that read settings whole
(``student``, ``work``, ``ask``, ``auto on|off``, releases); the question
every agent turn asks (is auto-capture on?) reads its one value without it
(settings.auto).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal
from typing import TypeVar

from pydantic import BaseModel
from pydantic import ConfigDict
from pydantic import Field
from pydantic import ValidationError
from pydantic import model_validator

from machine_git.core.errors import MachineError
from machine_git.core.errors import RecordError

# Keys the review page binds for itself; a label schema's keys must differ.
RESERVED_KEYS = frozenset("gbrnpstuUxAGBN?/[]")
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")


class LabelField(BaseModel):
    """One field of the project's label schema (``settings.json`` ``labels``).

    ``rating``: a whole number from 1 to ``max``; ``category``: one of
    ``choices``; ``note``: free text; ``spans``: stretches of the answer,
    each with one of ``choices`` as its label (any label if none are given).
    ``keys`` are what the review page binds: one per value of a rating (the
    first rating gets the digits by default) or a category, one for a note
    or spans field (it opens the note, or labels the text selected).
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    name: str
    type: Literal["rating", "category", "note", "spans"]
    description: str = ""
    max: int = 5
    choices: list[str] = []
    keys: list[str] = []

    @model_validator(mode="after")
    def _check(self) -> LabelField:
        if not _NAME.match(self.name):
            raise ValueError(
                f"name {self.name!r}: lowercase letters, digits and _, "
                "starting with a letter (at most 32)"
            )
        if self.type == "rating" and not 2 <= self.max <= 10:
            raise ValueError(f"{self.name}: a rating's max is 2 to 10, not {self.max}")
        if self.type == "category" and not self.choices:
            raise ValueError(f"{self.name}: a category needs its choices")
        if len(set(self.choices)) != len(self.choices) or any(
            not 0 < len(c) <= 64 for c in self.choices
        ):
            raise ValueError(f"{self.name}: choices must be distinct, 1-64 characters")
        wanted = {
            "rating": self.max,
            "category": len(self.choices),
            "note": 1,
            "spans": 1,
        }[self.type]
        if self.keys and len(self.keys) != wanted:
            raise ValueError(
                f"{self.name}: {wanted} key(s) expected, not {len(self.keys)}"
            )
        for key in self.keys:
            if len(key) != 1 or key in RESERVED_KEYS or key.isspace():
                raise ValueError(
                    f"{self.name}: key {key!r} must be one character the page "
                    f"does not use itself ({''.join(sorted(RESERVED_KEYS))})"
                )
        return self


def label_keys(fields: Sequence[LabelField]) -> dict[str, tuple[str, int | str]]:
    """Each key of a schema: the field it sets and the value (a rating's
    number, a category's choice; "" for a note or spans field)."""
    out: dict[str, tuple[str, int | str]] = {}
    first_rating = next((f.name for f in fields if f.type == "rating"), None)
    for f in fields:
        keys = list(f.keys)
        if not keys and f.name == first_rating and f.max <= 9:
            keys = [str(n) for n in range(1, f.max + 1)]
        values: list[int | str]
        if f.type == "rating":
            values = list(range(1, f.max + 1))
        elif f.type == "category":
            values = list(f.choices)
        else:
            values = [""]
        for key, value in zip(keys, values, strict=False):
            if key in out:
                raise ValueError(
                    f"key {key!r} is bound twice ({out[key][0]}, {f.name})"
                )
            out[key] = (f.name, value)
    return out


class Settings(BaseModel):
    """Every setting a project has, with its default."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    auto: bool = False
    """Auto-capture: record every finished agent run as an observed row."""
    student: str | None = None
    """The student's handle (a Tinker model id or checkpoint)."""
    student_release: str | None = None
    """The release the student's checkpoint comes from, if any."""
    student_status: Literal["trial", "default"] | None = None
    """How a release made it the student: on trial, or activated."""
    chat: Literal["work", "student"] = "work"
    """Whom the project last chose to chat with."""
    work_model: str | None = None
    """The ``provider/model`` to switch back to from the student."""
    chat_session: str | None = None
    """The Pi session the student was chosen in."""
    image_max_bytes: int = Field(default=5_000_000, gt=0)
    """The largest image a row may keep, in bytes after its metadata is stripped."""
    labels: list[LabelField] = []
    """The label schema beyond good, bad and rewrite (which every row has)."""

    @model_validator(mode="after")
    def _check_labels(self) -> Settings:
        names = [f.name for f in self.labels]
        if len(set(names)) != len(names):
            raise ValueError("labels: each field needs a name of its own")
        label_keys(self.labels)  # raises if a key is bound twice
        return self


M = TypeVar("M", bound=BaseModel)


def load(
    model: type[M],
    value: object,
    where: str,
    error: type[MachineError] = RecordError,
) -> M:
    """``value`` (a parsed record) as ``model``, or one line naming the field.

    The one loader of every pydantic record (settings, run records,
    ``tinker.yaml``, export manifests, release records): the line is
    ``<where>: <json path>: <problem>``, as a row's schema problems read, and
    raised as ``error`` (the command's own class; RecordError by default).
    """
    try:
        return model.model_validate(value)
    except ValidationError as e:
        raise error(f"{where}: {first_problem(e, value)}") from None


def first_problem(error: ValidationError, value: object) -> str:
    """``$.hyperparameters.batch_size: Input should be ...``, in one line.

    A check of the whole record (a model validator) is at ``$``, unless its
    message starts with the path of the field it names (``$.dataset.kind: ...``).
    """
    problem = error.errors()[0]
    message = " ".join(str(problem["msg"]).split()).removeprefix("Value error, ")
    path = json_path(problem["loc"], value)
    named = path == "$" and message.startswith("$.")
    return message if named else f"{path}: {message}"


def json_path(loc: tuple[int | str, ...], value: object) -> str:
    """pydantic's location of a problem in ``value`` as a JSON path.

    pydantic puts the branch of a union it tried into the location (``int``,
    ``literal['all']``, a model's name): a part is a key only where ``value``
    has an object there, and holds it (or the part is the last, a field that
    is missing).
    """
    out = "$"
    for number, part in enumerate(loc, start=1):
        if isinstance(part, int) and isinstance(value, list):
            out += f"[{part}]"
            value = value[part] if -len(value) <= part < len(value) else None
        elif isinstance(part, str) and isinstance(value, dict):
            if part in value:
                out += f".{part}"
                value = value[part]
            elif number == len(loc):
                out += f".{part}"
        # else: the branch of a union pydantic tried, not a key
    return out


def load_settings(value: object, where: str) -> Settings:
    """``settings.json`` (parsed) as Settings."""
    return load(Settings, value, where)
