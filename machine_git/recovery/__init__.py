"""recovery."""

from __future__ import annotations
