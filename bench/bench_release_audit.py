"""Benchmark the release audit on a store with a long history.

Run from the repository root::

    python bench/bench_release_audit.py            # 100,000 commits
    python bench/bench_release_audit.py --commits 10000

Every release command (and ``lineage BR-...``, ``validate --store``) audits
the history: a full audit walks every commit once. The baseline is git's own
walk of the same history in the same run (``git rev-list --count HEAD``); the
full audit should stay within a small factor of it, and the remembered audit
(``release-audit.json``) should make the next read cost about one commit.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from machine_git.releases import audit  # noqa: E402
from machine_git.store.store import WORK  # noqa: E402
from machine_git.store.store import Change  # noqa: E402
from machine_git.store.store import Store  # noqa: E402


def build(where: Path, commits: int) -> Store:
    """A store of ``commits`` commits, one row file each (git fast-import)."""
    store = Store.create(where)
    parent = store.head
    assert parent is not None
    lines = []
    for i in range(commits):
        # Spread over the fan-out like real ids (a sequential name would
        # pile every row into one folder and make each tree grow).
        name = hashlib.sha1(str(i).encode()).hexdigest()[:12]
        data = f'{{"i": {i}}}\n'
        lines += [
            "commit refs/heads/main",
            f"committer m <m@x> {1_700_000_000 + i} +0000",
            "data 4",
            "tag",
            f"from {parent.id}" if i == 0 else "",
            f"M 100644 inline rows/{name[:2]}/{name[2:4]}/{name}.json",
            f"data {len(data)}",
            data,
        ]
    stream = "\n".join(line for line in lines if line != "") + "\n"
    subprocess.run(
        ["git", "-C", str(where), "fast-import", "--quiet", "--force"],
        input=stream.encode(),
        check=True,
    )
    return Store.open(where)


def seconds(work: Callable[[], object]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=100_000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        store = build(Path(scratch) / "store", args.commits)
        head = store.head
        assert head is not None

        def git_walk() -> None:
            subprocess.run(
                ["git", "-C", str(store.path), "rev-list", "--count", "HEAD"],
                check=True,
                capture_output=True,
            )

        base = min(seconds(git_walk) for _ in range(3))
        full = min(
            seconds(lambda: audit.verify(store.repo, [head.id])) for _ in range(3)
        )
        (store.path / WORK / audit.CACHE).unlink(missing_ok=True)
        audit.of_store(store)  # remembered at this tip
        store.write(lambda snap: Change("one more", {"notes.txt": b"x\n"}))
        again = seconds(lambda: audit.of_store(store))
    print(f"commits                  {args.commits}")
    print(f"git rev-list --count     {base * 1000:9.1f} ms (baseline)")
    print(f"full audit               {full * 1000:9.1f} ms ({full / base:.1f}x)")
    print(f"remembered, +1 commit    {again * 1000:9.2f} ms ({again / base:.4f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
