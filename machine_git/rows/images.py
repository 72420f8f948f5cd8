"""The images a turn carried: stripped of metadata, stored once, by content.

A user pastes a screenshot, a tool reads a PNG: the model saw pixels, and a
row that says ``[image]`` in their place cannot reproduce the turn. A record
or chat message keeps its text (with an ``[image]`` placeholder where each
image was) and lists its images under ``images``, in order.

Like contexts (machine_git/rows/context.py), each distinct image is stored
once: ``images/<sha[0:2]>/<sha256>``, the sha256 of its stored bytes. A
stored row names it ``{"sha256", "media_type", "size"}``; in memory and in a
JSONL file written with ``--out`` an image is inline,
``{"media_type", "base64"}``. The store's write path (:func:`stored`) strips
the image's metadata (:func:`strip`), checks it against the size limit, and
turns it into the reference and the file. PNG and JPEG are kept; a reader
leaves other formats as the placeholder alone.

The secret scanner reads text, not pixels: a screenshot of a terminal with a
token in it is stored as it is. ``--no-images`` keeps the placeholder only.

Light on purpose: ``machine good`` loads it (only when a turn has images).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import struct
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Mapping
from typing import Any
from typing import TypeVar
from typing import cast

from machine_git.core.errors import RowValidationError
from machine_git.rows import rows

IMAGE_DIR = "images"
FIELD = "images"
PLACEHOLDER = "[image]"
MEDIA_TYPES = ("image/png", "image/jpeg")
SUFFIXES = {"image/png": ".png", "image/jpeg": ".jpg"}
SETTING = "image_max_bytes"
DEFAULT_MAX_BYTES = 5_000_000
"""The default size limit of one image, stripped, in bytes (``image_max_bytes``)."""
_SHA = re.compile(r"^[0-9a-f]{64}$")
R = TypeVar("R", bound=Mapping[str, Any])
Reader = Callable[[str], bytes | None]


class ImageTooLargeError(RowValidationError):
    """An image is over the project's size limit (nothing is written)."""


# -- metadata ------------------------------------------------------------------

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# Ancillary chunks that carry words, not pixels: text, EXIF, the time it was
# written. Colour chunks (gAMA, iCCP, sRGB ...) change how it looks and stay.
_PNG_DROPPED = frozenset({b"tEXt", b"zTXt", b"iTXt", b"eXIf", b"tIME"})
# JPEG markers dropped: APP1..APP13 and APP15 (EXIF, XMP, ICC, Photoshop IPTC,
# maker notes) and COM. APP0 (JFIF) and APP14 (Adobe: how to read the colour
# channels) say how to decode the pixels and carry nothing else.
_JPEG_DROPPED = frozenset({*range(0xE1, 0xEE), 0xEF, 0xFE})


def strip(data: bytes, media_type: str) -> bytes:
    """``data`` without its metadata (PNG text/EXIF chunks, JPEG APPn and COM).

    Raises RowValidationError if the bytes are not the format they claim.
    """
    if media_type == "image/png":
        return _strip_png(data)
    if media_type == "image/jpeg":
        return _strip_jpeg(data)
    raise RowValidationError(f"unsupported image type {media_type!r}")


def _strip_png(data: bytes) -> bytes:
    if not data.startswith(_PNG_SIGNATURE):
        raise RowValidationError("not a PNG image (bad signature)")
    out = [_PNG_SIGNATURE]
    at = len(_PNG_SIGNATURE)
    while at < len(data):
        if at + 12 > len(data):
            raise RowValidationError("a truncated PNG image")
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind = data[at + 4 : at + 8]
        end = at + 12 + length
        if end > len(data):
            raise RowValidationError("a truncated PNG image")
        if kind not in _PNG_DROPPED:
            out.append(data[at:end])
        at = end
        if kind == b"IEND":
            break  # whatever follows IEND is not the image
    return b"".join(out)


