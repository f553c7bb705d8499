"""Set-ups of docs/getting-started.md: the worked example's home its early sections show."""

from __future__ import annotations

import re

from tests.conftest import REPO
from tests.docs.console import Session, blocks

WORKED_EXAMPLE = REPO / "docs" / "recipes.md"
FIRST_RECIPE = REPO / "docs" / "getting-started.md"


def worked_example_files() -> dict[str, str]:
    """recipes.md's worked example, file by file: each block under a line naming `recipes/NAME/FILE`."""
    text = WORKED_EXAMPLE.read_text(encoding="utf-8")
    section = text[text.index("## Worked example"):]
    section = section[:section.index("\n## ", 1)]
    files: dict[str, str] = {}
    for named in re.finditer(r"^`(recipes/[\w-]+/[\w.]+)`:.*?\n\n```\w+\n(.*?)```", section, re.S | re.M):
        files[named.group(1)] = named.group(2)
    return files


def worked_example(session: Session) -> None:
    """/tmp/tutorial as recipes.md's worked example leaves it: getting-started § 7's registry, the three recipes,
    and CMX_HOME pointing at it."""
    home = session.root / "tutorial"
    registry = next(b.text for b in blocks(FIRST_RECIPE.read_text(encoding="utf-8"))
                    if b.info == "yaml" and b.text.startswith("sources:"))
    session.write("/tmp/tutorial/registry.yaml", registry)
    for path, text in worked_example_files().items():
        session.write(f"/tmp/tutorial/{path}", text.rstrip("\n"))
    assert len(worked_example_files()) == 6, "recipes.md's worked example should name six files"
    session.env["CMX_HOME"] = str(home)


SETUPS = {"worked-example": worked_example}
