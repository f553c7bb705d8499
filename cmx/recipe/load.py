"""Loading one recipe folder: parse, validate, merge onto the base it extends, and fingerprint its files."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from cmx.errors import RecipeError

if TYPE_CHECKING:
    from cmx.recipe.model import Recipe

# (file name relative to the recipe folder, st_mtime_ns, st_size); a missing file has (name, 0, -1).
# A base's files are named through the shared parent folder: ../<base>/recipe.yaml
FileStamp = tuple[str, int, int]


def load_recipe(folder: Path, source: str = "", *,
                _below: tuple[str, ...] = ()) -> tuple[Recipe, tuple[FileStamp, ...]]:
    """Load `folder/recipe.yaml` and its run.py; return the Recipe and the stamps of its files.

    The Recipe's digest is a sha256 over recipe.yaml, run.py and the files the recipe lists, and over its base's
    digest when it `extends:` one, so that editing any of them changes the cache keys of its steps. The stamps
    cover the base's files too: the index re-parses a recipe whose base changed. `_below`: the recipes that
    extend this one, while their bases are loaded (a cycle is an error).
    """
    import hashlib  # parsing imports stay here: the index imports this module for stamps only
    from dataclasses import replace

    from cmx.recipe.schema import validate_recipe
    from cmx.recipe.yamlload import load_yaml

    refuse_links_out(folder)
    yaml_path = folder / "recipe.yaml"
    try:
        raw = yaml_path.read_bytes()
    except FileNotFoundError:
        raise RecipeError("recipe.yaml is missing", where=str(folder)) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise RecipeError("recipe.yaml is not UTF-8 text", where=str(yaml_path)) from None
    run_path = folder / "run.py"
    has_run = run_path.is_file()
    if not has_run and os.path.lexists(run_path):  # a folder named run.py: never "ran" with no code run
        raise RecipeError("run.py is not a file", where=str(run_path), hint="run.py holds `def run(ctx) -> dict`")
    data = load_yaml(yaml_path, text)
    base, base_stamps = _base(data, folder, source, _below)
    recipe = validate_recipe(data, folder, source=source, has_run=has_run, base=base)
    digest = hashlib.sha256()
    for name in hashed_files(recipe):
        data_bytes = raw if name == "recipe.yaml" else (folder / name).read_bytes()
        digest.update(name.encode() + b"\0" + len(data_bytes).to_bytes(8, "little") + data_bytes)
    if base is not None:
        digest.update(b"extends\0" + base.name.encode() + b"\0" + base.digest.encode())
    stamps = stamp_files(folder, ("recipe.yaml", "run.py", *recipe.files))
    return replace(recipe, digest=digest.hexdigest()), stamps + base_stamps


def refuse_links_out(folder: Path) -> None:
    """A recipe runs only what its source holds: its folder, recipe.yaml and run.py may be symbolic links only to
    what stays inside the source's recipe folder (`folder`'s parent), and none may point at nothing (a dangling
    run.py would be a step that "ran" with no code). A pinned git source's sha then covers every byte it runs."""
    from cmx.tools.fs import link_out

    for name in ("recipe.yaml", "run.py"):
        found = link_out(folder.parent, f"{folder.name}/{name}")
        if found is None:
            continue
        what = "which does not exist" if found.dangling else f"outside the source's recipe folder {folder.parent}"
        raise RecipeError(f"recipe {folder.name!r}: {found.link.relative_to(folder.parent)} is a symbolic link to "
                          f"{found.target!r}, {what}", where=str(found.link),
                          hint="commit the file itself, not a link: a recipe runs only what its source holds")


def hashed_files(recipe: Recipe) -> tuple[str, ...]:
    """The files of its own folder a recipe's digest covers, in the order hashed (its base's digest is hashed after
    them): recipe.yaml, its own run.py (not one it runs from a base), and the files it lists."""
    own_run = recipe.has_run and recipe.run_from is None
    return ("recipe.yaml", *(("run.py",) if own_run else ()), *sorted(recipe.files))


def _base(data: object, folder: Path, source: str,
          below: tuple[str, ...]) -> tuple[Recipe | None, tuple[FileStamp, ...]]:
    """The recipe that `data` extends, loaded (and merged onto its own base), with its files' stamps as the
    child names them; (None, ()) when it extends nothing. A base is a recipe folder beside this one."""
    from cmx.recipe.schema import extends_of

    yaml_path = folder / "recipe.yaml"
    found = extends_of(data, yaml_path)
    if found is None:
        return None, ()
    name, line = found
    chain = (*below, folder.name)
    if name in chain:
        cycle = " → ".join((*chain[chain.index(name):], name))
        raise RecipeError(f"`extends` makes a cycle: {cycle}", where=f"{yaml_path}:{line}",
                          hint="a base must not extend, directly or not, a recipe that extends it")
    base_folder = folder.parent / name
    if not (base_folder / "recipe.yaml").is_file():
        near = sorted(e.name for e in folder.parent.iterdir() if (e / "recipe.yaml").is_file() and e != folder) \
            if folder.parent.is_dir() else []
        import difflib

        close = difflib.get_close_matches(name, near, n=1)
        raise RecipeError(f"extends {name!r}, but there is no recipe {name!r} beside this one "
                          f"(no {base_folder / 'recipe.yaml'})", where=f"{yaml_path}:{line}",
                          hint=(f"did you mean {close[0]!r}? " if close else "") +
                               "a base is a recipe folder of the same source")
    base, stamps = load_recipe(base_folder, source, _below=chain)
    # the base's stamps, relative to its folder, as this folder reaches them; its own base's already are
    return base, tuple((n if n.startswith("../") else f"../{name}/{n}", m, s) for n, m, s in stamps)


def stamp_files(folder: str | Path, names: tuple[str, ...]) -> tuple[FileStamp, ...]:
    """Stat each file; the index compares these to decide whether to re-parse."""
    stamps = []
    for name in names:
        try:
            st = os.stat(f"{folder}/{name}")
            stamps.append((name, st.st_mtime_ns, st.st_size))
        except FileNotFoundError:
            stamps.append((name, 0, -1))
    return tuple(stamps)
