"""Run every benchmark and write bench/RESULTS.md.

    python bench/run.py                 # sizes 1,000, 10,000 and 100,000
    python bench/run.py --sizes 1000,10000 --repeat 5

It builds its stores in a scratch folder (``--work``, about 3 GB at the
default sizes) and takes about ten minutes. It is not part of the test
suite and never runs in CI. Exit status 1 if a target is missed.
"""

from __future__ import annotations

import sys
from pathlib import Path


def main() -> int:
    # Run as a script, the repository root is not on the path yet.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench import suite

    return suite.main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
