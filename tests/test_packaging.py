from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]


def test_every_bundled_folder_is_a_listed_package() -> None:
    # A folder of data files that setuptools finds but the config does not
    # list makes every install print ~50 lines of "Package would be ignored".
    mapped = {folder: package for package, folder in SETUPTOOLS["package-dir"].items()}
    missing = []
    for top in ("schemas", "templates", "hooks", "skills"):
        for folder in [ROOT / top, *(p for p in (ROOT / top).rglob("*") if p.is_dir())]:
            if folder.name == "__pycache__" or not any(
                f.is_file() for f in folder.iterdir()
            ):
                continue
            relative = folder.relative_to(ROOT).as_posix()
            top_package = mapped[top]
            package = mapped.get(relative)
            if package is None and top != "skills":
                missing.append(relative)
            elif package is not None:
                assert package in SETUPTOOLS["packages"], package
            elif top == "skills":
                assert top_package in SETUPTOOLS["packages"]
    assert missing == []


def test_the_license_the_metadata_names_ships() -> None:
    assert PYPROJECT["project"]["license"] == "MIT"
    assert PYPROJECT["project"]["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().startswith("MIT License\n")


def test_every_python_package_in_the_tree_is_listed() -> None:
    # setuptools installs only the packages named in pyproject.toml: a new
    # subpackage left out works in the editable checkout and is missing
    # from every wheel, so `machine` fails with ModuleNotFoundError there.
    found = {
        init.parent.relative_to(ROOT).as_posix().replace("/", ".")
        for init in (ROOT / "machine_git").rglob("__init__.py")
    }
    assert sorted(found - set(SETUPTOOLS["packages"])) == []
