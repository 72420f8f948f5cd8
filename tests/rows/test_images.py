"""A turn's images: metadata stripped, stored once by content, dropped by gc.

Rows are tagged through the real CLI from the real ``image`` Pi session
(tests/fixtures/pi/sessions/image.jsonl: a 2x2 PNG attached with ``@file``)
and read back through git. Pillow decodes what the stripper leaves, as an
oracle independent of machine's own header reading.
"""

from __future__ import annotations

import base64
import hashlib
import io
import struct
import zlib
from pathlib import Path
from typing import Any

import orjson
import pytest
from PIL import Image

from machine_git.core import paths
from machine_git.core.errors import RowValidationError
from machine_git.rows import images
from machine_git.rows import rows
from machine_git.store import settings
from machine_git.store.store import Store
from tests.conftest import PI_SESSIONS
from tests.conftest import Run
from tests.conftest import fixture_lines
from tests.conftest import git
from tests.conftest import install_session


def fixture_png() -> bytes:
    """The PNG the fixture's user attached (read without machine)."""
    for line in fixture_lines("image"):
        for block in (line.get("message") or {}).get("content") or []:
            if isinstance(block, dict) and block.get("type") == "image":
                return base64.b64decode(block["data"])
    raise LookupError("no image in the fixture")


def chunk(kind: bytes, body: bytes) -> bytes:
    crc = zlib.crc32(kind + body) & 0xFFFFFFFF
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)


def with_text_chunks(png: bytes) -> bytes:
    """``png`` with a tEXt, an iTXt and a tIME chunk after its header."""
    head, rest = png[:33], png[33:]  # signature + IHDR
    extra = (
        chunk(b"tEXt", b"Comment\x00/home/alice/secret-project/shot.png")
        + chunk(b"iTXt", b"Author\x00\x00\x00\x00\x00alice@example.com")
        + chunk(b"tIME", b"\x07\xea\x0b\x1d\x13\x04\x31")
    )
    return head + extra + rest


def jpeg_with_exif() -> bytes:
    """A real JPEG (Pillow) carrying EXIF (APP1) and a comment (COM)."""
    exif = Image.Exif()
    exif[0x010E] = "GPS 48.85N 2.35E, /Users/alice/Desktop"  # ImageDescription
    out = io.BytesIO()
    Image.new("RGB", (3, 5), (200, 10, 10)).save(
        out, "JPEG", exif=exif, comment=b"taken at home"
    )
    return out.getvalue()


def store_of(project: Path) -> Path:
    return paths.store_path(project)


def files(project: Path, prefix: str) -> list[str]:
    listed = git(store_of(project), "ls-tree", "-r", "--name-only", "HEAD").split()
    return [f for f in listed if f.startswith(prefix)]


def stored_row(project: Path, row_id: str) -> dict[str, Any]:
    value = orjson.loads(
        git(store_of(project), "show", f"HEAD:{rows.row_path(row_id)}")
    )
    assert isinstance(value, dict)
    return value


def blob(project: Path, path: str) -> bytes:
    import pygit2

    repo = pygit2.Repository(str(store_of(project)))
    return repo.revparse_single(f"HEAD:{path}").peel(pygit2.Blob).data


def tag(run: Run, *args: str) -> str:
    result = run("good", "--json", *args)
    assert result.exit_code == 0, result.stderr
    return str(orjson.loads(result.stdout)["id"])


def install_edited(project: Path, png: bytes) -> None:
    """The image fixture with its attachment replaced by ``png``."""
    path = install_session(project, "image")
    text = (PI_SESSIONS / "image.jsonl").read_text()
    old = base64.b64encode(fixture_png()).decode()
    assert old in text
    path.write_text(text.replace(old, base64.b64encode(png).decode()))


# -- the stripper ---------------------------------------------------------------


def test_png_text_time_and_exif_chunks_are_stripped_and_the_pixels_kept() -> None:
    original = fixture_png()
    tagged = with_text_chunks(original)
    assert b"alice" in tagged
    stripped = images.strip(tagged, "image/png")
    assert stripped == original  # exactly the chunks added, nothing else
    assert images.strip(original, "image/png") == original
    with Image.open(io.BytesIO(stripped)) as picture:
        assert picture.size == (2, 2)
        picture.load()
    assert images.dimensions(stripped, "image/png") == (2, 2)


