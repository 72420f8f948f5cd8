"""Benchmark machine review's row index against reading the whole store.

Run from the repository root (needs the ``ui`` extra)::

    python bench/bench_review.py [ROWS ...]   # default: 1000 20000 100000

For each size it builds a store of generated rows (bench/rowgen.py, the mix of
bench/run.py, with one row in ten an observed run: 10,000 at 100,000 rows),
one commit each, then measures, interleaved round by round (bench/timing.py):

- baseline: reading and parsing every row blob (what any whole-store read
  such as ``machine export`` costs);
- the Browse index built from nothing (the first page after start-up);
- the index brought up to date after one more tag (every later page), which
  should not grow with the store;
- the Queue's order (machine observed's: one walk of history) and the
  full-text index (SQLite FTS5) built from nothing, and brought up to date
  after one more tag;
- every page through Starlette's test client with the indexes warm: the
  Queue (first page, a page deep in the list, sorted by date, filtered, a text
  filter), Browse (plain, searches in tool arguments and a phrase), a row, a
  diff, the head poll; and a search alone;
- the memory one index holds, and the server's peak RSS.

It prints medians and the paired ratios against the baseline.
"""

from __future__ import annotations

import os
import random
import resource
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Iterator
from datetime import timedelta
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
from machine_git.review import search  # noqa: E402
from machine_git.review.index import Cache  # noqa: E402
from machine_git.rows import rows  # noqa: E402
from machine_git.secrets import redaction  # noqa: E402
from machine_git.store.layout import WORK  # noqa: E402
from machine_git.store.store import Change  # noqa: E402
from machine_git.store.store import Snapshot  # noqa: E402
from machine_git.store.store import Store  # noqa: E402

ROUNDS = 5


def measure(n: int, work: Path, corpus: Corpus) -> None:
    project, count = stores.build_store_only(
        f"review-{n}", work, with_observed(corpus, n, seed=n)
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

    def order() -> None:
        Cache().recorded(store, head)

    def fts_new() -> None:
        target = store.path / WORK / search.FILE
        for extra_file in (target, *target.parent.glob(f"{search.FILE}-*")):
            extra_file.unlink(missing_ok=True)
        index = search.Index(store.path)
        index.update(store, head)
        index.close()

    kept_fts = search.Index(store.path)
    kept_fts.update(store, head)

    def fts_one_more() -> float:
        newest = store.head
        assert newest is not None
        return timing.timer(lambda: kept_fts.update(store, newest))()

    rounds = 3 if n >= 50_000 else ROUNDS  # each round reads the whole store
    results = timing.rounds(
        {
            "read every row": timing.timer(read_all),
            "index, new": timing.timer(build),
            "index, +1 tag": one_more_tag,
            "queue order, new": timing.timer(order),
        },
        rounds,
    )
    fts = timing.rounds(
        {"search index, new": timing.timer(fts_new), "search, +1 tag": fts_one_more},
        2 if n >= 50_000 else ROUNDS,
    )
    results.update(fts)
    base = results["read every row"]
    tracemalloc.start()
    kept = Cache()
    kept.at(store, head)
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    print(f"\n{count:,} rows ({rounds} rounds, medians; ratio vs reading every row)")
    for name, times in results.items():
        ratio = timing.median(times) / timing.median(base)
        print(f"  {name:<18} {timing.ms(timing.median(times)):>10}   x{ratio:.3f}")
    print(f"  index memory     {held / 1e6:7.1f} MB  (allocated, tracemalloc)")
    del kept
    _pages(store)


def _change(snap: Snapshot, made: rowgen.Made) -> Change:
    return made.change


def with_observed(corpus: Corpus, count: int, seed: int) -> Iterator[rowgen.Made]:
    """The bench mix, with every tenth row an observed run (a whole trajectory)."""
    rng = random.Random(seed)
    for n, made in enumerate(rowgen.make_rows(corpus, count, seed=seed)):
        if n % 10 != 0:
            yield made
            continue
        s = rowgen.spec(corpus, rng, n, with_tools=True)
        row = rows.build(rowgen.turn(s), label="observed", created_at=s.stamp(120))
        row, _ = redaction.redact_row(row)
        change = rowgen.tag_change(row)
        yield rowgen.Made(
            id=row["id"],
            kind=row["kind"],
            data=change.files[rows.row_path(row["id"])] or b"",
            line=jsonio.line(row),
            change=change,
            when=s.moment + timedelta(seconds=120),
        )


def _pages(store: Store) -> None:
    from starlette.testclient import TestClient

    from machine_git.review.app import create_app
    from machine_git.review.security import cookie_name

    app = create_app(store.path, token="t", port=1, csrf="c")
    client = TestClient(app, base_url="http://127.0.0.1:1")
    client.cookies.set(cookie_name(1), "t")
    head = store.head
    assert head is not None
    some_row = next(iter(store.iter_row_blobs(head)))[0].rsplit("/", 1)[-1][:-5]
    paths = (
        "/queue",
        "/queue?page=40",
        "/queue?sort=made",
        "/queue?host=pi&from=2026-01-10",
        "/queue?q=error",
        "/queue/list",
        "/browse",
        "/browse?q=error",
        "/browse?q=args:src",
        '/browse?q="the test"',
        "/browse?kind=traces&page=3",
        f"/rows/{some_row}",
        "/diff",
        "/api/head",
    )
    worst = 0.0
    for path in paths:
        client.get(path)  # warm
        times = []
        for _ in range(ROUNDS):
            started = time.perf_counter()
            answer = client.get(path)
            assert answer.status_code == 200, (path, answer.text[:300])
            times.append(time.perf_counter() - started)
        worst = max(worst, timing.median(times))
        print(f"  GET {path:<34} {timing.ms(timing.median(times)):>10}")
    print(f"  slowest page                           {timing.ms(worst):>10}")
    index = search.Index(store.path)
    times = []
    for query in ("error", "args:src", '"the test"', "tool:bash result:error"):
        index.ids(query)  # warm
        started = time.perf_counter()
        index.ids(query)
        times.append(time.perf_counter() - started)
    print(f"  a search alone (4 queries, slowest)    {timing.ms(max(times)):>10}")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  peak RSS of this process                {rss:7.0f} MB")


def main() -> int:
    sizes = [int(a) for a in sys.argv[1:]] or [1_000, 20_000, 100_000]
    corpus = Corpus()
    with tempfile.TemporaryDirectory(prefix="machine-bench-review-") as tmp:
        os.environ["MACHINE_DATA_DIR"] = str(Path(tmp) / "data")
        for n in sizes:
            measure(n, Path(tmp), corpus)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
