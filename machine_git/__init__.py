"""machine: versioned fine-tuning data from a coding agent's good and bad turns."""

from __future__ import annotations

__version__ = "0.1.0"
