"""The optional training stack: is it installed, and which versions.

The ``train`` extra (machine_git/core/extras.py) adds tinker, tinker-cookbook and
tml-renderers (and through them torch). Nothing here imports them at module
level, so every other command starts without them.
"""

from __future__ import annotations

import importlib
import importlib.metadata

from machine_git.core.errors import TrainingStackMissingError
from machine_git.core.extras import install_hint

INSTALL = install_hint("train")
MODULES = ("torch", "tinker", "tinker_cookbook", "tml_renderers")
DISTRIBUTIONS = ("tinker", "tinker-cookbook", "tml-renderers", "torch")


def require() -> None:
    """Import the stack, or say in one line how to install it."""
    for name in MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            raise TrainingStackMissingError(
                f"machine train needs the training stack ({name} is missing): {INSTALL}"
            ) from None


def versions() -> dict[str, str]:
    """Installed versions of the stack, for run records."""
    out: dict[str, str] = {}
    for name in DISTRIBUTIONS:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "missing"
    return out
