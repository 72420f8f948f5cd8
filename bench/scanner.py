"""The secret scanner's section of bench/RESULTS.md, and its target.

``python bench/run.py`` measures it with everything else; ``python
bench/run.py --only secrets`` measures only this, without building any
store, and puts its table and target into the RESULTS.md already there.
"""

from __future__ import annotations

from typing import Protocol

from bench import bench_secret_engines
from bench import bench_secrets

TITLE = "Secret scanner"
LAYERS_TITLE = "Secret scanner: the engine and machine's own layer"
# the two layers alone and together, as machine runs them
LAYERS = (
    ("machine-context", "machine's own layer alone"),
    ("kingfisher-in-machine", "the engine alone (kingfisher-secret-scanner)"),
    ("machine", "both (what machine runs)"),
)
TARGET = "the secret scanner costs <= 2 ms per 48 KB trace row, on one core"


class _Report(Protocol):
    def table(
        self, title: str, intro: str, head: list[str], body: list[list[str]]
    ) -> None: ...

    def target(self, what: str, measured: str, holds: bool) -> None: ...


def measure_into(report: _Report) -> None:
    """Measure the scanner; add its target and its tables to ``report``."""
    layers_into(report)
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


def layers_into(report: _Report) -> None:
    """The comparison table: each layer alone and both, on both test corpora."""
    body: list[list[str]] = []
    for corpus in bench_secret_engines.corpora():
        n, nl = len(corpus.secrets), len(corpus.lookalikes)
        for name, label in LAYERS:
            engine = bench_secret_engines.ENGINES[name]()
            _, whole, _ = bench_secret_engines.recall(engine, corpus)
            flags = bench_secret_engines.flagged(engine, corpus)
            ms = bench_secret_engines.speed_ms(name, engine)
            body.append(
                [
                    corpus.name,
                    label,
                    f"{whole}/{n} ({whole / n:.1%})",
                    f"{len(flags)}/{nl} ({len(flags) / nl:.1%})",
                    f"{ms:.2f} ms",
                ]
            )
    report.table(
        LAYERS_TITLE,
        "Secrets found whole (every character redacted) and public look-alikes "
        "redacted (any part), on the corpus of issue 28 "
        "(tests/secrets/secrets_agents.py: what agents leak, in context) and the "
        "older one of issue 15; CPU time per 48 KB of trace row on one core "
        "(bench/bench_secret_engines.py, best of 7 x 10). machine's own layer: "
        "its context rules and the provider shapes no engine rule finds; the "
        "engine: Kingfisher's built-in rules (betterleaks' and Google Veles') "
        "as machine runs them, one call per row.",
        [
            "corpus",
            "scanner",
            "secrets found whole",
            "look-alikes redacted",
            "per 48 KB row",
        ],
        body,
    )
