"""Realistic text for benchmark rows, from the Python standard library.

Agent turns are prose and code: a request in English, answers that explain
and quote code, tool outputs that are file contents, diffs, test runs and
listings. The standard library has all of it on every machine, offline:
docstrings give the English, the source files give the code, and many
sessions reading the same files give the repetition real traces have (the
same file read in two sessions), which is what git's deltas feed on.
"""

from __future__ import annotations

import ast
import difflib
import itertools
import math
import random
import sysconfig
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

_MODULES = 240  # source files sampled from the standard library


@dataclass(frozen=True)
class Source:
    """One source file: its path as a project would show it, and its lines."""

    path: str
    lines: list[str]


class Corpus:
    """Sentences and source files; every draw takes an explicit ``random.Random``."""

    def __init__(self) -> None:
        root = Path(sysconfig.get_paths()["stdlib"])
        files = sorted(
            p
            for p in root.rglob("*.py")
            if not {"test", "idle_test", "site-packages", "dist-packages"}
            & set(p.parts)
        )
        step = max(1, len(files) // _MODULES)
        self.sources: list[Source] = []
        self.sentences: list[str] = []
        for path in files[::step][:_MODULES]:
            try:
                text = path.read_text(encoding="utf-8")
                tree = ast.parse(text)
            except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
                continue
            relative = str(path.relative_to(root))
            self.sources.append(Source(f"src/{relative}", text.splitlines()))
            for node in ast.walk(tree):
                if isinstance(
                    node,
                    ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef,
                ):
                    doc = ast.get_docstring(node)
                    if doc:
                        self.sentences += _sentences(doc)
        self.texts = ["\n".join(source.lines) for source in self.sources]
        self.functions = [
            [
                line.split("def ", 1)[1].split("(", 1)[0]
                for line in source.lines
                if line.lstrip().startswith("def ")
            ]
            or ["main"]
            for source in self.sources
        ]
        counts = Counter(w for s in self.sentences for w in s.split())
        self.vocabulary = [w for w, _ in counts.most_common()]
        self.weights = list(itertools.accumulate(n for _, n in counts.most_common()))
        self.folders = sorted({s.path.rsplit("/", 1)[0] for s in self.sources})

    # -- prose -------------------------------------------------------------------

    def prose(self, rng: random.Random, sentences: int) -> str:
        """A paragraph of ``sentences`` English sentences, each one new.

        A real sentence with about a third of its words swapped for words
        drawn by frequency: the statistics of English, but no sentence
        repeats from row to row (a small pool of whole sentences would let
        gzip, across rows, find repeats that real turns do not have).
        """
        out = []
        for _ in range(sentences):
            words = rng.choice(self.sentences).split()
            swaps = rng.choices(self.vocabulary, cum_weights=self.weights, k=len(words))
            out.append(
                " ".join(
                    swap if rng.random() < 0.35 else word
                    for word, swap in zip(words, swaps, strict=True)
                )
            )
        return " ".join(out)

    def request(self, rng: random.Random) -> str:
        """What a user asks an agent: a sentence or a few, sometimes with code."""
        text = self.prose(rng, rng.randint(1, 4))
        source = rng.choice(self.sources)
        text = f"In {source.path}: {text}"
        if rng.random() < 0.3:
            text += "\n\n```python\n" + self.code(rng, rng.randint(5, 40)) + "\n```"
        return text

    def answer(self, rng: random.Random) -> str:
        """An agent's final answer: explanation, often with a code block."""
        parts = [self.prose(rng, rng.randint(2, 6))]
        if rng.random() < 0.4:
            parts.append("```python\n" + self.code(rng, rng.randint(10, 60)) + "\n```")
        if rng.random() < 0.5:
            parts.append(self.prose(rng, rng.randint(1, 4)))
        return "\n\n".join(parts)

    # -- code and tool output ------------------------------------------------------

    def code(self, rng: random.Random, lines: int) -> str:
        """``lines`` consecutive lines of a real source file."""
        source = rng.choice(self.sources)
        start = rng.randrange(max(1, len(source.lines) - lines))
        return "\n".join(source.lines[start : start + lines])

    def read(self, rng: random.Random, size: int) -> tuple[str, str]:
        """(path, contents) as a read tool shows a part of a file."""
        source = rng.choice(self.sources)
        lines = max(1, size // 40)
        # Reads start at the top or at a 50-line boundary, as an agent paging
        # through a file does; that is what repeats across sessions.
        start = rng.choice([0, 0, 50, 100, 150, 200]) % max(1, len(source.lines))
        return source.path, "\n".join(source.lines[start : start + lines]) + "\n"

    def diff(self, rng: random.Random, size: int) -> str:
        """A unified diff of a small edit to a real file."""
        source = rng.choice(self.sources)
        lines = max(4, size // 60)
        start = rng.randrange(max(1, len(source.lines) - lines))
        old = source.lines[start : start + lines]
        new = list(old)
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(new)) if new else 0
            new.insert(at, "    " + rng.choice(self.sentences)[:70].replace('"', "'"))
        return (
            "\n".join(
                difflib.unified_diff(
                    old, new, f"a/{source.path}", f"b/{source.path}", lineterm=""
                )
            )
            + "\n"
        )

    def test_run(self, rng: random.Random, size: int) -> str:
        """pytest output naming real function names."""
        index = rng.randrange(len(self.sources))
        names = self.functions[index]
        stem = self.sources[index].path.rsplit("/", 1)[-1][:-3]
        out = ["============================= test session starts ====="]
        total = passed = 0
        while total < size:
            name = rng.choice(names)
            verdict = "PASSED" if rng.random() < 0.9 else "FAILED"
            passed += verdict == "PASSED"
            out.append(f"tests/test_{stem}.py::test_{name} {verdict}")
            total += len(out[-1]) + 1
        failed = len(out) - 1 - passed
        out.append(f"====== {passed} passed, {failed} failed in 0.42s ======")
        return "\n".join(out) + "\n"

    def grep(self, rng: random.Random, size: int) -> tuple[str, str]:
        """(pattern, matches) as ``grep -n`` prints an identifier's uses."""
        word = rng.choice(self.functions[rng.randrange(len(self.sources))])
        out: list[str] = []
        total = 0
        for index in rng.sample(range(len(self.sources)), min(40, len(self.sources))):
            if word not in self.texts[index]:
                continue
            source = self.sources[index]
            for number, line in enumerate(source.lines, start=1):
                if word in line:
                    out.append(f"{source.path}:{number}:{line.strip()}")
                    total += len(out[-1]) + 1
                    if total >= size:
                        return word, "\n".join(out) + "\n"
        return word, ("\n".join(out) + "\n") if out else ""

    def listing(self, rng: random.Random) -> tuple[str, str]:
        """(folder, names) as ls prints a folder of the project."""
        folder = rng.choice(self.folders)
        names = sorted(
            s.path.rsplit("/", 1)[-1] for s in self.sources if s.path.startswith(folder)
        )
        return folder, "\n".join(names) + "\n"


def output_size(rng: random.Random) -> int:
    """How long a tool output is: log-normal, median 600 bytes, 40 B to 12 KB."""
    return int(min(12_000, max(40, math.exp(rng.gauss(math.log(600), 1.0)))))


def _sentences(doc: str) -> list[str]:
    text = " ".join(doc.split())
    out = []
    for part in text.split(". "):
        part = part.strip()
        if 20 <= len(part) <= 300 and part[0].isupper():
            out.append(part if part.endswith(".") else part + ".")
    return out