def test_jpeg_app_segments_and_comments_are_stripped_and_it_still_decodes() -> None:
    original = jpeg_with_exif()
    assert b"Exif" in original and b"taken at home" in original
    stripped = images.strip(original, "image/jpeg")
    assert b"Exif" not in stripped
    assert b"alice" not in stripped and b"taken at home" not in stripped
    assert stripped[:2] == b"\xff\xd8" and stripped.endswith(b"\xff\xd9")
    with Image.open(io.BytesIO(stripped)) as picture:
        assert picture.size == (3, 5)
        assert "exif" not in picture.info and "comment" not in picture.info
        picture.load()
    with (
        Image.open(io.BytesIO(original)) as before,
        Image.open(io.BytesIO(stripped)) as after,
    ):
        assert before.tobytes() == after.tobytes()  # the same pixels
    assert images.dimensions(stripped, "image/jpeg") == (3, 5)


@pytest.mark.parametrize(
    ("data", "media_type", "message"),
    [
        (b"GIF89a....", "image/png", "not a PNG image (bad signature)"),
        (fixture_png()[:40], "image/png", "a truncated PNG image"),
        (b"\x89PNG", "image/jpeg", "not a JPEG image (no start-of-image marker)"),
        (b"GIF89a", "image/gif", "unsupported image type 'image/gif'"),
    ],
)
def test_bytes_that_are_not_the_image_they_claim_are_refused(
    data: bytes, media_type: str, message: str
) -> None:
    with pytest.raises(RowValidationError) as caught:
        images.strip(data, media_type)
    assert str(caught.value) == message


# -- stored once, by content ---------------------------------------------------------


def test_an_image_is_stored_once_by_hash_and_rows_name_it(
    project: Path, run: Run
) -> None:
    install_session(project, "image")
    png = fixture_png()
    sha = hashlib.sha256(png).hexdigest()
    reference = {"sha256": sha, "media_type": "image/png", "size": len(png)}
    trace = tag(run, "--trace")
    answer = tag(run)  # the same turn as an answer row: the same image
    user = stored_row(project, trace)["trajectory"][1]
    assert user["role"] == "user"
    assert user["content"].endswith("What is in this image?\n[image]")
    assert user["images"] == [reference]
    message = stored_row(project, answer)["messages"][0]
    assert message["images"] == [reference]
    assert files(project, "images/") == [f"images/{sha[:2]}/{sha}"]
    assert blob(project, images.path_of(sha)) == png
    # the second tag met a stored image and wrote no image file
    second = git(store_of(project), "show", "--name-only", "--format=", "HEAD")
    assert second.split() == [rows.row_path(answer)]
    # no base64 in any stored row
    assert b'"base64"' not in git(store_of(project), "show", "HEAD").encode()


def test_metadata_is_stripped_before_the_image_is_stored(
    project: Path, run: Run
) -> None:
    install_edited(project, with_text_chunks(fixture_png()))
    row_id = tag(run, "--trace")
    (reference,) = stored_row(project, row_id)["trajectory"][1]["images"]
    stored = blob(project, images.path_of(reference["sha256"]))
    assert stored == fixture_png()
    assert reference["size"] == len(stored)
    assert b"alice" not in git(store_of(project), "log", "-p", "--all").encode()


def test_no_images_keeps_the_placeholder_alone(project: Path, run: Run) -> None:
    install_session(project, "image")
    row_id = tag(run, "--trace", "--no-images")
    user = stored_row(project, row_id)["trajectory"][1]
    assert user["content"].endswith("[image]")
    assert "images" not in user
    assert files(project, "images/") == []


