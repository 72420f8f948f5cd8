"""The secret scanner's section of bench/RESULTS.md, and its target.

``python bench/run.py`` measures it with everything else; ``python
bench/run.py --only secrets`` measures only this and puts the figures into
the RESULTS.md already there (its target row and its section), leaving the
store measurements as they were: they take ten minutes and do not change
when the scanner does.
"""

from __future__ import annotations

import os
import re
from datetime import UTC
from datetime import datetime
from pathlib import Path
from typing import Protocol

from bench import bench_secrets

TITLE = "Secret scanner"
TARGET = "the secret scanner costs <= 2 ms per 48 KB trace row, on one core"


class _Report(Protocol):
    def table(
        self, title: str, intro: str, head: list[str], body: list[list[str]]
    ) -> None: ...

    def target(self, what: str, measured: str, holds: bool) -> None: ...


def measure_into(report: _Report, alone: bool = False) -> None:
    """Measure the scanner; add its target and its table to ``report``."""
    m = bench_secrets.measure()
    per_row_ms = m.per_row_s * 1e3
    per_kb_us = m.per_row_s * 1e6 / (m.row_bytes / 1024)
    report.target(
        TARGET,
        f"{per_row_ms:.2f} ms (`redaction.redact_row` on a {m.row_bytes / 1024:.0f} "
        f"KB traces row: 48 KB of tool output in {m.records} records)",
        per_row_ms <= bench_secrets.TARGET_MS,
    )
    when = ""
    if alone:
        now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        load = os.getloadavg()[0]
        when = (
            f" Measured on its own with `python bench/run.py --only secrets` on "
            f"{now} (load average {load:.2f}); the rest of this file is from the "
            "full run above."
        )
    report.table(
        TITLE,
        "`redaction.redact_row` on one traces row as machine stores it "
        "(bench/bench_secrets.py: 20 bash calls with JSON arguments; their output "
        "is standard-library code, a package-lock, git log, pytest output and a "
        ".env with two secrets), best of 9 x 30 in CPU time of one process, so "
        "one core. The import is of `machine_git.secrets` alone, its "
        "dependencies already loaded; commands that do not scan never import it "
        f"(tests/cli/test_lazy.py).{when}",
        [
            "row",
            "per row",
            "per KB",
            "found",
            "import machine_git.secrets",
            "reference sum(range(100_000))",
        ],
        [
            [
                f"{m.records} records, {m.row_bytes / 1024:.1f} KB",
                f"{per_row_ms:.2f} ms",
                f"{per_kb_us:.1f} µs",
                ", ".join(f"{k} {n}" for k, n in sorted(m.found.items())),
                f"{m.import_us / 1000:.1f} ms",
                f"{m.reference_s * 1e3:.2f} ms",
            ]
        ],
    )


def splice(results: Path, targets: list[tuple[str, str, bool]], section: str) -> None:
    """Put this section's target row and table into an existing RESULTS.md."""
    text = results.read_text()
    rows = [f"| {t} | {m} | {'yes' if h else '**no**'} |" for t, m, h in targets]
    lines = text.split("\n")
    kept = [line for line in lines if not line.startswith(f"| {TARGET} |")]
    last = max(
        i
        for i, line in enumerate(kept)
        if line.startswith("| ")
        and (line.endswith("| yes |") or line.endswith("| **no** |"))
    )
    kept[last + 1 : last + 1] = rows
    table = [line for line in kept if line.endswith(("| yes |", "| **no** |"))]
    held = sum(line.endswith("| yes |") for line in table)
    text = "\n".join(kept)
    text = re.sub(r"\n\d+ of \d+ hold\.\n", f"\n{held} of {len(table)} hold.\n", text)
    pattern = re.compile(rf"\n## {TITLE}\n.*?(?=\n## |\Z)", re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _: "\n" + section.rstrip("\n") + "\n", text)
    elif "\n## Notes\n" in text:
        text = text.replace("\n## Notes\n", "\n" + section.rstrip() + "\n\n## Notes\n")
    else:
        text = text.rstrip("\n") + "\n\n" + section.rstrip() + "\n"
    results.write_text(text.rstrip("\n") + "\n")
