"""The model of ``settings.json``: what each setting may hold, checked on load.

``settings.json`` is a record machine writes and reads back, and people can
change it by hand (``machine clone``, then a push), so it is a pydantic model
validated whenever settings are read whole: a bad value is one line naming
the field. Loaded only by the commands that read settings whole (``student``,
``work``, ``ask``, ``auto on|off``, releases); the question every agent turn
asks (is auto-capture on?) reads its one value without it (settings.auto).
"""

from __future__ import annotations

from typing import Literal

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


def load(value: object, where: str) -> Settings:
    """``value`` (``settings.json`` parsed) as Settings, or one line naming a field."""
    try:
        return Settings.model_validate(value)
    except ValidationError as e:
        problem = e.errors()[0]
        field = ".".join(str(part) for part in problem["loc"])
        at = f"$.{field}" if field else "$"
        raise RecordError(f"{where}: {at}: {problem['msg']}") from None
