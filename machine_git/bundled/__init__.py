"""The files machine ships beside its code: schemas/, templates/, hooks/, skills/.

They live at the top of the repository and are mapped into the wheel as
``machine_git.bundled.<folder>``, so importlib.resources reads them the same
way from a checkout, an editable install and a wheel.

``read_bytes`` looks on disk first, where the files are in a wheel (beside
this module) or a checkout (the repository's top level): importing
importlib.resources costs ~5 ms, a tenth of what ``machine good`` spends
beyond its libraries (bench/RESULTS.md).

May use: nothing of machine's (pyproject.toml: [tool.importlinter]).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from typing import Literal

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

Folder = Literal["schemas", "templates", "hooks", "skills"]

_HERE = Path(__file__).resolve().parent
_CHECKOUT = _HERE.parent.parent  # machine_git/bundled -> the repository


def folder(name: Folder) -> Traversable:
    """The shipped folder ``name``."""
    import importlib.resources

    return importlib.resources.files(f"machine_git.bundled.{name}")


def read_bytes(name: Folder, filename: str) -> bytes:
    """The bytes of one shipped file; ``OSError`` if it is missing."""
    for base in _places():
        try:
            return (base / name / filename).read_bytes()
        except OSError:
            continue
    return (folder(name) / filename).read_bytes()


def _places() -> list[Path]:
    places = [_HERE]
    # Only a checkout has pyproject.toml there; in site-packages the folder
    # above the package belongs to every installed distribution.
    if (_CHECKOUT / "pyproject.toml").is_file():
        places.append(_CHECKOUT)
    return places
