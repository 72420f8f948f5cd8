"""git's progress, read from a pseudo-terminal: real git, real repositories."""

from __future__ import annotations

import subprocess
from pathlib import Path

from machine_git.core import gitprogress


class Recorder:
    """A Progress that remembers each stage: label, total and units done."""

    def __init__(self) -> None:
        self.stages: list[list[object]] = []
        self.ended = 0

    def begin(self, label: str, total: int | None) -> None:
        self.stages.append([label, total, 0])

    def advance(self, count: int = 1) -> None:
        done = self.stages[-1][2]
        assert isinstance(done, int)
        self.stages[-1][2] = done + count

    def end(self) -> None:
        self.ended += 1


def repository(path: Path, files: int) -> Path:
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    for n in range(files):
        (path / f"f{n}.txt").write_text(f"file {n}\n")
    subprocess.run(["git", "-C", str(path), "add", "."], check=True)
    who = ["-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "-C", str(path), *who, "commit", "-qm", "f"], check=True)
    return path


def test_git_gc_stages_come_through_with_their_totals(tmp_path: Path) -> None:
    repo = repository(tmp_path / "r", 30)
    heard = Recorder()

    status, other = gitprogress.run(["git", "-C", str(repo), "gc"], heard)

    assert status == 0
    # 30 blobs, a tree, a commit. "Enumerating" has no total: git counts as
    # it goes. Which objects are tried for deltas is git's choice.
    labels = [stage[0] for stage in heard.stages]
    assert labels == [
        "enumerating objects",
        "counting objects",
        "compressing objects",
        "writing objects",
    ]
    assert heard.stages[0] == ["enumerating objects", None, 32]
    assert heard.stages[1] == ["counting objects", 32, 32]
    assert heard.stages[3] == ["writing objects", 32, 32]
    assert heard.ended == 1
    # What is not progress stays, as git said it; no progress line is in it.
    assert other[-1].startswith("Total 32 (delta 0)")
    assert not any("objects:" in line for line in other)
    packs = list((repo / ".git" / "objects" / "pack").glob("pack-*.pack"))
    assert len(packs) == 1


def test_what_is_not_progress_is_kept_for_the_error(tmp_path: Path) -> None:
    heard = Recorder()

    status, other = gitprogress.run(["git", "-C", str(tmp_path), "gc"], heard)

    assert status != 0
    assert other == [
        "fatal: not a git repository (or any of the parent directories): .git"
    ]
    assert heard.stages == []
