"""pydantic models of the records machine writes and reads back.

Such records can be edited or damaged by hand (``machine clone``, then a
push), so each is validated whenever it is read: a bad one is one line naming
the field (RecordError, exit 4), not a traceback later. Rows are not here:
they are checked by their JSON Schemas and typed by ``rowtypes`` (pydantic
costs about 0.25 s of start-up, and the tag path never loads it).

``settings.json``: loaded by the commands that read settings whole
(``student``, ``work``, ``ask``, ``auto on|off``, releases); the question
every agent turn asks (is auto-capture on?) reads its one value without it
(settings.auto).
"""

from __future__ import annotations

from typing import Literal
from typing import TypeVar

from pydantic import BaseModel
from pydantic import ConfigDict
from pydantic import ValidationError

from machine_git.errors import RecordError


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


M = TypeVar("M", bound=BaseModel)


def load(model: type[M], value: object, where: str) -> M:
    """``value`` (a parsed record) as ``model``, or one line naming the field.

    ``where`` is the record's path, at the start of the line.
    """
    try:
        return model.model_validate(value)
    except ValidationError as e:
        problem = e.errors()[0]
        field = ".".join(str(part) for part in problem["loc"])
        at = f"$.{field}" if field else "$"
        raise RecordError(f"{where}: {at}: {problem['msg']}") from None


def load_settings(value: object, where: str) -> Settings:
    """``settings.json`` (parsed) as Settings."""
    return load(Settings, value, where)
