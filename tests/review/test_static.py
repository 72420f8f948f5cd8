"""What the pages load ships inside the package, byte for byte as published."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import machine_git.review

STATIC = Path(machine_git.review.__file__).parent / "static"
VENDOR = STATIC / "vendor"


def test_vendored_files_are_the_published_bytes() -> None:
    table = (VENDOR / "README.md").read_text()
    listed = dict(re.findall(r"\| `([^`]+)` \|[^\n]*\| `([0-9a-f]{64})` \|", table))
    assert set(listed) == {"uPlot.iife.min.js", "uPlot.min.css", "uPlot.LICENSE.txt"}
    for name, digest in listed.items():
        assert hashlib.sha256((VENDOR / name).read_bytes()).hexdigest() == digest, name
    assert "MIT License" in (VENDOR / "uPlot.LICENSE.txt").read_text()


def test_the_wheel_ships_templates_and_static_files() -> None:
    pyproject = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    for package in ("", ".templates", ".static", ".static.vendor"):
        assert f'"machine_git.review{package}",' in pyproject, package
    assert '"machine_git.review.templates" = ["*.html"]' in pyproject
    assert '"machine_git.review.static" = ["*.css", "*.js", "*.svg"]' in pyproject
    assert '"machine_git.review.static.vendor" = ["*"]' in pyproject
    shipped = {p.name for p in STATIC.iterdir()} | {
        p.name for p in (STATIC.parent / "templates").iterdir()
    }
    assert {"app.js", "app.css", "favicon.svg", "base.html", "queue.html"} <= shipped


def test_the_script_never_builds_html_from_data() -> None:
    # The only innerHTML it sets is a server-rendered, autoescaped fragment.
    script = (STATIC / "app.js").read_text()
    assert script.count("innerHTML") == 1
    assert "region.innerHTML = await answer.text()" in script
    assert "eval(" not in script and "new Function" not in script
