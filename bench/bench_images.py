"""Benchmark images in rows (issue 33): a tag with a 2 MB screenshot, and how
a store grows when many rows share a few images.

Run from the repository root (Pillow makes the pictures)::

    python bench/bench_images.py [--repeat 5]

1. The cost of ``machine good --trace`` of a Pi turn whose prompt carries a
   2 MB PNG screenshot (noise: it does not compress), a new picture each round,
   against the same command with ``--no-images`` on the same session (it reads
   and parses the same 2.7 MB session file, and stores the placeholder). Whole
   processes, interleaved rounds (bench/timing.py), the paired ratio.
2. Store growth for 1,000 rows sharing 10 images (about 200 KB each):
   ``machine import`` of 1,000 OpenAI lines, each with one of the 10 images,
   into a new store, then ``machine gc``; the store's size against the same
   lines imported with the images as ``[image]`` text, and against the
   images' own bytes. Stored once, the difference is about the 10 images.
"""

from __future__ import annotations

import argparse
import base64
import io
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from PIL import Image  # noqa: E402

from bench import timing  # noqa: E402
from machine_git.core import jsonio  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "pi" / "sessions" / "image.jsonl"
MACHINE = [sys.executable, "-m", "machine_git"]


def noise_png(width: int, height: int, seed: int) -> bytes:
    """A PNG of random pixels: it does not compress, like a busy screenshot."""
    pixels = random.Random(seed).randbytes(width * height * 3)
    out = io.BytesIO()
    Image.frombytes("RGB", (width, height), pixels).save(out, "PNG")
    return out.getvalue()


def session_with(png: bytes, session_id: str) -> str:
    """The Pi image fixture with its picture replaced and its id made unique."""
    text = FIXTURE.read_text()
    lines = []
    for line in text.splitlines():
        value = jsonio.loads(line)
        if value.get("type") == "session":
            value["id"] = session_id
        for block in (value.get("message") or {}).get("content") or []:
            if isinstance(block, dict) and block.get("type") == "image":
                block["data"] = base64.b64encode(png).decode()
        lines.append(jsonio.compact(value))
    return "\n".join(lines) + "\n"


def environment(work: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        MACHINE_DATA_DIR=str(work / "data"),
        PI_CODING_AGENT_DIR=str(work / "pi"),
        HOME=str(work / "home"),
        GIT_AUTHOR_NAME="Bench",
        GIT_AUTHOR_EMAIL="bench@example.com",
        GIT_COMMITTER_NAME="Bench",
        GIT_COMMITTER_EMAIL="bench@example.com",
        PYTHONPATH=str(ROOT),
    )
    return env


def tag_cost(work: Path, repeat: int) -> None:
    env = environment(work)
    project = work / "proj"
    (project / ".git").mkdir(parents=True)
    count = [0]

    def tagger(*extra: str) -> timing.Case:
        def case() -> float:
            count[0] += 1
            png = noise_png(820, 820, count[0])  # 2.0 MB
            session = work / f"s{count[0]}.jsonl"
            session.write_text(session_with(png, f"bench-{count[0]:04d}"))
            return timing.run(
                [*MACHINE, "good", "--trace", "--session", str(session), *extra],
                env=env,
                cwd=project,
            )

        return case

    size = len(noise_png(820, 820, 0))
    scratch = work / "git"
    subprocess.run(["git", "init", "-q", "--bare", str(scratch)], check=True)

    def git_blob() -> float:
        # What git itself pays to keep a new 2 MB picture: hash and deflate it.
        count[0] += 1
        picture = work / f"p{count[0]}.png"
        picture.write_bytes(noise_png(820, 820, count[0]))
        command = ["git", "-C", str(scratch), "hash-object", "-w", str(picture)]
        return timing.run(command, env=env)

    times = timing.rounds(
        {"no-images": tagger("--no-images"), "images": tagger(), "git": git_blob},
        repeat,
    )
    base, with_images = times["no-images"], times["images"]
    extra = [a - b for a, b in zip(with_images, base, strict=True)]
    median = timing.median
    print(f"tag of a turn with a {size / 1e6:.1f} MB PNG, {repeat} rounds:")
    print(f"  machine good --trace --no-images  {timing.ms(median(base))}")
    print(f"  machine good --trace              {timing.ms(median(with_images))}")
    print(f"  ratio (paired)                    {timing.paired(with_images, base):.2f}")
    print(f"  the image's extra (paired median) {timing.ms(median(extra))}")
    print(f"  git hash-object -w of the PNG     {timing.ms(median(times['git']))}")