def test_an_image_over_the_limit_is_refused_naming_the_setting(
    project: Path, run: Run
) -> None:
    install_session(project, "image")
    set_limit = run("data", "--image-max-bytes", "50")
    assert set_limit.exit_code == 0, set_limit.stderr
    head = git(store_of(project), "rev-parse", "HEAD")
    assert set_limit.stdout == (
        f"images at most 50 bytes each from now on ({head[:12]})\n"
    )
    assert git(store_of(project), "log", "-1", "--format=%s") == (
        "set image_max_bytes = 50\n"
    )
    assert settings.image_limit(Store.open(store_of(project)).snapshot()) == 50
    assert "images   at most 50 bytes each\n" in run("data").stdout
    done = run("good")
    assert done.exit_code == 4
    assert done.stderr == (
        f"Error: an image of {len(fixture_png())} bytes is over the limit of 50 "
        "(setting image_max_bytes: machine data --image-max-bytes N; "
        "or tag with --no-images)\n"
    )
    assert git(store_of(project), "rev-parse", "HEAD") == head
    assert files(project, "images/") == []
    # raised again: the same turn is kept
    again = run("data", "--image-max-bytes", "75", "--json")
    assert orjson.loads(again.stdout)["image_max_bytes"] == 75
    assert tag(run)
    assert len(files(project, "images/")) == 1
    same = run("data", "--image-max-bytes", "75")
    assert same.stdout == "images were already at most 75 bytes each; nothing changed\n"
    for bad in ("0", "-3", "5MB"):
        refused = run("data", "--image-max-bytes", bad)
        assert refused.exit_code == 2, bad
        assert "Invalid value for '--image-max-bytes'" in refused.stderr
    assert orjson.loads(run("data", "--json").stdout)["image_max_bytes"] == 75


def test_gc_drops_an_image_once_no_row_names_it(project: Path, run: Run) -> None:
    install_session(project, "image")
    trace = tag(run, "--trace")
    answer = tag(run)
    sha = stored_row(project, trace)["trajectory"][1]["images"][0]["sha256"]
    assert run("rm", trace, "--why", "a duplicate").exit_code == 0
    kept = run("gc", "--json")
    assert orjson.loads(kept.stdout)["images_dropped"] == 0
    assert files(project, "images/") == [images.path_of(sha)]
    assert run("rm", answer, "--why", "a duplicate").exit_code == 0
    done = run("gc")
    assert done.exit_code == 0, done.stderr
    assert "dropped 1 image no row names any more\n" in done.stdout
    assert files(project, "images/") == []
    assert git(store_of(project), "log", "-1", "--format=%s", "--", "images") == (
        "gc: drop 1 images no row names\n"
    )


def test_the_store_refuses_an_image_not_named_by_its_hash_or_missing(
    project: Path, run: Run
) -> None:
    from machine_git.store.store import Change
    from machine_git.store.store import Redaction

    install_session(project, "image")
    row_id = tag(run, "--trace")
    store = Store.open(store_of(project))
    wrong = "0" * 64
    with pytest.raises(RowValidationError) as caught:
        store.write(
            lambda snap: Change(
                summary="bad image",
                files={images.path_of(wrong): b"not that"},
                trailers={"Action": "test"},
                redaction=Redaction.KEPT,
            )
        )
    assert "its content hashes to" in str(caught.value)
    row = stored_row(project, row_id)
    row["trajectory"][1]["images"][0]["sha256"] = wrong
    from machine_git.core import jsonio

    with pytest.raises(RowValidationError) as missing:
        store.write(
            lambda snap: Change(
                summary="dangling image",
                files={rows.row_path(row_id): jsonio.canonical(row)},
                trailers={"Action": "test"},
                redaction=Redaction.KEPT,
            )
        )
    assert str(missing.value) == (
        f"{rows.row_path(row_id)}: its image {wrong[:12]} is not in the store"
    )


# -- shown ---------------------------------------------------------------------------


def test_show_prints_a_line_per_image_and_json_carries_the_reference(
    project: Path, run: Run
) -> None:
    install_session(project, "image")
    row_id = tag(run, "--trace")
    png = fixture_png()
    sha = hashlib.sha256(png).hexdigest()
    shown = run("show", row_id)
    assert shown.exit_code == 0, shown.stderr
    body, _, tail = shown.stdout.rpartition("}\n")
    assert tail == f"image {sha[:12]} image/png {len(png)} bytes 2x2 (trajectory[1])\n"
    assert orjson.loads(body + "}")["trajectory"][1]["images"] == [
        {"sha256": sha, "media_type": "image/png", "size": len(png)}
    ]
    as_json = orjson.loads(run("show", row_id, "--json").stdout)
    assert as_json["trajectory"][1]["images"] == [
        {"sha256": sha, "media_type": "image/png", "size": len(png)}
    ]


