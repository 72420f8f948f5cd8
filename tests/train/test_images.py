"""Image rows in training: refused by a model machine renders no images for (or
trained on their placeholder with ``--no-images``), rendered for Qwen3-VL
offline with the cookbook's renderer, and sent as the dump shows.

Real parts throughout: Pi's recorded ``@pixel.png`` session (a 75-byte 2x2
PNG), the real store, the cookbook's Qwen3-VL renderer and transformers'
image processor built from the committed parameters; only the Tinker service
is faked (tests/train/conftest.py).
"""

from __future__ import annotations

import base64
import hashlib
import socket
from pathlib import Path
from typing import Any

import orjson
import pytest
import tinker

from machine_git.core import jsonio
from machine_git.core.errors import TrainingError
from machine_git.export import export
from machine_git.store.store import Store
from machine_git.train import runs
from machine_git.train import validate
from machine_git.train import vision
from tests.conftest import Run
from tests.conftest import fixture_lines
from tests.conftest import install_session
from tests.train import conftest as support
from tests.train.conftest import FakeTinker

VL = "Qwen/Qwen3-VL-30B-A3B-Instruct"
TEXT = support.MODEL  # Qwen/Qwen3-30B-A3B: text only
# Qwen3-VL's smart resize of a 2x2 image with the published parameters
# (patch 16, merge 2, at least 65,536 pixels): 256x256, 16x16 patches, 2x2
# merged: 64 tokens.
PIXEL_TOKENS = 64
HINT = "(--no-images trains on the [image] placeholder instead)"


def _pixel() -> bytes:
    """The PNG Pi recorded for ``@pixel.png`` (read from the session file)."""
    for line in fixture_lines("image"):
        for block in (line.get("message") or {}).get("content") or []:
            if isinstance(block, dict) and block.get("type") == "image":
                return base64.b64decode(block["data"])
    raise LookupError("no image in the image session")


def _tag(run: Run, project: Path) -> dict[str, str]:
    """The image session's answer and the basic session's, tagged good."""
    ids = {}
    for name in ("image", "basic"):
        install_session(project, name)
        assert run("good").exit_code == 0
        listed = orjson.loads(run("tagged", "--json", "-n", "1").stdout)
        ids[name] = listed[0]["id"]
    return ids


def _store(project: Path) -> Store:
    return Store.open(support.store_path(project))