def tag_in_process(work: Path, repeat: int) -> None:
    """The same tags in one warm process (no interpreter start-up): what the
    image itself costs, stripped, hashed, deflated and committed."""
    os.environ.update(environment(work))
    project = work / "proj"
    (project / ".git").mkdir(parents=True)
    os.chdir(project)
    from click.testing import CliRunner

    from machine_git.cli import cli

    runner = CliRunner()
    count = [0]

    def tagger(*extra: str) -> timing.Case:
        def case() -> float:
            count[0] += 1
            session = work / f"s{count[0]}.jsonl"
            png = noise_png(820, 820, 5000 + count[0])
            session.write_text(session_with(png, f"warm-{count[0]:04d}"))
            command = ["good", "--trace", "--session", str(session), *extra]
            started = time.perf_counter()
            done = runner.invoke(cli, command)
            took = time.perf_counter() - started
            if done.exit_code != 0:
                why = f"machine {' '.join(command)}: {done.output}"
                raise timing.CommandFailed(why)
            return took

        return case

    times = timing.rounds(
        {"no-images": tagger("--no-images"), "images": tagger()}, repeat
    )
    base, with_images = times["no-images"], times["images"]
    extra = [a - b for a, b in zip(with_images, base, strict=True)]
    median = timing.median
    print("the same, in one warm process:")
    print(f"  good --trace --no-images          {timing.ms(median(base))}")
    print(f"  good --trace                      {timing.ms(median(with_images))}")
    print(f"  the image's extra (paired median) {timing.ms(median(extra))}")


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def growth(work: Path) -> None:
    work.mkdir(parents=True)
    env = environment(work)
    pictures = [noise_png(256, 256, 1000 + i) for i in range(10)]
    total = sum(len(p) for p in pictures)
    sizes: dict[str, int] = {}
    for name, with_images in (("placeholder", False), ("images", True)):
        lines = []
        for i in range(1000):
            png = pictures[i % 10]
            uri = "data:image/png;base64," + base64.b64encode(png).decode()
            image = {"type": "image_url", "image_url": {"url": uri}}
            text = {"type": "text", "text": f"what changed in screen {i}?\n"}
            user = {"role": "user", "content": [text, image]}
            if not with_images:
                user = {"role": "user", "content": text["text"] + "[image]"}
            answer = {"role": "assistant", "content": f"Screen {i} shows a chart."}
            lines.append(jsonio.compact({"messages": [user, answer]}))
        data = work / f"{name}.jsonl"
        data.write_text("\n".join(lines) + "\n")
        project = work / name
        (project / ".git").mkdir(parents=True)
        store_env = {**env, "MACHINE_DATA_DIR": str(work / f"data-{name}")}
        timing.run([*MACHINE, "import", str(data)], env=store_env, cwd=project)
        timing.run([*MACHINE, "gc"], env=store_env, cwd=project)
        sizes[name] = du(work / f"data-{name}")
        listed = subprocess.run(
            [
                "git",
                "-C",
                str(next((work / f"data-{name}").iterdir())),
                "ls-tree",
                "-r",
                "--name-only",
                "HEAD",
                "images",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        print(f"  {name}: {len(listed)} image files, store {sizes[name] / 1e6:.2f} MB")
    extra = sizes["images"] - sizes["placeholder"]
    print("1,000 rows sharing 10 images:")
    print(f"  the 10 images' bytes            {total / 1e6:.2f} MB")
    print(f"  store growth over placeholders  {extra / 1e6:.2f} MB")
    print(f"  growth / images' bytes          {extra / total:.2f}")
    print(f"  if each row kept its own copy   {100 * total / 1e6:.2f} MB")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="machine-bench-images-"))
    try:
        tag_cost(work / "tag", args.repeat)
        tag_in_process(work / "warm", args.repeat)
        growth(work / "growth")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
