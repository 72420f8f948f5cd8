"""git's own progress, read from a pseudo-terminal and shown as machine's bars.

git reports progress ("Writing objects:  45% (4500/10000)") only to a
terminal, and ``git gc`` has no option to force it. So a long git command
whose progress is wanted runs with its stderr on a pseudo-terminal; its
lines are parsed into stages of a :class:`~machine_git.core.progress.Progress`
(one per title: counting, compressing, writing objects) and the rest of
what it printed is kept, for the one-line error if it fails.
"""

from __future__ import annotations

import os
import re
import subprocess

from machine_git.core.progress import Progress

# "Counting objects:  45% (123/456)", "Enumerating objects: 1234, done."
_LINE = re.compile(
    r"^(?P<title>[A-Z][A-Za-z ]*?):\s+"
    r"(?:\d+% \((?P<done>\d+)/(?P<total>\d+)\)|(?P<count>\d+))"
)


class _Stages:
    """Progress lines of git, turned into stages of a Progress."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.title: str | None = None
        self.done = 0
        self.other: list[str] = []  # every line that is not progress

    def line(self, text: str) -> None:
        found = _LINE.match(text)
        if found is None:
            if text.strip():
                self.other.append(text)
            return
        done = int(found["done"] or found["count"])
        if found["title"] != self.title:
            total = int(found["total"]) if found["total"] else None
            self.progress.begin(found["title"].lower(), total)
            self.title, self.done = found["title"], 0
        self.progress.advance(max(0, done - self.done))
        self.done = max(done, self.done)


def run(command: list[str], progress: Progress) -> tuple[int, list[str]]:
    """Run ``command``, its progress shown on ``progress``.

    Returns its exit status and the lines it printed that were not
    progress. stdin and stdout go nowhere: for commands that print nothing.
    """
    master, terminal = os.openpty()
    try:
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=terminal,
        )
    except BaseException:
        os.close(master)
        raise
    finally:
        os.close(terminal)  # git (and what it runs) hold the only copies now
    stages = _Stages(progress)
    pending = b""
    with os.fdopen(master, "rb", buffering=0) as reader:
        while True:
            try:
                chunk = reader.read(1 << 16)
            except OSError:  # EIO: everyone who wrote to the terminal is gone
                break
            if not chunk:
                break
            *lines, pending = re.split(rb"[\r\n]", pending + chunk)
            for line in lines:
                stages.line(line.decode("utf-8", "replace"))
    stages.line(pending.decode("utf-8", "replace"))
    progress.end()
    return proc.wait(), stages.other
