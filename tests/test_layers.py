"""The package's shape: rooms by concept, layers that point one way, a fast start.

import-linter checks the layers on every commit (pyproject.toml); these tests
check what it does not: that no two modules import each other, even through
imports inside functions, that every room is in the contract and says in its
docstring what it may use, and what ``machine good`` loads when it starts.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.conftest import PI_SESSIONS

ROOT = Path(__file__).parents[1]
PACKAGE = ROOT / "machine_git"
STARTUP = ROOT / "tests" / "fixtures" / "startup" / "good-modules.txt"


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _type_only(tree: ast.Module) -> set[int]:
    """The import nodes under ``if TYPE_CHECKING:`` (they never run)."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in node.body:
                skipped.update(id(n) for n in ast.walk(inner))
    return skipped


def _imported(module: str, path: Path, node: ast.AST, known: set[str]) -> list[str]:
    names: list[str] = []
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            package = (
                module if path.name == "__init__.py" else module.rpartition(".")[0]
            )
            for _ in range(node.level - 1):
                package = package.rpartition(".")[0]
            base = f"{package}.{base}" if base else package
        # ``from package import x`` reaches x when x is a module, else the package
        # (importing the package's __init__ first is Python's, not an edge).
        names = [f"{base}.{alias.name}" for alias in node.names]
    found = []
    for name in names:
        # The most specific module the name reaches (a function's name is not one).
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name and name.startswith("machine_git") and name != module:
            found.append(name)
    return found


def import_graph() -> dict[str, set[str]]:
    """Every module's imports of the package's modules, from the source.

    Counted wherever they are (module level or inside a function), except
    those under ``if TYPE_CHECKING:``.
    """
    modules = _modules()
    known = set(modules)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for module, path in modules.items():
        tree = ast.parse(path.read_text())
        skipped = _type_only(tree)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Import | ast.ImportFrom)
                and id(node) not in skipped
            ):
                graph[module].update(_imported(module, path, node, known))
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph)))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_two_modules_import_each_other_even_inside_functions() -> None:
    graph = import_graph()
    assert len(graph) > 100  # it did read the package
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle_through_a_function_level_import(
    tmp_path: Path,
) -> None:
    # The finder itself, on a graph with one cycle and one harmless chain.
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    source = "def f():\n    from machine_git.store import store\n"
    tree = ast.parse(source)
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom))
    known = {"machine_git.store", "machine_git.store.store"}
    assert _imported("machine_git.x", tmp_path / "x.py", node, known) == [
        "machine_git.store.store"
    ]


def _contract_layers() -> list[list[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["type"] == "layers")
    assert layers["containers"] == ["machine_git"]
    return [re.split(r"\s*[|:]\s*", layer) for layer in layers["layers"]]


def test_every_room_and_entry_point_is_in_the_layers_contract() -> None:
    named = {room for layer in _contract_layers() for room in layer}
    top = {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    rooms = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert named == top | rooms


def test_each_room_says_what_it_is_for_and_what_it_may_use() -> None:
    layers = _contract_layers()[1:]  # below the entry points
    for depth, layer in enumerate(layers):
        below = [room for lower in layers[depth + 1 :] for room in lower]
        for room in layer:
            doc = ast.get_docstring(
                ast.parse((PACKAGE / room / "__init__.py").read_text())
            )
            assert doc is not None, room
            purpose, _, rest = doc.partition("\n")
            assert purpose.endswith("."), room
            said = re.search(r"May use: (.*?) \(pyproject", " ".join(rest.split()))
            assert said is not None, room
            allowed = said.group(1)
            expected = ", ".join(below) if below else "nothing of machine's"
            assert allowed == expected, room


_IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|( *)(\S+)$")


def _loaded_by_good(project: Path) -> list[str]:
    """The modules ``python -X importtime`` reports for one ``machine good``."""
    done = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-m",
            "machine_git",
            "good",
            "--session",
            str(PI_SESSIONS / "basic.jsonl"),
        ],
        capture_output=True,
        text=True,
        cwd=project,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("good ")
    lines = [_IMPORTED.match(line) for line in done.stderr.splitlines()]
    return [m.group(2) for m in lines if m is not None]


def test_machine_good_loads_only_what_a_tag_needs(project: Path) -> None:
    loaded = _loaded_by_good(project)
    assert "pygit2" in loaded  # it did run the tag
    heavy = {"tinker", "tinker_cookbook", "torch", "click", "pydantic", "starlette"}
    heavy |= {"tml_renderers", "transformers", "numpy", "jsonschema", "uvicorn"}
    assert sorted({name.split(".")[0] for name in loaded} & heavy) == []
    ours = sorted({name for name in loaded if name.startswith("machine_git")})
    expected = STARTUP.read_text().split()
    # A module that joins the start-up path must be added here on purpose
    # (and measured: bench/imports.py); one that leaves it, removed.
    assert ours == expected
