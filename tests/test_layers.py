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
    """Module-level imports only (a function-level import runs late and cannot deadlock a load)."""
    graph: dict[str, set[str]] = {}
    for path in CMX.rglob("*.py"):
        name = ".".join(("cmx", *path.relative_to(CMX).with_suffix("").parts)).removesuffix(".__init__")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        graph[name] = set()
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("cmx"):
                graph[name] |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
            elif isinstance(node, ast.Import):
                graph[name] |= {a.name for a in node.names if a.name.startswith("cmx")}
    graph = {m: {d for d in deps if d in graph and d != m} for m, deps in graph.items()}
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
    assert circles == []
