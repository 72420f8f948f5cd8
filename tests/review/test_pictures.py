"""Images in machine review: served from the store by hash, shown inline."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pygit2
from starlette.testclient import TestClient

from machine_git.core import paths
from machine_git.review.security import CSP
from machine_git.rows import images
from machine_git.store.store import Store
from tests.review.conftest import BASE
from tests.review.conftest import client_for
from tests.review.conftest import machine
from tests.review.conftest import session


def tagged_image(project: Path) -> tuple[Store, str, dict[str, object]]:
    """The real Pi session with an ``@file`` PNG, tagged good: its store, row
    id and the row's one image reference."""
    machine(project, "good", "--session", session("image"))
    store = Store.open(paths.store_path(project))
    row_id = machine(project, "tagged").split()[0]
    row = store.read_row(row_id)
    assert row is not None
    (reference,) = images.references(row)
    return store, row_id, reference


def test_the_row_page_shows_the_image_and_the_route_serves_its_bytes(
    project: Path,
) -> None:
    store, row_id, reference = tagged_image(project)
    sha = str(reference["sha256"])
    client = client_for(store)
    page = client.get(f"/rows/{row_id}")
    assert page.status_code == 200
    head = str(store.head.id) if store.head is not None else ""
    src = f"/rows/{row_id}/images/{sha}?at={head}"
    data = store.snapshot().read(images.path_of(sha))
    assert data is not None
    width, height = images.dimensions(data, "image/png") or (0, 0)
    tag = re.search(r"<img class=\"image\"[^>]*>", page.text)
    assert tag is not None
    assert f'src="{src.replace("&", "&amp;")}"' in tag.group(0)
    assert f'width="{width}" height="{height}"' in tag.group(0)
    assert f"image {sha[:12]} image/png {reference['size']:,} bytes" in tag.group(0)
    assert page.headers["content-security-policy"] == CSP
    assert "img-src 'self';" in CSP and "data:" not in CSP

    served = client.get(src)
    assert served.status_code == 200
    assert served.content == data
    assert hashlib.sha256(served.content).hexdigest() == sha
    assert served.headers["content-type"] == "image/png"
    assert served.headers["x-content-type-options"] == "nosniff"


def test_the_queue_card_shows_an_observed_run_s_image(project: Path) -> None:
    machine(project, "observe", "--session", session("image"))
    store = Store.open(paths.store_path(project))
    client = client_for(store)
    queue = client.get("/queue")
    assert queue.status_code == 200
    head = str(store.head.id) if store.head is not None else ""
    found = re.findall(r'<img class="image" src="([^"]+)"', queue.text)
    assert len(found) == 1 and found[0].endswith(f"?at={head}")
    sha = found[0].split("/images/")[1].split("?")[0]
    served = client.get(found[0].replace("&amp;", "&"))
    assert served.status_code == 200
    assert served.content == store.snapshot().read(images.path_of(sha))


def test_the_route_refuses_without_the_token_a_bad_hash_and_an_unknown_image(
    project: Path,
) -> None:
    store, row_id, reference = tagged_image(project)
    sha = str(reference["sha256"])
    stranger = TestClient(client_for(store).app, base_url=BASE)
    refused = stranger.get(f"/rows/{row_id}/images/{sha}")
    assert refused.status_code == 403
    assert refused.content != store.snapshot().read(images.path_of(sha))

    client = client_for(store)
    for bad in (sha.upper(), sha[:63], "..%2F..%2Fconfig", f"{sha[:62]}zz"):
        response = client.get(f"/rows/{row_id}/images/{bad}")
        assert response.status_code in (400, 404), bad
        assert response.headers["content-type"].startswith("text/")
    assert client.get(f"/rows/{row_id}/images/{sha[:63]}g").status_code == 400
    unknown = hashlib.sha256(b"no such image").hexdigest()
    assert client.get(f"/rows/{row_id}/images/{unknown}").status_code == 404
    # A row that does not name it, a revision before it was tagged.
    machine(project, "good", "--session", session("basic"))
    other = next(
        r for r in machine(project, "tagged").split("\n") if not r.startswith(row_id)
    ).split()[0]
    assert client.get(f"/rows/{other}/images/{sha}").status_code == 404
    assert client.get(f"/rows/{row_id}/images/{sha}?at=HEAD~1").status_code == 200
    assert client.get(f"/rows/{row_id}/images/{sha}?at=nonsense").status_code == 404
    assert client.get(f"/rows/{row_id[:6]}/images/{sha}").status_code == 404


def test_an_image_named_but_missing_from_the_tree_is_a_404(project: Path) -> None:
    store, row_id, reference = tagged_image(project)
    sha = str(reference["sha256"])
    # Remove the image file from the tree, keeping the row (a damaged store).
    repo = store.repo
    head = store.head
    assert head is not None
    builder = repo.TreeBuilder(head.tree)
    folder = head.tree[images.IMAGE_DIR].peel(pygit2.Tree)
    fan = repo.TreeBuilder(folder[sha[:2]].peel(pygit2.Tree))
    fan.remove(sha)
    shard = repo.TreeBuilder(folder)
    shard.insert(sha[:2], fan.write(), 0o040000)
    builder.insert(images.IMAGE_DIR, shard.write(), 0o040000)
    damaged = repo.create_commit(
        None, head.author, head.committer, "damage", builder.write(), [head.id]
    )
    response = client_for(store).get(f"/rows/{row_id}/images/{sha}?at={damaged}")
    assert response.status_code == 404
    assert response.text == "that image is not in the store\n"


def test_the_diff_shows_the_images_a_row_gained_at_the_newer_revision(
    project: Path,
) -> None:
    store, row_id, reference = tagged_image(project)
    sha = str(reference["sha256"])
    client = client_for(store)
    head = store.head
    assert head is not None
    page = client.get("/diff")  # what the last commit changed: the row, added
    assert page.status_code == 200
    found = re.findall(r'<img class="image" src="([^"]+)"', page.text)
    assert found == [f"/rows/{row_id}/images/{sha}?at={head.id}"]
    assert "images added" in page.text and "images removed" not in page.text
    served = client.get(found[0])
    assert served.content == store.snapshot().read(images.path_of(sha))
    # Removed since: the same image, lost, served at the revision that had it.
    machine(project, "rm", row_id)
    after = client.get(f"/diff?a={head.id}&b=HEAD")
    lost = re.findall(r'<img class="image" src="([^"]+)"', after.text)
    assert lost == [f"/rows/{row_id}/images/{sha}?at={head.id}"]
    assert "images removed" in after.text
    assert client.get(lost[0]).status_code == 200
