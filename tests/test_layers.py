"""Imports point down docs/architecture.md's list of layers, and a benchmark package is reached only through the
registry (from cmx/ and from recipes/).

Parsed from the source (no import runs): a `from cmx.X import` or `import cmx.X` in a module of
layer L must name a layer below L, or the floor every layer stands on.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

CMX = REPO / "cmx"
# docs/architecture.md § Layers: top to bottom
# (devices: what each kind of device is, as data every layer from tools up reads; it imports none of them)
ORDER = ("cli", "api", "sweep", "slurm", "k8s", "docker", "mlperf", "execute", "resolve", "registry", "recipe",
         "cache", "tools", "devices")
FLOOR = {"errors", "extras", "settings", "home", "secrets", "container", "templates", "__version__", "DISTRIBUTION",
         "__main__"}


def imports(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "cmx":
            out += [node.module] if node.module != "cmx" else [f"cmx.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names if a.name.split(".")[0] == "cmx"]
    return out


def layer(module: str) -> str:
    return module.split(".")[1].removesuffix(".py") if "." in module else "cmx"


def test_no_import_points_up_the_layers():
    upward = []
    for path in CMX.rglob("*.py"):
        own = path.relative_to(CMX).parts[0].removesuffix(".py")
        if own not in ORDER:
            continue
        for module in imports(path):
            other = layer(module)
            if other == own or other in FLOOR or other == "cmx":
                continue
            if other not in ORDER or ORDER.index(other) < ORDER.index(own):
                upward.append(f"{path.relative_to(REPO)} imports {module}")
    assert upward == []


def test_only_the_registry_and_a_benchmarks_own_package_import_it():
    benchmarks = CMX / "mlperf" / "benchmarks"
    packages = _benchmark_packages()
    strays = [f"{path.relative_to(REPO)} imports {module}" for path in CMX.rglob("*.py") for module in imports(path)
              if _names_a_benchmark_package(module, packages) and benchmarks / module.split(".")[3] not in path.parents]
    assert strays == []


def test_a_recipe_reaches_a_benchmark_only_through_the_registry():
    """recipes/**/run.py names a benchmark (benchmark_for("llama2-70b")) and may use the kit; a benchmark package's
    own modules are its business, behind the Protocol."""
    assert _recipe_strays() == []


def _recipe_strays() -> list[str]:
    packages = _benchmark_packages()
    return [f"{path.relative_to(REPO)} imports {module}" for path in sorted((REPO / "recipes").rglob("run.py"))
            for module in imports(path) if _names_a_benchmark_package(module, packages)]


def test_the_recipe_rule_sees_both_import_forms(tmp_path: Path):
    run = tmp_path / "run.py"
    run.write_text("from cmx.mlperf.benchmarks.llama2_70b import model\n"
                   "import cmx.mlperf.benchmarks.mixtral_8x7b.tiny_model\n"
                   "from cmx.mlperf.benchmarks import benchmark_for\n"
                   "from cmx.mlperf.benchmarks.kit import model_recipe\n")
    found = [m for m in imports(run) if _names_a_benchmark_package(m, _benchmark_packages())]
    assert found == ["cmx.mlperf.benchmarks.llama2_70b", "cmx.mlperf.benchmarks.mixtral_8x7b.tiny_model"]


def _benchmark_packages() -> set[str]:
    # kit/ is the shared defaults every benchmark package imports, not a benchmark
    benchmarks = CMX / "mlperf" / "benchmarks"
    return {p.name for p in benchmarks.iterdir() if (p / "__init__.py").is_file()} - {"kit"}


def _names_a_benchmark_package(module: str, packages: set[str]) -> bool:
    parts = module.split(".")
    return parts[:3] == ["cmx", "mlperf", "benchmarks"] and len(parts) > 3 and parts[3] in packages


def test_the_backends_know_nothing_of_loadgen_benchmarks_or_submissions():
    found = [f"{path.relative_to(REPO)} imports {m}" for path in (CMX / "mlperf" / "backends").rglob("*.py")
             for m in imports(path)
             if m.startswith(("cmx.mlperf.loadgen", "cmx.mlperf.benchmarks", "cmx.mlperf.submission",
                              "cmx.mlperf.app"))]
    assert found == []


def test_the_cli_reaches_the_library_only_through_the_api():
    """One exception: the start-up path of a cached run (cmx.cli.main) answers from its memo before the API,
    which costs more to import than that whole answer."""
    allowed = {"cmx.api", "cmx.errors", "cmx.__version__"}
    found = [f"{path.relative_to(REPO)} imports {m}" for path in (CMX / "cli").rglob("*.py") for m in imports(path)
             if m not in allowed and not m.startswith("cmx.cli")]
    assert found == ["cmx/cli/__init__.py imports cmx.execute.memo"]


def test_the_package_imports_form_no_circle():
    """Every import counts, wherever it stands in a module: inside a function, under TYPE_CHECKING. A circle closed by
    a late import still ties its modules together (neither can move, be read or be tested without the other); what
    both need goes to a module below both."""
    assert import_circles(module_graph(CMX, "cmx")) == []


def test_the_circle_rule_sees_imports_inside_functions_and_for_types_only(tmp_path: Path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from pkg.b import g\n    return g\n")
    (package / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.sub import c\n")
    (package / "sub" / "c.py").write_text("from .. import a\n")
    (package / "d.py").write_text("import pkg.a\n")
    assert import_circles(module_graph(package, "pkg")) == ["pkg.a -> pkg.b -> pkg.sub.c -> pkg.a"]


def module_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Each module of the package in `root` -> the modules of it that its source imports, anywhere in the file (a
    `from X import Y` counts X, and X.Y when it is a module; a relative import counts as the module it names)."""
    graph: dict[str, set[str]] = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        name = ".".join((package, *parts)).removesuffix(".__init__")
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        graph[name] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = ".".join(here.split(".")[:len(here.split(".")) - node.level + 1]) if node.level else ""
                module = ".".join(p for p in (base, node.module or "") if p)
                graph[name] |= {module, *(f"{module}.{a.name}" for a in node.names)}
            elif isinstance(node, ast.Import):
                graph[name] |= {a.name for a in node.names}
    return {m: {d for d in deps if d in graph and d != m} for m, deps in graph.items()}


def import_circles(graph: dict[str, set[str]]) -> list[str]:
    """One `a -> b -> a` line for each back edge a depth-first walk of `graph` meets: [] exactly when it has no
    circle."""
    circles = []
    state: dict[str, int] = {}

    def visit(module: str, stack: list[str]) -> None:
        state[module] = 1
        for dep in sorted(graph[module]):
            if state.get(dep) == 1:
                circles.append(" -> ".join([*stack[stack.index(dep):], dep]))
            elif dep not in state:
                visit(dep, [*stack, dep])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    return circles
