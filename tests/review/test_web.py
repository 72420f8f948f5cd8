from __future__ import annotations

from pathlib import Path

from machine_git.review.web import Site
from machine_git.review.web import back_to
from machine_git.store.store import Store
from tests.conftest import git


def test_warming_builds_the_heads_index(store: Store) -> None:
    site = Site(location=store.path, project="p", csrf="c")
    head = git(store.path, "rev-parse", "HEAD").strip()
    assert not site.cache.holds(head)
    site.warm()
    assert site.cache.holds(head)


def test_warming_a_missing_store_leaves_it_to_the_first_page(tmp_path: Path) -> None:
    site = Site(location=tmp_path / "nothing", project="p", csrf="c")
    site.warm()  # no exception: the page will say "no store at ..."


def test_only_local_paths_are_returned_to() -> None:
    assert back_to("/queue?id=1", "/") == "/queue?id=1"
    for elsewhere in ("//evil.example/", "https://evil.example/", "\\\\evil", ""):
        assert back_to(elsewhere, "/queue") == "/queue"
