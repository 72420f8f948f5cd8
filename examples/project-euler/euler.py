"""``python euler.py ...`` from examples/project-euler (same as ``python -m euler``)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from euler.cli import main

sys.exit(main())
