"""docs/architecture.md is the design the code cites: every citation of it names a section it has, and its table of
layers is the order tests/test_layers.py enforces."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import REPO
from tests.test_layers import ORDER

PAGE = REPO / "docs" / "architecture.md"
# where the project's own text is: code, tests, benchmark scripts, recipes, templates and the docs
SCANNED = ("cmx", "tests", "bench", "recipes", "templates", "docs", "README.md", "Makefile", "pyproject.toml")
SUFFIXES = {".py", ".md", ".yaml", ".yml", ".j2", ".sh", ".toml", ""}
CITATION = re.compile(r"architecture\.md § ([^\n.,;:()\[\]`\"]+)")
ANCHOR = re.compile(r"architecture\.md#([\w-]+)|\]\(#([\w-]+)\)")
# the design document that lived outside the repository, under its old name (spelt so this file does not cite it)
OLD_DESIGN = "design" + ".md"


def _headings(text: str) -> list[str]:
    return [line.lstrip("#").strip() for line in text.splitlines() if re.match(r"#{1,6} ", line)]


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def _project_files() -> list[Path]:
    out: list[Path] = []
    for name in SCANNED:
        path = REPO / name
        found = [path] if path.is_file() else sorted(path.rglob("*"))
        out += [p for p in found if p.is_file() and p.suffix in SUFFIXES and "__pycache__" not in p.parts]
    return out


def _texts() -> dict[Path, str]:
    texts = {}
    for path in _project_files():
        try:
            texts[path] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
    return texts


def test_every_citation_of_a_section_names_a_heading_of_the_page() -> None:
    headings = set(_headings(PAGE.read_text(encoding="utf-8")))
    cited = {(path.relative_to(REPO).as_posix(), m.group(1).strip())
             for path, text in _texts().items() if path != PAGE for m in CITATION.finditer(text)}
    assert cited, "nothing cites a section of docs/architecture.md"
    assert sorted(c for c in cited if c[1] not in headings) == []


def test_every_link_to_a_section_of_the_page_finds_its_anchor() -> None:
    anchors = {_slug(h) for h in _headings(PAGE.read_text(encoding="utf-8"))}
    links = set()
    for path, text in _texts().items():
        for m in ANCHOR.finditer(text):
            from_elsewhere, within = m.groups()
            if from_elsewhere or path == PAGE:  # `](#x)` elsewhere is an anchor of that page
                links.add((path.relative_to(REPO).as_posix(), from_elsewhere or within))
    assert links, "no link to a section of docs/architecture.md"
    assert sorted(link for link in links if link[1] not in anchors) == []


def test_the_layers_table_lists_the_layers_in_the_order_the_layer_test_enforces() -> None:
    text = PAGE.read_text(encoding="utf-8")
    section = text.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    table = section.split("\n### ", 1)[0]
    rows = re.findall(r"^\| `([\w.]+?)/?` \|", table, flags=re.MULTILINE)
    assert tuple(r.removesuffix(".py") for r in rows) == ORDER


def test_nothing_cites_the_design_document_that_lived_outside_the_repository() -> None:
    citing = sorted(path.relative_to(REPO).as_posix() for path, text in _texts().items() if OLD_DESIGN in text)
    assert citing == []