def test_diff_names_the_images_a_row_gained_and_the_file_is_not_other(
    project: Path, run: Run
) -> None:
    install_session(project, "image")
    row_id = tag(run, "--trace")
    png = fixture_png()
    sha = hashlib.sha256(png).hexdigest()
    done = run("diff")
    assert done.exit_code == 0, done.stderr
    assert (
        f"    + image {sha[:12]} image/png {len(png)} bytes 2x2 (trajectory[1])\n"
        in done.stdout
    )
    assert "other files" not in done.stdout
    assert row_id in done.stdout
    removed = run("rm", row_id, "--why", "test")
    assert removed.exit_code == 0, removed.stderr
    gone = run("diff")
    assert (
        f"    - image {sha[:12]} image/png {len(png)} bytes 2x2 (trajectory[1])\n"
        in gone.stdout
    )


def write_row(project: Path, row: dict[str, Any], extra: dict[str, bytes]) -> None:
    """Commit ``row`` as it is (and ``extra`` files), as an edit would."""
    from machine_git.core import jsonio
    from machine_git.store.store import Change
    from machine_git.store.store import Redaction

    written: dict[str, bytes | None] = {
        rows.row_path(row["id"]): jsonio.canonical(row),
        **extra,
    }
    Store.open(store_of(project)).write(
        lambda snap: Change(
            summary="edit images",
            files=written,
            trailers={"Action": "test"},
            redaction=Redaction.KEPT,
        )
    )


def field_lines(run: Run, *args: str) -> list[str]:
    """The field view of ``machine diff``: the lines under the changed row."""
    done = run("diff", *args)
    assert done.exit_code == 0, done.stderr
    return [line for line in done.stdout.splitlines() if line.startswith("    ")]


def test_diff_field_view_prints_each_changed_image_as_its_line(
    project: Path, run: Run
) -> None:
    install_session(project, "image")
    row_id = tag(run, "--trace")
    out = io.BytesIO()
    Image.new("RGB", (3, 1), (0, 0, 255)).save(out, "PNG")
    wide = out.getvalue()
    sha_a = hashlib.sha256(fixture_png()).hexdigest()
    sha_b = hashlib.sha256(wide).hexdigest()
    line_a = f"image {sha_a[:12]} image/png {len(fixture_png())} bytes 2x2"
    line_b = f"image {sha_b[:12]} image/png {len(wide)} bytes 3x1"
    row = stored_row(project, row_id)
    user = row["trajectory"][1]
    ref_a = user["images"][0]
    ref_b = {"sha256": sha_b, "media_type": "image/png", "size": len(wide)}
    # changed: one image for another, at the same place
    user["images"] = [ref_b]
    write_row(project, row, {images.path_of(sha_b): wide})
    assert field_lines(run) == [
        "    $.trajectory[1].images[0]:",
        f"      - {line_a}",
        f"      + {line_b}",
    ]
    # added
    user["images"] = [ref_b, ref_a]
    write_row(project, row, {})
    assert field_lines(run) == ["    $.trajectory[1].images[1]:", f"      + {line_a}"]
    # removed, the whole list
    del user["images"]
    write_row(project, row, {})
    assert field_lines(run) == [
        "    $.trajectory[1].images:",
        f"      - {line_b}",
        f"      - {line_a}",
    ]
    # a whole record with an image: the record, then its image
    added = {"role": "user", "content": "[image]", "images": [ref_a]}
    row["trajectory"].append({**added, "timestamp": user["timestamp"]})
    write_row(project, row, {})
    at = len(row["trajectory"]) - 1
    head, image = field_lines(run)
    assert head.startswith(f"    $.trajectory[{at}]: (absent) -> {{") and (
        "sha256" not in head and "images" not in head
    ), head
    assert image == f"      + {line_a}"
    # --json keeps the reference whole, at the image's path
    first = run("diff", "HEAD~4", "HEAD~3", "--json")
    (change,) = orjson.loads(first.stdout)["rows"]
    assert change["fields"] == [
        {"path": "$.trajectory[1].images[0]", "old": ref_a, "new": ref_b}
    ]


