"""``python -m euler``."""

from __future__ import annotations

import sys

from euler.cli import main

sys.exit(main())
