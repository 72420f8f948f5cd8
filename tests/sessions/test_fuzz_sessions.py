"""Fuzzing the session readers: damaged session files give a row or one error.

Each reader (every format ``machine_git.sessions.detect`` knows) gets the real
session fixtures of its format, mutated: lines truncated, dropped, repeated
or swapped, values replaced with values of other types, huge strings, deep
nesting, invalid UTF-8, escaped lone surrogates, random bytes. Whatever comes
in, the outcome is a valid row or a MachineError of one line; never another
exception, and never a write to the store.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from machine_git.core import jsonio
from machine_git.core import paths
from machine_git.core.errors import INVALID
from machine_git.core.errors import MachineError
from machine_git.rows import rows
from machine_git.rows import schemas
from machine_git.sessions import detect
from machine_git.store.store import Store
from tests.conftest import FIXTURES
from tests.conftest import Run

pytestmark = pytest.mark.slow

_HOST_FOLDERS = ("pi", "claude", "codex", "gemini", "letta")
_DEEP = "\x00fuzz-deep\x00"  # stands in for a value orjson cannot write (too deep)


def _seeds() -> dict[str, list[bytes]]:
    """The fixture files of each format, read once."""
    found: dict[str, list[bytes]] = {}
    for host in _HOST_FOLDERS:
        for path in sorted((FIXTURES / host).rglob("*")):
            if not path.is_file() or path.suffix not in (".jsonl", ".json", ".af"):
                continue
            try:
                form = detect.sniff(path)
            except MachineError:
                continue  # expected outputs, manifests: not sessions
            found.setdefault(form.name, []).append(path.read_bytes())
    return found


SEEDS = _seeds()
# The file formats; OpenCode's database is fuzzed row by row in test_opencode.py.
FORMATS = {f.name: f for f in detect.FORMATS if not f.database}


def test_every_reader_has_fixtures_to_fuzz() -> None:
    assert sorted(SEEDS) == sorted(FORMATS)


# -- mutations ------------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=40),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)
odd_values = st.one_of(
    json_values,
    st.integers(min_value=1, max_value=1 << 20).map(lambda n: "x" * n),  # huge
    st.just(_DEEP),
    st.sampled_from(["", " ", "\n", "\x00", "\u202e", "\U0001f600" * 3, "null"]),
)


def _nodes(value: Any) -> list[tuple[Any, Any]]:
    """Every (container, key) in a JSON value, depth first."""
    out: list[tuple[Any, Any]] = []
    stack = [value]
    while stack:
        node = stack.pop()
        items: list[tuple[Any, Any]] = []
        if isinstance(node, dict):
            items = [(node, k) for k in node]
        elif isinstance(node, list):
            items = [(node, i) for i in range(len(node))]
        for container, key in items:
            out.append((container, key))
            stack.append(container[key])
    return out


def _dump(value: Any, depth: int) -> bytes:
    data = orjson.dumps(value)
    deep = b"[" * depth + b"1" + b"]" * depth
    return data.replace(orjson.dumps(_DEEP), deep)


def _retype(text: bytes, pick: int, value: Any, depth: int) -> bytes:
    try:
        parsed = orjson.loads(text)
    except orjson.JSONDecodeError:
        return text
    nodes = _nodes(parsed)
    if not nodes:
        return _dump(value, depth)
    container, key = nodes[pick % len(nodes)]
    container[key] = value
    try:
        return _dump(parsed, depth)
    except orjson.JSONEncodeError:  # nested deeper than orjson writes (255)
        return text


Mutation = Callable[[list[bytes]], list[bytes]]


@st.composite
def mutations(draw: st.DrawFn) -> Mutation:
    kind = draw(
        st.sampled_from(
            [
                "truncate",
                "drop",
                "repeat",
                "swap",
                "garbage",
                "bad utf-8",
                "lone surrogate",
                "retype",
                "cut file",
            ]
        )
    )
    at = draw(st.integers(min_value=0, max_value=10_000))
    other = draw(st.integers(min_value=0, max_value=10_000))
    blob = draw(st.binary(max_size=64))
    value = draw(odd_values)
    depth = draw(st.sampled_from([3, 200, 1100, 5000]))

    def apply(lines: list[bytes]) -> list[bytes]:
        if not lines:
            return [blob]
        i, j = at % len(lines), other % len(lines)
        line = lines[i]
        out = list(lines)
        if kind == "truncate":
            out[i] = line[: other % (len(line) + 1)]
        elif kind == "drop":
            del out[i]
        elif kind == "repeat":
            out.insert(i, line)
        elif kind == "swap":
            out[i], out[j] = out[j], out[i]
        elif kind == "garbage":
            out[i] = blob
        elif kind == "bad utf-8":
            cut = other % (len(line) + 1)
            out[i] = line[:cut] + b"\xff\xc3(\xed\xa0\x80" + line[cut:]
        elif kind == "lone surrogate":
            quote = line.find(b'"', other % (len(line) + 1))
            if quote >= 0:
                out[i] = line[: quote + 1] + b"\\ud800" + line[quote + 1 :]
        elif kind == "retype":
            out[i] = _retype(line, other, value, depth)
        else:  # cut the whole file short, as a crash mid-write would
            joined = b"\n".join(lines)
            return joined[: other % (len(joined) + 1)].split(b"\n")
        return out

    return apply


def _mutated(seed: bytes, changes: list[Mutation]) -> bytes:
    try:
        # One JSON document (a Letta history or agent file): mutate it as one
        # line, so that a retype can reach any value in it.
        lines = [orjson.dumps(orjson.loads(seed))]
    except orjson.JSONDecodeError:
        lines = seed.split(b"\n")  # JSONL
    for change in changes:
        lines = change(lines)
    return b"\n".join(lines)


# -- outcomes ---------------------------------------------------------------------


def _outcome(form: detect.Format, path: Path) -> str:
    """``row`` or ``error``; anything but a MachineError fails the test."""
    try:
        turn, report = form.read(path, None)
        report.warning()
        for label in ("good", "bad"):
            for trace in (False, True):
                row = rows.build(turn, label=label, trace=trace, reasoning=trace)
                schemas.check_row(row, "the row is invalid")
                rows.row_path(row["id"])
                jsonio.canonical(row)
    except MachineError as e:
        message = str(e)
        assert message
        assert "\n" not in message, message
        assert len(message) <= 2000, message[:300]
        return "error"
    return "row"


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_a_damaged_session_gives_a_row_or_one_error(
    name: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    form = FORMATS[name]
    folder = tmp_path_factory.mktemp("fuzz")
    path = folder / ("session.json" if name.startswith("letta-") else "s.jsonl")

    @settings(max_examples=100, deadline=None, database=None, derandomize=True)
    @given(
        seed=st.sampled_from(SEEDS[name]),
        changes=st.lists(mutations(), min_size=1, max_size=4),
    )
    def check(seed: bytes, changes: list[Mutation]) -> None:
        path.write_bytes(_mutated(seed, changes))
        assert _outcome(form, path) in ("row", "error")

    check()


@settings(max_examples=60, deadline=None, database=None, derandomize=True)
@given(data=st.binary(max_size=2048))
def test_random_bytes_are_one_error_for_every_reader(data: bytes) -> None:
    # Not a session at all: each reader must say so in one line.
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "s.jsonl"
        path.write_bytes(data)
        for form in detect.FORMATS:
            _outcome(form, path)


@settings(
    max_examples=40,
    deadline=None,
    database=None,
    derandomize=True,  # the same examples every run: CI never flakes
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    name=st.sampled_from(sorted(FORMATS)),
    pick=st.integers(min_value=0),
    changes=st.lists(mutations(), min_size=1, max_size=3),
)
def test_machine_good_on_a_damaged_session_never_writes_a_bad_row(
    project: Path, run: Run, name: str, pick: int, changes: list[Mutation]
) -> None:
    store = Store.create(paths.store_path(project), project)
    seeds = SEEDS[name]
    session = project.parent / "fuzzed-session"
    session.write_bytes(_mutated(seeds[pick % len(seeds)], changes))
    before = store.repo.references["refs/heads/main"].target

    result = run("good", "--trace", "--session", str(session))

    after = Store.open(store.path).repo.references["refs/heads/main"].target
    lines = result.stderr.splitlines()
    if result.exit_code == 0:
        assert result.stdout.startswith(("good ", "already tagged ", "moved "))
        assert [x for x in lines if not x.startswith("warning: ")] == []
    else:
        assert result.exit_code == INVALID
        assert result.stdout == ""
        assert lines[-1].startswith("Error: ")
        assert all(x.startswith("warning: ") for x in lines[:-1])
        assert after == before  # nothing was written
    checked = run("validate", "--store")
    assert checked.exit_code == 0, checked.stdout
