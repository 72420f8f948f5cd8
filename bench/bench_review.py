"""Benchmark machine review's row index against reading the whole store.

Run from the repository root (needs the ``ui`` extra)::

    python bench/bench_review.py [ROWS ...]   # default: 10000

For each size it builds a store of generated rows (bench/rowgen.py, the mix of
bench/run.py), then measures, interleaved round by round (bench/timing.py):

- baseline: reading and parsing every row blob (what any whole-store read
  such as ``machine export`` costs);
- the Browse index built from nothing (the first page after start-up);
- the index brought up to date after one more tag (every later page), which
  should not grow with the store;
- a Browse page with a search, and the Queue, through Starlette's test client
  with the index warm;
- the memory one index holds.

It prints medians and the paired ratios against the baseline.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import tracemalloc
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import rowgen  # noqa: E402
from bench import stores  # noqa: E402
from bench import timing  # noqa: E402
from bench.corpus import Corpus  # noqa: E402
from machine_git.core import jsonio  # noqa: E402
from machine_git.core import paths  # noqa: E402
from machine_git.review.index import Cache  # noqa: E402
from machine_git.store.store import Change  # noqa: E402
from machine_git.store.store import Snapshot  # noqa: E402
from machine_git.store.store import Store  # noqa: E402

ROUNDS = 5


def measure(n: int, work: Path, corpus: Corpus) -> None:
    project, count = stores.build_store_only(
        f"review-{n}", work, rowgen.make_rows(corpus, n, seed=n)
    )
    store = Store.open(paths.store_path(project))
    head = store.head
    assert head is not None

    def read_all() -> None:
        for _, data in store.iter_row_blobs(head):
            jsonio.loads(data)

    def build() -> None:
        Cache().at(store, head)

    warm = Cache()
    warm.at(store, head)
    extra = iter(rowgen.make_rows(corpus, 10_000, seed=n + 1, first=n))

    def one_more_tag() -> float:
        made = next(extra)
        store.write(partial(_change, made=made))
        newest = store.head
        assert newest is not None
        return timing.timer(lambda: warm.at(store, newest))()

    results = timing.rounds(
        {
            "read every row": timing.timer(read_all),
            "index, new": timing.timer(build),
            "index, +1 tag": one_more_tag,
        },
        ROUNDS,
    )
    base = results["read every row"]
    tracemalloc.start()
    kept = Cache()
    kept.at(store, head)
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    print(f"\n{count:,} rows ({ROUNDS} rounds, medians; ratio vs reading every row)")
    for name, times in results.items():
        ratio = timing.paired(times, base)
        print(f"  {name:<16} {timing.ms(timing.median(times)):>10}   x{ratio:.3f}")
    print(f"  index memory     {held / 1e6:7.1f} MB  (allocated, tracemalloc)")
    del kept
    _pages(store)


def _change(snap: Snapshot, made: rowgen.Made) -> Change:
    return made.change


def _pages(store: Store) -> None:
    from starlette.testclient import TestClient

    from machine_git.review.app import create_app
    from machine_git.review.security import cookie_name

    app = create_app(store.path, token="t", port=1, csrf="c")
    client = TestClient(app, base_url="http://127.0.0.1:1")
    client.cookies.set(cookie_name(1), "t")
    for path in ("/browse?q=error", "/queue", "/browse?kind=traces&page=3"):
        client.get(path)  # warm
        times = []
        for _ in range(ROUNDS):
            started = time.perf_counter()
            assert client.get(path).status_code == 200
            times.append(time.perf_counter() - started)
        print(f"  GET {path:<28} {timing.ms(timing.median(times)):>10}")


def main() -> int:
    sizes = [int(a) for a in sys.argv[1:]] or [10_000]
    corpus = Corpus()
    with tempfile.TemporaryDirectory(prefix="machine-bench-review-") as tmp:
        os.environ["MACHINE_DATA_DIR"] = str(Path(tmp) / "data")
        for n in sizes:
            measure(n, Path(tmp), corpus)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
