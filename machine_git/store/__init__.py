"""store."""

from __future__ import annotations
