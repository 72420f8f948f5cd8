"""Benchmark the checks a pull makes on what it fetches, beside the fetch itself.

Run from the repository root::

    python bench/bench_pull_check.py              # 1,000 new rows, 5 rounds
    python bench/bench_pull_check.py --rows 5000

A store of ``--rows`` rows built like ``machine good`` builds them (bench/
rowgen.py: 75% train, 20% traces, 5% rejected, one commit each) is pulled
into an empty store over a local path. Each round fetches into a fresh
quarantine (quarantine.py) and then runs machine's checks on it
(``pull._check_incoming``: object sizes from their headers, what each ref
names, every new commit's files: paths, modes, rows valid and canonical,
the secret scan). The baselines, in the same round: the quarantine's own
fetch (``git fetch`` with ``fetch.fsckObjects``, git's object checks) and a
plain ``git fetch`` of the same refs into an empty repository with no
checks at all. Results: bench/PULL_CHECK.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import rowgen  # noqa: E402
from bench import stores  # noqa: E402
from bench.corpus import Corpus  # noqa: E402
from bench.timing import median  # noqa: E402
from machine_git import hooks  # noqa: E402
from machine_git.store.store import Store  # noqa: E402
from machine_git.sync import incoming  # noqa: E402
from machine_git.sync import pull  # noqa: E402
from machine_git.sync import quarantine  # noqa: E402
from machine_git.sync import sharing as sync  # noqa: E402

RESULTS = ROOT / "bench" / "PULL_CHECK.md"


def plain_fetch(source: Path, scratch: Path) -> float:
    """``git fetch`` of main into an empty repository: no checks, no quarantine."""
    target = scratch / "plain.git"
    shutil.rmtree(target, ignore_errors=True)
    subprocess.run(["git", "init", "-q", "--bare", str(target)], check=True)
    start = time.perf_counter()
    subprocess.run(
        ["git", "-C", str(target), "fetch", "-q", "--no-tags", str(source),
         "+refs/heads/main:refs/heads/main"],
        check=True,
    )  # fmt: skip
    return time.perf_counter() - start


def one_round(
    here: Store, source: Path, scratch: Path
) -> tuple[float, float, float, float]:
    """(plain fetch, quarantine fetch, machine's checks, of which sizes), seconds."""
    plain = plain_fetch(source, scratch)
    start = time.perf_counter()
    with quarantine.fetch(here, "origin", str(source)) as fetched:
        fetched_at = time.perf_counter()
        assert fetched is not None
        assert not incoming.size_problems(incoming.new_objects(fetched.objects))
        sized_at = time.perf_counter()
        pull._check_incoming(here, "origin", fetched, audit=hooks.audit)
        checked_at = time.perf_counter()
    return plain, fetched_at - start, checked_at - sized_at, sized_at - fetched_at


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder)
        os.environ["MACHINE_DATA_DIR"] = str(scratch / "data")
        made = rowgen.make_rows(Corpus(), args.rows, seed=25)
        project, count = stores.build_store_only("there", scratch, made)
        from machine_git.core import paths

        source = paths.store_path(project)
        here = Store.create(scratch / "here")
        sync.add_remote(here, "origin", str(source))
        one_round(here, source, scratch)  # warm: imports, the scanner's patterns
        plain, fetch, check, sizes = zip(
            *(one_round(here, source, scratch) for _ in range(args.rounds)),
            strict=True,
        )
        start = time.perf_counter()
        result = sync.pull(here, "origin")
        whole = time.perf_counter() - start
        size = sum(f.stat().st_size for f in (source / "objects").rglob("*"))
    per = 1000 / count
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        "# The pull check's cost",
        "",
        f"Written by `python bench/bench_pull_check.py --rows {args.rows} "
        f"--rounds {args.rounds}` on {when}"
        f" ({platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}). Medians of "
        f"{args.rounds} rounds; {count:,} new rows in {count:,} commits, "
        f"{size / 1e6:.1f} MB of objects. Per 1,000 new rows:",
        "",
        "| step | ms per 1,000 rows | x plain fetch |",
        "|---|---:|---:|",
        f"| plain `git fetch` (no checks) | {median(plain) * 1000 * per:.0f} | 1.00 |",
        f"| quarantine fetch (`fetch.fsckObjects`) | {median(fetch) * 1000 * per:.0f}"
        f" | {median(fetch) / median(plain):.2f} |",
        f"| machine's checks (sizes, refs, files, secrets) | "
        f"{median(check) * 1000 * per:.0f} | {median(check) / median(plain):.2f} |",
        f"| of which: listing the new objects and their sizes | "
        f"{median(sizes) * 1000 * per:.0f} | {median(sizes) / median(plain):.2f} |",
        f"| the whole `pull` (fetch, check, keep, fast-forward) | "
        f"{whole * 1000 * per:.0f} | {whole / median(plain):.2f} |",
        "",
        f"The pull took {result.status} with +{result.added} rows.",
    ]
    text = "\n".join(lines) + "\n"
    RESULTS.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
