"""The files machine ships beside its code: schemas/, templates/, hooks/, skills/.

They live at the top of the repository and are mapped into the wheel as
``machine_git.bundled.<folder>``, so importlib.resources reads them the same
way from a checkout, an editable install and a wheel.
"""

from __future__ import annotations

import importlib.resources
from importlib.resources.abc import Traversable
from typing import Literal

Folder = Literal["schemas", "templates", "hooks", "skills"]


def folder(name: Folder) -> Traversable:
    """The shipped folder ``name``."""
    return importlib.resources.files(f"machine_git.bundled.{name}")


def read_bytes(name: Folder, filename: str) -> bytes:
    """The bytes of one shipped file; ``OSError`` if it is missing."""
    return (folder(name) / filename).read_bytes()
