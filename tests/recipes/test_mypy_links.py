"""mypy checks every recipe's Python file through tests/typecheck/recipes/: one link per file, named for its recipe."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import REPO

LINKS = REPO / "tests" / "typecheck" / "recipes"


def link_name(path: Path) -> str:
    """recipes/NAME/run.py -> NAME.py; recipes/NAME/other.py -> NAME-other.py."""
    recipe = path.parent.name
    return f"{recipe}.py" if path.name == "run.py" else f"{recipe}-{path.name}"


def test_every_python_file_of_a_recipe_has_its_link_for_mypy():
    wanted = {link_name(p): p.resolve() for p in (REPO / "recipes").glob("*/*.py")}
    links = {p.name: p.resolve() for p in LINKS.glob("*.py")}
    missing = sorted(f"ln -s ../../../recipes/{p.parent.name}/{p.name} tests/typecheck/recipes/{name}"
                     for name, p in wanted.items() if links.get(name) != p)
    assert missing == [], "run these to have mypy check them"


def test_every_link_for_mypy_is_a_link_to_a_recipe_file():
    recipes = (REPO / "recipes").resolve()
    stale = sorted(p.name for p in LINKS.glob("*.py")
                   if not p.is_symlink() or not p.resolve().is_file() or p.resolve().parent.parent != recipes)
    assert stale == [], "remove the links whose recipe file is gone"


def test_mypy_reads_the_links():
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert 'files = ["cmx", "tests/typecheck/recipes", "bench"]' in text