# -- exported and imported -----------------------------------------------------------


def other_project(tmp_path: Path, name: str) -> Path:
    root = tmp_path / name
    root.mkdir()
    (root / ".git").mkdir()
    return root


def exported(run: Run, project: Path, *args: str) -> list[dict[str, Any]]:
    done = run("export", "--project", str(project), *args)
    assert done.exit_code == 0, done.stderr
    return [orjson.loads(line) for line in done.stdout.splitlines()]


def test_openai_export_carries_images_as_data_uris_in_their_place(
    project: Path, run: Run
) -> None:
    install_session(project, "image")
    tag(run, "--trace")
    tag(run)
    png = fixture_png()
    uri = "data:image/png;base64," + base64.b64encode(png).decode()
    text = fixture_lines("image")[3]["message"]["content"][0]["text"]
    expected = [
        {"type": "text", "text": text + "\n"},
        {"type": "image_url", "image_url": {"url": uri}},
    ]
    for kind in ("train", "traces"):
        (line,) = exported(run, project, "--kind", kind, "--format", "openai")
        assert line["messages"][0] == {"role": "user", "content": expected}, kind
        (bare,) = exported(
            run, project, "--kind", kind, "--format", "openai", "--no-images"
        )
        assert bare["messages"][0] == {"role": "user", "content": text + "\n[image]"}
        # tinker: the cookbook's ImagePart, the data URI in its place
        (tinker,) = exported(run, project, "--kind", kind, "--format", "tinker")
        assert tinker["messages"][0] == {
            "role": "user",
            "content": [
                {"type": "text", "text": text + "\n"},
                {"type": "image", "image": uri},
            ],
        }
        (plain,) = exported(
            run, project, "--kind", kind, "--format", "tinker", "--no-images"
        )
        assert plain["messages"][0] == {"role": "user", "content": text + "\n[image]"}


def test_rows_without_images_export_the_same_bytes_with_or_without_no_images(
    project: Path, run: Run
) -> None:
    install_session(project, "basic")
    tag(run, "--trace")
    for fmt in ("openai", "rows", "tinker"):
        a = run("export", "--kind", "traces", "--format", fmt)
        b = run("export", "--kind", "traces", "--format", fmt, "--no-images")
        assert a.stdout == b.stdout and a.stdout, fmt


def test_an_openai_export_imports_back_with_the_same_image_blobs(
    project: Path, run: Run, tmp_path: Path
) -> None:
    install_edited(project, with_text_chunks(fixture_png()))
    tag(run, "--trace")
    out = tmp_path / "data.jsonl"
    done = run("export", "--kind", "traces", "--format", "openai", "-o", str(out))
    assert done.exit_code == 0, done.stderr
    target = other_project(tmp_path, "copy")
    given = run("import", str(out), "--kind", "traces", "--project", str(target))
    assert given.exit_code == 0, given.stderr
    assert files(target, "images/") == files(project, "images/")
    (path,) = files(target, "images/")
    assert blob(target, path) == blob(project, path) == fixture_png()
    again = tmp_path / "again.jsonl"
    run(
        "export",
        "--kind",
        "traces",
        "--format",
        "openai",
        "-o",
        str(again),
        "--project",
        str(target),
    )
    assert again.read_bytes() == out.read_bytes()