def _no_network(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every connection attempt fails and is counted (nothing may download)."""
    tried: list[Any] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        tried.append(args)
        raise OSError("network used in an offline test")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    return tried


# -- a model without images --------------------------------------------------------


def test_a_text_model_refuses_image_rows_naming_them(project: Path, run: Run) -> None:
    ids = _tag(run, project)
    result = run("train", "sft", "--batch-size", "1")
    assert result.exit_code != 0
    assert result.stderr == (
        f"Error: {TEXT}: machine renders images only for Qwen3-VL Instruct, and "
        f"1 row holds them: {ids['image']} {HINT}\n"
    )
    assert runs.all_runs(_store(project)) == []  # nothing prepared
    # train validate says the same, as a blocking problem of that row
    checked = run("train", "validate", "--batch-size", "1")
    assert checked.exit_code == 1
    assert (
        "blocking  holds images, which machine renders only for Qwen3-VL "
        f"Instruct, not {TEXT} {HINT}: {ids['image']}\n"
    ) in checked.stdout


def test_the_refusal_names_a_few_rows_then_how_many_more(
    project: Path, run: Run
) -> None:
    ids = _tag(run, project)
    row = _store(project).read_row(ids["image"])
    assert row is not None
    items = [(f"row{n}", row) for n in range(1, 6)]
    with pytest.raises(TrainingError) as e:
        validate.refuse_images(items, TEXT)
    assert str(e.value) == (
        f"{TEXT}: machine renders images only for Qwen3-VL Instruct, and 5 rows "
        "hold them: row1, row2, row3 and "
        f"2 more {HINT}"
    )
    validate.refuse_images(items, VL)  # a vision model takes them


def test_no_images_trains_text_models_on_the_placeholder(
    project: Path, run: Run
) -> None:
    ids = _tag(run, project)
    checked = run("train", "validate", "--batch-size", "1", "--no-images")
    assert checked.exit_code == 0, checked.stdout
    assert "ok: no problems" in checked.stdout
    prepared = run("train", "sft", "--batch-size", "1", "--no-images", "--json")
    assert prepared.exit_code == 0, prepared.stderr
    record = orjson.loads(prepared.stdout)
    assert record["dataset"]["images"] is False
    assert record["dataset"]["rows"] == 2
    path = runs.folder(_store(project), record["id"]) / "data.jsonl"
    data = path.read_bytes()
    lines = dict(zip(runs.row_ids(path) or [], data.splitlines(), strict=True))
    image_line = jsonio.loads(lines[ids["image"]])
    assert image_line["messages"][0]["content"] == (
        '<file name="/tmp/machine-fixture/proj/pixel.png"></file>\n'
        "What is in this image?\n[image]"
    )
    assert b"data:image" not in data
    # the same data without --no-images is another run (its id says so)
    again = run("train", "sft", "--batch-size", "1", "--no-images")
    assert "already exists" in again.stderr


# -- Qwen3-VL ---------------------------------------------------------------------


def test_qwen3_vl_renders_image_rows_offline_and_dumps_the_chunks(
    project: Path, run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = _tag(run, project)
    tried = _no_network(monkeypatch)
    dump = tmp_path / "dump.jsonl"
    flags = ("--base-model", VL, "--batch-size", "1")
    checked = run("train", "validate", *flags, "--dump", str(dump))
    assert checked.exit_code == 0, checked.stdout + checked.stderr
    assert f"model    {VL} (renderer qwen3_vl_instruct" in checked.stdout
    assert tried == []
    dumped = {d["row"]: d for d in map(orjson.loads, dump.read_bytes().splitlines())}
    assert sorted(dumped) == sorted(ids.values())
    assert "chunks" not in dumped[ids["basic"]]  # text only: as before
    seen = dumped[ids["image"]]
    images = [c for c in seen["chunks"] if c["type"] == "image"]
    # the renderer's own count (the cookbook's image_to_chunk over the
    # processor), which the published parameters fix at 64 for 2x2
    assert [c["tokens"] for c in images] == [PIXEL_TOKENS]
    assert vision.image_tokens(2, 2) == PIXEL_TOKENS
    assert images[0]["format"] == "jpeg"  # the cookbook re-encodes as JPEG
    assert sum(c["tokens"] for c in seen["chunks"]) == len(seen["tokens"]) - 1
    at = seen["tokens"].index(None)
    assert seen["tokens"][at : at + PIXEL_TOKENS] == [None] * PIXEL_TOKENS
    assert seen["tokens"].count(None) == PIXEL_TOKENS
    assert seen["tokens"][at - 1] == 151652  # <|vision_start|>
    assert seen["tokens"][at + PIXEL_TOKENS] == 151653  # <|vision_end|>
    assert seen["weights"][at : at + PIXEL_TOKENS] == [0] * PIXEL_TOKENS
    assert (
        "What is in this image?\n<|vision_start|>\u27e8image 64 tokens\u27e9"
        "<|vision_end|><|im_end|>"
    ) in seen["text"]
    assert seen["text"].endswith(
        "\u27e6I received one image/png image (100 base64 characters). It is a "
        "tiny 2x2 test picture.<|im_end|>\u27e7"
    )


def test_qwen3_vl_trains_the_images_it_dumps(
    project: Path,
    run: Run,
    fake: FakeTinker,
    tmp_path: Path,
) -> None:
    fake.models.append(VL)  # the service serves the vision model too
    ids = _tag(run, project)
    dump = tmp_path / "dump.jsonl"
    flags = ("--base-model", VL, "--batch-size", "1")
    checked = run("train", "validate", *flags, "--dump", str(dump))
    assert checked.exit_code == 0, checked.stdout
    prepared = run("train", "sft", *flags, "--json")
    assert prepared.exit_code == 0, prepared.stderr
    record = orjson.loads(prepared.stdout)
    assert "images" not in record["dataset"]
    assert record["renderer"] == "qwen3_vl_instruct"
    # the run's data carries the stored image as a cookbook image part
    data = (runs.folder(_store(project), record["id"]) / "data.jsonl").read_bytes()
    uri = "data:image/png;base64," + base64.b64encode(_pixel()).decode()
    assert data.count(orjson.dumps({"image": uri, "type": "image"})) == 1
    result = run("train", "run", "--yes")
    assert result.exit_code == 0, result.stderr
    sent = [d for batch in fake.batches for d in batch]
    with_image = [
        d
        for d in sent
        if any(isinstance(c, tinker.types.ImageChunk) for c in d.model_input.chunks)
    ]
    assert len(sent) == 2 and len(with_image) == 1
    chunk = next(
        c
        for c in with_image[0].model_input.chunks
        if isinstance(c, tinker.types.ImageChunk)
    )
    assert chunk.expected_tokens == PIXEL_TOKENS
    dumped = {d["row"]: d for d in map(orjson.loads, dump.read_bytes().splitlines())}
    shown = next(c for c in dumped[ids["image"]]["chunks"] if c["type"] == "image")
    assert shown["sha256"] == hashlib.sha256(chunk.data).hexdigest()
    assert shown["bytes"] == len(chunk.data)
    # token for token and weight for weight what the dump said
    datum = with_image[0]
    targets = [int(t) for t in datum.loss_fn_inputs["target_tokens"].data]
    weights = [int(float(w) > 0) for w in datum.loss_fn_inputs["weights"].data]
    assert dumped[ids["image"]]["weights"] == [0, *weights]
    text_positions = [
        i for i, t in enumerate(dumped[ids["image"]]["tokens"][1:]) if t is not None
    ]
    assert [targets[i] for i in text_positions] == [
        dumped[ids["image"]]["tokens"][i + 1] for i in text_positions
    ]


def test_an_exported_file_with_image_parts_validates_as_its_model_takes_it(
    project: Path, run: Run, tmp_path: Path
) -> None:
    ids = _tag(run, project)
    out = tmp_path / "data.jsonl"
    done = run("export", "--format", "tinker", "-o", str(out))
    assert done.exit_code == 0, done.stderr
    label = f"data.jsonl:{sorted(ids.values()).index(ids['image']) + 1}"
    text = run("train", "validate", str(out), "--batch-size", "1")
    assert text.exit_code == 1
    assert text.stdout.rstrip().endswith(
        f"blocking  holds images, which machine renders only for Qwen3-VL "
        f"Instruct, not {TEXT} {HINT}: {label}"
    )
    plain = run("train", "validate", str(out), "--batch-size", "1", "--no-images")
    assert plain.exit_code == 0, plain.stdout
    seen = run("train", "validate", str(out), "--batch-size", "1", "--base-model", VL)
    assert seen.exit_code == 0, seen.stdout
    assert "ok: no problems" in seen.stdout
    # a part naming anything but a PNG or JPEG data URI is never opened
    line = jsonio.loads(out.read_bytes().splitlines()[int(label.split(":")[1]) - 1])
    line["messages"][0]["content"][1]["image"] = "http://127.0.0.1:9/pixel.png"
    odd = tmp_path / "odd.jsonl"
    odd.write_bytes(jsonio.line(line))
    refused = run(
        "train", "validate", str(odd), "--batch-size", "1", "--base-model", VL
    )
    assert refused.exit_code == 1
    assert (
        "blocking  does not render (ValueError: an image part is not a PNG or "
        "JPEG data URI ('http://127.0.0.1:9/pixel.png')): odd.jsonl:1"
    ) in refused.stdout


def test_a_row_not_read_with_its_images_keeps_the_placeholder(
    project: Path, run: Run
) -> None:
    # An eval prompt renders the stored row (its images by reference): no
    # empty data URI, the placeholder as before.
    ids = _tag(run, project)
    row = _store(project).read_row(ids["image"])
    assert row is not None
    line = export.to_tinker(row)
    assert line["messages"][0]["content"] == (
        '<file name="/tmp/machine-fixture/proj/pixel.png"></file>\n'
        "What is in this image?\n[image]"
    )


@pytest.mark.parametrize(
    ("width", "height", "tokens"),
    [
        (2, 2, 64),  # resized up to 256x256 (65,536 pixels at least): 16x16 / 4
        (1280, 800, 1000),  # multiples of 32 already: 80x50 patches / 4
        (1001, 333, 310),  # rounded to 992x320: 62x20 patches / 4
    ],
)
def test_image_token_counts_follow_the_published_parameters(
    width: int, height: int, tokens: int
) -> None:
    # Qwen's smart resize by hand: each side to the nearest multiple of
    # patch 16 x merge 2 = 32, the area kept within [65,536, 16,777,216].
    assert vision.parameters()["patch_size"] == 16
    assert vision.parameters()["merge_size"] == 2
    assert vision.image_tokens(width, height) == tokens
