"""Which cmx versions a recipe source works with: `cmx-source.yaml` at the root of its recipes folder.

    requires-cmx: ">=0.2,<0.3"     # a PEP 440 specifier

A source without the file is taken as it is. One whose specifier leaves out this cmx is refused in one line that
names the cmx to install. YAML and `packaging` are imported only when a source has the file and the index has not
seen it pass (registry.index keeps the stamps of those that passed), so a warm `cmx find` reads neither.
"""

from __future__ import annotations

from pathlib import Path

from cmx import __version__
from cmx.errors import RegistryError
from cmx.extras import install_command

SOURCE_FILE = "cmx-source.yaml"
KEYS = ("requires-cmx",)


def check_compatible(name: str, root: Path, *, git: bool = False) -> None:
    """Refuse source `name` (its recipes folder: `root`; `git`: a pinned git source, which another commit may
    suit) when its cmx-source.yaml leaves out this cmx's version."""
    path = root / SOURCE_FILE
    if not path.is_file():
        return
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    from cmx.recipe.yamlload import LocDict, load_yaml

    data = load_yaml(path)
    if not isinstance(data, LocDict):
        raise RegistryError(f"{SOURCE_FILE} of recipe source {name!r} must be a mapping", where=f"{path}:1",
                            hint='for example `requires-cmx: ">=0.2,<0.3"`')
    text = data.get("requires-cmx")
    if text is not None:
        where = f"{path}:{data.line_of('requires-cmx')}"
        try:
            if not isinstance(text, str) or not text.strip():
                raise InvalidSpecifier(repr(text))
            spec = SpecifierSet(text)
        except InvalidSpecifier:
            raise RegistryError(f"requires-cmx {text!r} of recipe source {name!r} is not a version specifier",
                                where=where, hint='write a PEP 440 specifier in quotes, e.g. ">=0.2,<0.3"') from None
        if not spec.contains(__version__, prereleases=True):  # a dev build is judged too (0.3.0.dev1 < 0.3)
            wanted = "".join(text.split())
            raise RegistryError(
                f"recipe source {name!r} needs cmx {wanted} (this is {__version__}): "
                f"{install_command(version=wanted)}",
                hint=f"{path} says so" + (f"; or pin a commit of it written for cmx {__version__} "
                                          f"(`cmx registry update {name} SHA`)" if git else ""))
    # after requires-cmx: a file written for a newer cmx may hold keys this one does not know, and the line above
    # says the useful thing about it
    for key in data:
        if key not in KEYS:
            raise RegistryError(f"unknown key {key!r} in {SOURCE_FILE} of recipe source {name!r}",
                                where=f"{path}:{data.line_of(key)}", hint=f"allowed: {', '.join(KEYS)}")