@pytest.mark.parametrize("kind", ["train", "traces"])
def test_a_tinker_export_imports_back_and_exports_the_same_bytes(
    project: Path, run: Run, tmp_path: Path, kind: str
) -> None:
    install_edited(project, with_text_chunks(fixture_png()))  # stripped on tagging
    tag(run, "--trace")
    tag(run)
    out = tmp_path / "data.jsonl"
    done = run("export", "--kind", kind, "--format", "tinker", "-o", str(out))
    assert done.exit_code == 0, done.stderr
    uri = "data:image/png;base64," + base64.b64encode(fixture_png()).decode()
    assert out.read_bytes().count(orjson.dumps({"image": uri, "type": "image"})) == 1
    again = tmp_path / "again.jsonl"
    run("export", "--kind", kind, "--format", "tinker", "-o", str(again))
    assert again.read_bytes() == out.read_bytes()  # the same revision, the same bytes
    target = other_project(tmp_path, "copy")
    given = run("import", str(out), "--kind", kind, "--project", str(target))
    assert given.exit_code == 0, given.stderr
    assert files(target, "images/") == files(project, "images/")
    (path,) = files(target, "images/")
    assert blob(target, path) == blob(project, path) == fixture_png()
    back = tmp_path / "back.jsonl"
    done = run(
        "export",
        "--kind",
        kind,
        "--format",
        "tinker",
        "-o",
        str(back),
        "--project",
        str(target),
    )
    assert done.exit_code == 0, done.stderr
    assert back.read_bytes() == out.read_bytes()


def test_a_rows_export_imports_back_to_the_same_rows_and_images(
    project: Path, run: Run, tmp_path: Path
) -> None:
    install_session(project, "image")
    ids = [tag(run, "--trace"), tag(run)]
    out = tmp_path / "rows.jsonl"
    done = run(
        "export",
        "--format",
        "rows",
        "--kind",
        "train",
        "--kind",
        "traces",
        "-o",
        str(out),
    )
    assert done.exit_code == 0, done.stderr
    assert b'"base64"' in out.read_bytes()  # the bytes travel with the rows
    target = other_project(tmp_path, "copy")
    given = run("import", str(out), "--project", str(target))
    assert given.exit_code == 0, given.stderr
    for row_id in ids:
        assert stored_row(target, row_id) == stored_row(project, row_id)
    assert files(target, "images/") == files(project, "images/")


def test_the_default_limit_is_the_settings_model_default() -> None:
    from machine_git.core import models

    assert models.Settings().image_max_bytes == images.DEFAULT_MAX_BYTES


def test_images_dir_writes_files_beside_the_jsonl_and_import_reads_them(
    project: Path, run: Run, tmp_path: Path
) -> None:
    install_session(project, "image")
    tag(run, "--trace")
    png = fixture_png()
    sha = hashlib.sha256(png).hexdigest()
    out = tmp_path / "export" / "data.jsonl"
    out.parent.mkdir()
    folder = tmp_path / "export" / "images"
    done = run(
        "export", "--kind", "traces", "--format", "openai", "-o", str(out),
        "--images-dir", str(folder),
    )  # fmt: skip
    assert done.exit_code == 0, done.stderr
    (line,) = [orjson.loads(x) for x in out.read_bytes().splitlines()]
    assert line["messages"][0]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": f"images/{sha}.png"},
    }
    written = folder / f"{sha}.png"
    assert written.read_bytes() == png
    assert written.stat().st_mode & 0o777 == 0o600
    target = other_project(tmp_path, "copy")
    given = run("import", str(out), "--kind", "traces", "--project", str(target))
    assert given.exit_code == 0, given.stderr
    assert files(target, "images/") == [images.path_of(sha)]
    # the same lines as a data-URI export of the original
    ours = run("export", "--kind", "traces", "--format", "openai")
    theirs = run(
        "export", "--kind", "traces", "--format", "openai", "--project", str(target)
    )
    assert ours.stdout == theirs.stdout


def test_an_image_path_outside_the_jsonl_folder_is_refused(
    project: Path, run: Run, tmp_path: Path
) -> None:
    (tmp_path / "secret.png").write_bytes(fixture_png())
    line = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image_url", "image_url": {"url": "../secret.png"}},
                ],
            },
            {"role": "assistant", "content": "ok"},
        ]
    }
    given = tmp_path / "in" / "data.jsonl"
    given.parent.mkdir()
    given.write_bytes(orjson.dumps(line) + b"\n")
    done = run("import", str(given))
    assert done.exit_code != 0
    assert (
        "$.messages[0].content[1].image_url.url: image '../secret.png': expected a "
        "data URI or a .png/.jpg path inside the JSONL's folder" in done.stderr
    )
    assert not store_of(project).exists() or files(project, "images/") == []