def _strip_jpeg(data: bytes) -> bytes:
    if not data.startswith(b"\xff\xd8"):
        raise RowValidationError("not a JPEG image (no start-of-image marker)")
    out = [b"\xff\xd8"]
    at = 2
    while at < len(data):
        if data[at] != 0xFF or at + 1 >= len(data):
            raise RowValidationError("a malformed JPEG image")
        marker = data[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker == 0xD9 or 0xD0 <= marker <= 0xD7 or marker == 0x01:
            out.append(data[at : at + 2])
            at += 2
            if marker == 0xD9:
                break
            continue
        if at + 4 > len(data):
            raise RowValidationError("a truncated JPEG image")
        (length,) = struct.unpack(">H", data[at + 2 : at + 4])
        end = at + 2 + length
        if length < 2 or end > len(data):
            raise RowValidationError("a truncated JPEG image")
        if marker not in _JPEG_DROPPED:
            out.append(data[at:end])
        at = end
        if marker == 0xDA:  # start of scan: entropy-coded data up to EOI
            out.append(data[at:])
            break
    return b"".join(out)


def dimensions(data: bytes, media_type: str) -> tuple[int, int] | None:
    """(width, height) from the image's header, or None if it cannot be read."""
    if media_type == "image/png":
        if data.startswith(_PNG_SIGNATURE) and data[12:16] == b"IHDR":
            width, height = struct.unpack(">II", data[16:24])
            return int(width), int(height)
        return None
    if media_type == "image/jpeg":
        at = 2
        while at + 9 < len(data) and data[at] == 0xFF:
            marker = data[at + 1]
            (length,) = struct.unpack(">H", data[at + 2 : at + 4])
            # SOF0..SOF15 but DHT (C4), JPG (C8) and DAC (CC): the frame header.
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                height, width = struct.unpack(">HH", data[at + 5 : at + 9])
                return int(width), int(height)
            at += 2 + length
        return None
    return None


# -- the store's files ---------------------------------------------------------


def path_of(sha: str) -> str:
    """Where image ``sha`` lives in the store's tree."""
    if not _SHA.match(sha):
        raise RowValidationError(f"bad image id {sha!r}: expected 64 hex characters")
    return f"{IMAGE_DIR}/{sha[:2]}/{sha}"


def sha_of_path(path: str) -> str | None:
    """The image id a tree path names, or None if it is not an image file."""
    parts = path.split("/")
    if len(parts) != 3 or parts[0] != IMAGE_DIR:
        return None
    sha = parts[2]
    return sha if _SHA.match(sha) and parts[1] == sha[:2] else None


def is_image_path(path: str) -> bool:
    """True for any path under ``images/`` (valid or not)."""
    return path.startswith(f"{IMAGE_DIR}/")


def _lists(row: Mapping[str, Any]) -> Iterator[list[Any]]:
    """Every ``images`` list of a row's messages or records."""
    for key in ("messages", "trajectory"):
        items = row.get(key)
        if isinstance(items, list):
            for item in items:
                if isinstance(item, dict) and isinstance(item.get(FIELD), list):
                    yield item[FIELD]
    for key in ("chosen", "rejected"):  # rejected rows' answers (DPO)
        items = row.get(key)
        if isinstance(items, list):
            for item in items:
                if isinstance(item, dict) and isinstance(item.get(FIELD), list):
                    yield item[FIELD]


def located(row: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each image of ``row`` with where it is (``trajectory[1]``), in order."""
    for key in ("messages", "trajectory", "chosen", "rejected"):
        items = row.get(key)
        if not isinstance(items, list):
            continue
        for index, item in enumerate(items):
            if isinstance(item, dict) and isinstance(item.get(FIELD), list):
                for image in item[FIELD]:
                    if isinstance(image, dict):
                        yield f"{key}[{index}]", image


def lines(row: Mapping[str, Any], read: Reader | None = None) -> list[str]:
    """One line per image of ``row``, for ``show``: what, where, how big."""
    return [f"{describe(image, read)} ({where})" for where, image in located(row)]


def has_images(row: Mapping[str, Any]) -> bool:
    """True if any message or record of ``row`` carries an image."""
    return any(True for _ in _lists(row))


def references(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The stored image references of ``row``, in order (inline ones left out)."""
    return [
        image
        for found in _lists(row)
        for image in found
        if isinstance(image, dict) and isinstance(image.get("sha256"), str)
    ]


def named(row: Mapping[str, Any]) -> set[str]:
    """The ids of the images ``row`` names."""
    return {image["sha256"] for image in references(row)}


def _map(row: R, change: Callable[[dict[str, Any]], dict[str, Any] | None]) -> R:
    """``row`` with each message/record holding images passed through ``change``
    (which returns the new item, or None to keep it)."""
    out: dict[str, Any] = dict(row)
    for key in ("messages", "trajectory", "chosen", "rejected"):
        items = row.get(key)
        if not isinstance(items, list):
            continue
        new = []
        touched = False
        for item in items:
            if isinstance(item, dict) and isinstance(item.get(FIELD), list):
                changed = change(item)
                if changed is not None:
                    touched = True
                    new.append(changed)
                    continue
            new.append(item)
        if touched:
            out[key] = new
    return cast("R", out)


def without(row: R) -> R:
    """``row`` with its images left out; the ``[image]`` placeholders stay
    (``--no-images``)."""
    return _map(row, lambda item: {k: v for k, v in item.items() if k != FIELD})


def decoded(image: Mapping[str, Any]) -> bytes:
    """The bytes of an inline image; RowValidationError if not base64."""
    try:
        return base64.b64decode(str(image.get("base64", "")), validate=True)
    except (binascii.Error, ValueError):
        raise RowValidationError("an inline image is not valid base64") from None


def stored(
    row: R, present: Callable[[str], bool] | None = None, limit: int | None = None
) -> tuple[R, dict[str, bytes | None]]:
    """``row`` as the store keeps it, and the image files to write with it.

    Each inline image is stripped of its metadata, checked against ``limit``
    (bytes, after stripping), and becomes its reference; its file is returned
    unless ``present`` says the store has it already.
    """
    files: dict[str, bytes | None] = {}
    most = DEFAULT_MAX_BYTES if limit is None else limit  # (the store's setting)

    def store_one(image: Any) -> Any:
        if not isinstance(image, dict) or "base64" not in image:
            return image
        media_type = str(image.get("media_type"))
        data = strip(decoded(image), media_type)
        _check_size(len(data), most)
        sha = hashlib.sha256(data).hexdigest()
        path = path_of(sha)
        if path not in files and not (present is not None and present(path)):
            files[path] = data
        return {"sha256": sha, "media_type": media_type, "size": len(data)}

    def change(item: dict[str, Any]) -> dict[str, Any] | None:
        if not any(isinstance(i, dict) and "base64" in i for i in item[FIELD]):
            return None
        return {**item, FIELD: [store_one(i) for i in item[FIELD]]}

    return _map(row, change), files


def map_images(row: R, change: Callable[[Any], Any]) -> R:
    """``row`` with each image passed through ``change``."""
    return _map(row, lambda item: {**item, FIELD: [change(i) for i in item[FIELD]]})


def cleaned(row: R, limit: int | None = None) -> R:
    """``row`` with each inline image stripped of its metadata and checked
    against ``limit`` (a JSONL file written with ``--out``), still inline."""

    def clean(image: Any) -> Any:
        if not isinstance(image, dict) or "base64" not in image:
            return image
        media_type = str(image.get("media_type"))
        data = strip(decoded(image), media_type)
        _check_size(len(data), limit)
        return {"media_type": media_type, "base64": base64.b64encode(data).decode()}

    return map_images(row, clean)


def check_size(size: int, limit: int | None) -> None:
    """ImageTooLargeError if an image of ``size`` bytes is over ``limit``."""
    _check_size(size, limit)


def _check_size(size: int, limit: int | None) -> None:
    most = DEFAULT_MAX_BYTES if limit is None else limit
    if size > most:
        raise ImageTooLargeError(
            f"an image of {size:,} bytes is over the limit of {most:,} "
            f"(setting {SETTING}: machine data --image-max-bytes N; "
            "or tag with --no-images)"
        )


def inline(row: R, read: Reader) -> R:
    """``row`` with each stored image's bytes put back (base64), for exports.

    A reference whose file is missing stays a reference (``machine validate``
    reports it; an export refuses it).
    """

    def put_back(image: Any) -> Any:
        if not isinstance(image, dict) or not isinstance(image.get("sha256"), str):
            return image
        data = read(path_of(image["sha256"]))
        if data is None:
            return image
        return {
            "media_type": image["media_type"],
            "base64": base64.b64encode(data).decode("ascii"),
        }

    return _map(row, lambda item: {**item, FIELD: [put_back(i) for i in item[FIELD]]})


def load(sha: str, read: Reader) -> bytes | None:
    """Image ``sha``'s bytes from the store, or None if it is not there."""
    return read(path_of(sha)) if _SHA.match(sha) else None


def describe(image: Mapping[str, Any], read: Reader | None = None) -> str:
    """One line for people: ``image 3f2a9c01b2d4 image/png 1,234 bytes 2x2``."""
    sha = str(image.get("sha256", ""))
    media_type = str(image.get("media_type", "?"))
    size = image.get("size")
    data = load(sha, read) if read is not None and sha else None
    if data is None and "base64" in image:
        data = decoded(image)
        size = len(data)
    shape = dimensions(data, media_type) if data is not None else None
    where = sha[:12] if sha else "inline"
    bytes_ = f"{size:,}" if isinstance(size, int) else "?"
    line = f"image {where} {media_type} {bytes_} bytes"
    if shape is not None:
        line += f" {shape[0]}x{shape[1]}"
    elif sha and data is None and read is not None:
        line += " (missing)"
    return line


# -- checks: the store's write path, machine validate, gc ---------------------


def file_problems(path: str, data: bytes) -> list[str]:
    """Why file ``path`` with bytes ``data`` is not a valid image file."""
    sha = sha_of_path(path)
    if sha is None:
        return ["not an image path (images/ab/<64 hex>)"]
    actual = hashlib.sha256(data).hexdigest()
    if actual != sha:
        return [f"its content hashes to {actual[:12]}, not its name"]
    return []


def reference_problem(row: Any, exists: Callable[[str], bool]) -> str | None:
    """Why a stored row's image references are wrong, or None."""
    if not isinstance(row, dict):
        return None
    for found in _lists(row):
        for image in found:
            if isinstance(image, dict) and "base64" in image:
                return "a stored row names its images by sha256, not inline"
            sha = image.get("sha256") if isinstance(image, dict) else None
            if isinstance(sha, str) and _SHA.match(sha) and not exists(path_of(sha)):
                return f"its image {sha[:12]} is not in the store"
    return None


def stored_ids(tree: Any) -> set[str]:
    """The ids of every image in a commit's git tree (empty if none)."""
    from machine_git.rows import context

    return context.addressed_ids(tree, IMAGE_DIR, sha_of_path)


def check_change(
    files: Mapping[str, bytes | None], there: Callable[[str], bool]
) -> None:
    """The store's gate for images in one commit; raises on the first problem.

    Image files must be named by their hash; rows must name images the
    commit's tree holds (``there``).
    """
    for path, data in files.items():
        if data is None:
            continue
        if is_image_path(path):
            problems = file_problems(path, data)
            if problems:
                raise RowValidationError(f"{path}: {problems[0]}")
        elif rows.id_of_path(path) is not None and b'"images"' in data:
            from machine_git.core import jsonio

            try:
                row = jsonio.loads(data)
            except ValueError:
                continue  # the row check names it
            problem = reference_problem(row, there)
            if problem is not None:
                raise RowValidationError(f"{path}: {problem}")
