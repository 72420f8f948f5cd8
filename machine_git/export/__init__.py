"""export."""

from __future__ import annotations