def test_validate_store_finds_an_image_taken_from_under_its_row(
    project: Path, run: Run
) -> None:
    from machine_git.store.store import Change
    from machine_git.store.store import Redaction

    install_session(project, "image")
    row_id = tag(run, "--trace")
    sha = stored_row(project, row_id)["trajectory"][1]["images"][0]["sha256"]
    assert run("validate", "--store").exit_code == 0
    store = Store.open(store_of(project))
    store.write(
        lambda snap: Change(
            "lose it", {images.path_of(sha): None}, redaction=Redaction.KEPT
        )
    )
    result = run("validate", "--store")
    assert result.exit_code == 4
    assert result.stdout == (
        f"{rows.row_path(row_id)}:1: $: its image {sha[:12]} is not in the store\n"
    )


def test_out_writes_the_image_inline_and_stripped_and_import_stores_it(
    project: Path, run: Run, tmp_path: Path
) -> None:
    install_edited(project, with_text_chunks(fixture_png()))
    out = tmp_path / "rows.jsonl"
    done = run("good", "--trace", "--out", str(out))
    assert done.exit_code == 0, done.stderr
    (row,) = [orjson.loads(x) for x in out.read_bytes().splitlines()]
    assert row["trajectory"][1]["images"] == [
        {"media_type": "image/png", "base64": base64.b64encode(fixture_png()).decode()}
    ]
    assert b"alice" not in out.read_bytes()
    given = run("import", str(out))
    assert given.exit_code == 0, given.stderr
    sha = hashlib.sha256(fixture_png()).hexdigest()
    assert stored_row(project, row["id"])["trajectory"][1]["images"] == [
        {"sha256": sha, "media_type": "image/png", "size": len(fixture_png())}
    ]


def test_a_tool_result_keeps_its_images() -> None:
    from machine_git.sessions import piai
    from machine_git.sessions.records import Records

    data = base64.b64encode(fixture_png()).decode()
    records = Records()
    records.call("c1", "read", {"path": "shot.png"}, records.fallback, "line 1")
    message = {
        "role": "toolResult",
        "toolCallId": "c1",
        "toolName": "read",
        "content": [
            {"type": "text", "text": "Read image file [image/png]"},
            {"type": "image", "data": data, "mimeType": "image/png"},
            {"type": "image", "data": "R0lGODlh", "mimeType": "image/gif"},
        ],
        "isError": False,
    }
    piai.add_tool_result(records, message, records.fallback, 2)
    result = records.records[-1]
    assert result["role"] == "tool"
    assert result["content"] == "Read image file [image/png]\n[image]\n[image]"
    # a GIF is not kept: its placeholder stays alone
    assert result["images"] == [{"media_type": "image/png", "base64": data}]


def test_claude_code_read_of_a_png_keeps_the_image_on_its_result(
    project: Path, run: Run
) -> None:
    from machine_git.sessions import claude

    path = PI_SESSIONS.parents[1] / "claude" / "real" / "image.jsonl"
    turn, _ = claude.read_turn(path)
    (result,) = [r for r in turn.records if r["role"] == "tool"]
    assert result["role"] == "tool"
    assert result["content"] == "[image]"
    assert result["images"] == [
        {"media_type": "image/png", "base64": base64.b64encode(fixture_png()).decode()}
    ]
    done = run("good", "--trace", "--host", "claude", "--session", str(path), "--json")
    assert done.exit_code == 0, done.stderr
    row_id = orjson.loads(done.stdout)["id"]
    sha = hashlib.sha256(fixture_png()).hexdigest()
    stored = stored_row(project, row_id)
    (tool,) = [r for r in stored["trajectory"] if r["role"] == "tool"]
    assert tool["images"] == [
        {"sha256": sha, "media_type": "image/png", "size": len(fixture_png())}
    ]


