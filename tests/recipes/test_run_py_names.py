"""Every name a recipe's run.py takes from a cmx module exists there: a module attribute (`llama.describe`) or an
imported name. A rename or an unused-import clean-up in cmx/ otherwise surfaces only when the recipe runs."""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

import pytest

from tests.conftest import REPO

RUN_FILES = sorted((REPO / "recipes").glob("*/run.py"))


def uses(path: Path) -> list[tuple[str, str, int]]:
    """(module, name, line) for `from cmx... import name` and for `alias.name` where alias is a cmx module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    modules: dict[str, str] = {}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("cmx"):
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if importlib.util.find_spec(full.rsplit(".", 1)[0]) and _is_module(full):
                    modules[alias.asname or alias.name] = full
                else:
                    out.append((node.module, alias.name, node.lineno))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("cmx"):
                    modules[alias.asname or alias.name] = alias.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
            out.append((modules[node.value.id], node.attr, node.lineno))
    return out


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


@pytest.mark.parametrize("path", RUN_FILES, ids=[p.parent.name for p in RUN_FILES])
def test_every_cmx_name_a_run_py_uses_exists(path: Path):
    missing = [f"{path.relative_to(REPO)}:{line}: {module} has no {name}"
               for module, name, line in uses(path) if not hasattr(importlib.import_module(module), name)]
    assert missing == []


def test_the_check_sees_module_attributes(tmp_path: Path):
    run = tmp_path / "run.py"
    run.write_text("from cmx.mlperf.benchmarks.llama2_70b import model as llama\n"
                   "def run(ctx):\n    return llama.no_such_function()\n")
    assert ("cmx.mlperf.benchmarks.llama2_70b.model", "no_such_function", 3) in uses(run)
