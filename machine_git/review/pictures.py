"""Images in the review pages: the ``<img>`` a row's message shows, and the
route that serves its bytes from the store.

A page names an image by the row that holds it, the revision it showed and
the image's sha256: ``/rows/<row>/images/<sha256>?at=<commit>``. The route
serves it only if that row, at that revision, names the image and the
revision's tree holds its file: one row and one blob read, whatever the
store's size, and nothing the request says is used as a file path (the sha256
is checked against 64 hex characters, then looked up in the git tree). The
media type is the one the row stored (PNG or JPEG only), with ``nosniff``; the
security middleware asks for the same token as for every page.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any
from typing import TypedDict
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response

from machine_git.core.errors import MachineError
from machine_git.history import revs
from machine_git.review.web import Site
from machine_git.rows import images
from machine_git.rows import rows

_SHA = re.compile(r"^[0-9a-f]{64}$")


class Picture(TypedDict):
    src: str
    width: int | None
    height: int | None
    alt: str


Pictures = Callable[[Mapping[str, Any]], list[Picture]]


def pictures(row_id: str, commit: str, read: images.Reader) -> Pictures:
    """What shows the images of one message or record of row ``row_id`` as it
    was at ``commit`` (``read`` reads that commit's tree)."""

    def shown(record: Mapping[str, Any]) -> list[Picture]:
        found = record.get(images.FIELD)
        if not isinstance(found, list):
            return []
        return [
            picture(row_id, commit, image, read)
            for image in found
            if isinstance(image, dict) and _SHA.match(str(image.get("sha256", "")))
        ]

    return shown


def picture(
    row_id: str, commit: str, image: Mapping[str, Any], read: images.Reader
) -> Picture:
    """One image as an ``<img>``: where, its size from its header, its alt text."""
    sha = str(image["sha256"])
    media_type = str(image.get("media_type", ""))
    data = images.load(sha, read)
    shape = images.dimensions(data, media_type) if data is not None else None
    return Picture(
        src=f"/rows/{quote(row_id)}/images/{sha}?at={quote(commit)}",
        width=shape[0] if shape else None,
        height=shape[1] if shape else None,
        alt=images.describe(image, lambda path: data),  # read once
    )


def changed(
    row_id: str,
    old: Mapping[str, Any] | None,
    new: Mapping[str, Any] | None,
    older: tuple[str, images.Reader] | None,
    newer: tuple[str, images.Reader],
) -> tuple[list[Picture], list[Picture]]:
    """The images a row gained (served at the newer revision) and lost (at the
    older one) between two revisions, as ``machine diff`` lists them."""
    before = {str(i["sha256"]): i for i in (images.references(old) if old else [])}
    after = {str(i["sha256"]): i for i in (images.references(new) if new else [])}
    gained = [
        picture(row_id, newer[0], image, newer[1])
        for sha, image in after.items()
        if sha not in before and _SHA.match(sha)
    ]
    lost = (
        [
            picture(row_id, older[0], image, older[1])
            for sha, image in before.items()
            if sha not in after and _SHA.match(sha)
        ]
        if older is not None
        else []
    )
    return gained, lost


def _missing(why: str) -> Response:
    return Response(f"{why}\n", status_code=404, media_type="text/plain")


def serve(site: Site, request: Request) -> Response:
    """An image's bytes, if the row names it at the revision asked for."""
    sha = str(request.path_params["sha"])
    row_id = str(request.path_params["row"])
    if not _SHA.match(sha):
        return Response(
            "bad image id: expected 64 hex characters\n",
            status_code=400,
            media_type="text/plain",
        )
    store = site.store()
    try:
        rows.check_id(row_id)
        commit = revs.resolve(store, request.query_params.get("at", "").strip() or None)
    except MachineError:
        return _missing("no such row or revision")
    snapshot = store.snapshot(commit)
    row = snapshot.row(row_id)
    named = [
        image
        for image in (images.references(row) if row is not None else [])
        if image.get("sha256") == sha
    ]
    if not named:
        return _missing("no row names that image at that revision")
    media_type = str(named[0].get("media_type"))
    data = images.load(sha, snapshot.read)
    if data is None or media_type not in images.MEDIA_TYPES:
        return _missing("that image is not in the store")
    return Response(
        data, media_type=media_type, headers={"x-content-type-options": "nosniff"}
    )
