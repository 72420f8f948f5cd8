"""The secret scanner's section of bench/RESULTS.md, and its target.

``python bench/run.py`` measures it with everything else; ``python
bench/run.py --only secrets`` measures only this, without building any
store, and puts its table and target into the RESULTS.md already there.
"""

from __future__ import annotations

from typing import Protocol

from bench import bench_secrets

TITLE = "Secret scanner"
TARGET = "the secret scanner costs <= 2 ms per 48 KB trace row, on one core"


class _Report(Protocol):
    def table(
        self, title: str, intro: str, head: list[str], body: list[list[str]]
    ) -> None: ...

    def target(self, what: str, measured: str, holds: bool) -> None: ...


def measure_into(report: _Report) -> None:
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
    report.table(
        TITLE,
        "`redaction.redact_row` on one traces row as machine stores it "
        "(bench/bench_secrets.py: 20 bash calls with JSON arguments; their output "
        "is standard-library code, a package-lock, git log, pytest output and a "
        ".env with two secrets), best of 9 x 30 in CPU time of one process, so "
        "one core. The import is of `machine_git.secrets` alone, its "
        "dependencies already loaded; commands that do not scan never import it "
        "(tests/cli/test_lazy.py).",
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