def test_claude_code_prompt_image_is_kept_on_the_user_record(
    project: Path, run: Run
) -> None:
    # The real session: an image block in the prompt (stream-json input).
    path = PI_SESSIONS.parents[1] / "claude" / "real" / "prompt-image.jsonl"
    png = fixture_png()
    sha = hashlib.sha256(png).hexdigest()
    done = run("good", "--host", "claude", "--session", str(path), "--json")
    assert done.exit_code == 0, done.stderr
    row_id = orjson.loads(done.stdout)["id"]
    (user, _) = stored_row(project, row_id)["messages"]
    assert user == {
        "role": "user",
        "content": "no-tools: what is in this image?\n[image]",
        "images": [{"sha256": sha, "media_type": "image/png", "size": len(png)}],
    }
    assert files(project, "images/") == [images.path_of(sha)]
    line = f"image {sha[:12]} image/png {len(png)} bytes 2x2 (messages[0])"
    assert run("show", row_id).stdout.endswith(f"}}\n{line}\n")


def test_codex_prompt_and_view_image_pictures_are_stored_once_and_shown(
    project: Path, run: Run
) -> None:
    # The real rollouts: `codex exec -i pixel.png`, and the view_image tool.
    real = PI_SESSIONS.parents[1] / "codex" / "real"
    png = fixture_png()
    sha = hashlib.sha256(png).hexdigest()
    reference = {"sha256": sha, "media_type": "image/png", "size": len(png)}
    ids = []
    for name in ("image", "view-image"):
        path = str(real / f"{name}.jsonl")
        done = run("good", "--trace", "--host", "codex", "--session", path, "--json")
        assert done.exit_code == 0, done.stderr
        ids.append(orjson.loads(done.stdout)["id"])
    prompt, viewed = (stored_row(project, i)["trajectory"] for i in ids)
    assert prompt[1]["role"] == "user"
    assert prompt[1]["content"] == (
        '<image name=[Image #1] path="pixel.png">\n[image]\n</image>\n'
        "no-tools: what is in this image?"
    )
    assert prompt[1]["images"] == [reference]
    assert viewed[3] == {**viewed[3], "role": "tool", "content": "[image]"}
    assert viewed[3]["images"] == [reference]
    assert files(project, "images/") == [images.path_of(sha)]
    line = f"image {sha[:12]} image/png {len(png)} bytes 2x2"
    assert run("show", ids[0]).stdout.endswith(f"}}\n{line} (trajectory[1])\n")
    assert run("show", ids[1]).stdout.endswith(f"}}\n{line} (trajectory[3])\n")


def test_an_input_image_is_kept_only_from_a_png_or_jpeg_data_url() -> None:
    from machine_git.sessions.values import images_of
    from machine_git.sessions.values import text_of

    data = base64.b64encode(fixture_png()).decode()
    content = [
        {"type": "input_image", "image_url": f"data:image/png;base64,{data}"},
        {"type": "input_image", "image_url": "data:image/gif;base64,R0lGODlh"},
        {"type": "input_image", "image_url": "file:///home/alice/shot.png"},
        {"type": "input_image", "image_url": "https://example.com/shot.png"},
        {"type": "input_image", "image_url": "data:image/png,not-base64"},
        {"type": "input_image"},
    ]
    # machine never opens or fetches what a session only points at
    assert images_of(content) == [{"media_type": "image/png", "base64": data}]
    assert text_of(content) == "\n".join(["[image]"] * 6)


def test_the_pre_receive_check_refuses_an_image_not_named_by_its_hash() -> None:
    from machine_git.sync import hooks

    png = fixture_png()
    right = images.path_of(hashlib.sha256(png).hexdigest())
    assert hooks.check_blob(right, png) == []
    wrong = images.path_of("0" * 64)
    (finding,) = hooks.check_blob(wrong, png)
    assert str(finding) == (
        f"{wrong}:1: $: its content hashes to "
        f"{hashlib.sha256(png).hexdigest()[:12]}, not its name"
    )
    (named,) = hooks.check_blob("images/zz/not-a-sha", png)
    assert named.problem == "not an image path (images/ab/<64 hex>)"
