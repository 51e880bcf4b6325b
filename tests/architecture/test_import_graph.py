"""The shape of the code: imports point down the pipeline, and targets read only invocations.

The pipeline, lowest first: errors, util -> config -> plan -> recipes -> results -> monitor ->
run -> report -> history -> web -> cli. A package may import its own modules and any package
below it, never one above (function-level imports included: a cycle hidden in a function is
still a cycle). The framework recipes (`launchers/`, installed as `dlbs.launchers`) are
plugins found through entry points: no module of dlbs imports them by name.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LAYERS = ["errors", "util", "config", "plan", "recipes", "results", "traces", "monitor", "run",
          "report", "history", "web", "cli"]
#: The package's own root module (dlbs/__init__.py: the version) sits below everything.
ROOT = "dlbs"


def _module_name(path: Path) -> str:
    if path.parts[len(REPO.parts)] == "launchers":
        parts = ["dlbs", "launchers", *path.relative_to(REPO / "launchers").with_suffix("").parts]
    else:
        parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    files = [*(REPO / "dlbs").rglob("*.py"), *(REPO / "launchers").rglob("*.py")]
    return {_module_name(path): path for path in files}


def _imports(path: Path, known: set[str], module: str | None = None) -> set[str]:
    """The dlbs modules a file imports, anywhere in it (the exact module, when known).

    `module` is the file's own module name: relative imports (`from . import x`,
    `from ..results import store`) are resolved against its package.
    """
    module = module or _module_name(path)
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = _resolve_relative(module, path.name == "__init__.py", node.level, base)
            for alias in node.names:
                submodule = f"{base}.{alias.name}" if base else alias.name
                found.add(submodule if submodule in known else base)
    return {name for name in found if name == ROOT or name.startswith(ROOT + ".")}


def _resolve_relative(module: str, is_package: bool, level: int, name: str) -> str:
    """The absolute name of `from <level dots><name> import ...` written in `module`."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    if level - 1 > len(package) - 1:
        raise ValueError(f"{module}: a relative import beyond the top-level package")
    parts = package[:len(package) - (level - 1)]
    return ".".join([*parts, name] if name else parts)


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ROOT


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(path, set(modules), name) for name, path in modules.items()}


def test_every_package_has_its_place_in_the_pipeline(graph):
    packages = {_layer(module) for module in graph} - {ROOT, "launchers"}
    assert packages <= set(LAYERS), f"place {packages - set(LAYERS)} in LAYERS"


def test_imports_only_point_down(graph):
    rank = {name: index for index, name in enumerate(LAYERS)}
    rank[ROOT] = -1
    upward = []
    for module, imports in graph.items():
        source = _layer(module)
        for target in imports:
            destination = _layer(target)
            if destination == "launchers" and source != "launchers":
                upward.append(f"{module} -> {target} (recipes are found by entry points)")
            elif source == "launchers":
                if destination not in (ROOT, "errors", "util", "recipes", "launchers"):
                    upward.append(f"{module} -> {target} (a recipe builds on dlbs.recipes)")
            elif destination != source and rank[destination] > rank[source]:
                upward.append(f"{module} -> {target}")
    assert upward == []


def test_there_is_no_import_cycle(graph):
    """Tarjan's strongly connected components over the module graph: all of size one."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in graph.get(node, ()):
            if successor not in graph:
                continue
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            # A package's __init__ re-exporting its own modules is not a cycle of design.
            if len({m for m in component if not _is_reexport(m, component)}) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    assert cycles == []


def _is_reexport(module: str, component: list[str]) -> bool:
    return any(other != module and other.startswith(module + ".") for other in component)


def _parameter_namespaces() -> set[str]:
    """Every namespace of a declared parameter (`exp`, `onnxruntime`, ...), from the configs."""
    from dlbs.config.loader import load_spec

    return {name.split(".")[0] for name in load_spec().params if "." in name}


def test_the_parameter_namespaces_come_from_every_config():
    assert {"exp", "runtime", "slurm", "monitor", "pytorch", "mxnet", "onnxruntime",
            "dummy"} <= _parameter_namespaces()


def test_no_target_reads_a_raw_parameter():
    """Targets get everything from the Invocation: no `x.get("exp...")` or `x["exp..."]`."""
    namespaces = "|".join(sorted(map(re.escape, _parameter_namespaces())))
    parameter = re.compile(rf"^({namespaces})\.[a-z_]")
    readers = []
    for path in sorted((REPO / "dlbs" / "run" / "targets").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            key = None
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr == "get" and node.args:
                key = node.args[0]
            elif isinstance(node, ast.Subscript):
                key = node.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, str) and \
                    parameter.match(key.value):
                readers.append(f"{path.name}:{node.lineno} reads {key.value}")
    assert readers == []


@pytest.mark.parametrize(("module", "is_package", "source", "expected"), [
    ("dlbs.monitor.node", False, "from .probe import machine_environment",
     {"dlbs.monitor.probe"}),
    ("dlbs.monitor.sampling", False, "from . import proc", {"dlbs.monitor.proc"}),
    ("dlbs.monitor", True, "from .node import x", {"dlbs.monitor.node"}),
    ("dlbs.run.loop", False, "from ..results import store", {"dlbs.results.store"}),
    ("dlbs.run.loop", False, "from ..results.store import ResultsStore",
     {"dlbs.results.store"}),
    ("dlbs.run.targets.slurm", False, "from ...report import tables", {"dlbs.report"}),
    ("dlbs.run.loop", False, "from dlbs.results import store", {"dlbs.results.store"}),
])
def test_relative_imports_are_followed(tmp_path, module, is_package, source, expected):
    path = tmp_path / ("__init__.py" if is_package else "module.py")
    path.write_text(source + "\n")
    known = {"dlbs.monitor.probe", "dlbs.monitor.proc", "dlbs.monitor.node",
             "dlbs.results.store", "dlbs.report"}
    assert _imports(path, known, module) == expected


def test_an_upward_relative_import_is_caught(tmp_path):
    """A relative import from the run layer up into the report layer is still upward."""
    path = tmp_path / "module.py"
    path.write_text("from ..report import tables\n")
    modules = _modules()
    imports = _imports(path, set(modules), "dlbs.run.sneaky")
    assert imports == {"dlbs.report.tables"}
    rank = {name: index for index, name in enumerate(LAYERS)}
    assert rank[_layer("dlbs.report.tables")] > rank[_layer("dlbs.run.sneaky")]


def test_the_run_loop_imports_no_concrete_target(graph):
    """Targets are found by name (the registry): a new one never changes the loop."""
    from dlbs.run.targets.base import BUILTIN_MODULES

    concrete = set(BUILTIN_MODULES)
    reaching = sorted(f"{module} -> {target}" for module, imports in graph.items()
                      if module.startswith("dlbs.run.") and module not in concrete
                      for target in imports & concrete)
    assert reaching == []


def test_the_recipes_are_found_through_their_entry_points():
    from dlbs.recipes import recipes

    found = recipes()
    assert {"pytorch", "mxnet", "dummy"} <= set(found)
    assert type(found["pytorch"]).__module__ == "dlbs.launchers.pytorch"


def test_launchers_installs_inside_dlbs_not_as_a_top_level_package():
    import importlib.metadata
    import importlib.util

    assert importlib.util.find_spec("dlbs.launchers") is not None
    installed = importlib.metadata.distribution("dlbs")
    assert (installed.read_text("top_level.txt") or "").split() == ["dlbs"]


def test_a_source_checkout_that_is_not_installed_finds_its_recipes(tmp_path):
    """`PYTHONPATH=checkout python -m dlbs.cli.main` (no entry points, no package mapping)."""
    import shutil
    import subprocess
    import sys

    for folder in ("dlbs", "launchers"):
        shutil.copytree(REPO / folder, tmp_path / folder,
                        ignore=shutil.ignore_patterns("__pycache__"))
    program = ("import sys; sys.path.insert(0, sys.argv[1])\n"
               "from dlbs.recipes import recipes\n"
               "found = recipes()\n"
               "print(sorted(found), type(found['pytorch']).__module__)\n"
               "print(sys.modules['dlbs.launchers'].__file__)\n")
    # -S: no site-packages, so neither the installed entry points nor the editable mapping.
    result = subprocess.run([sys.executable, "-I", "-S", "-c", program, str(tmp_path)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    names, location = result.stdout.splitlines()
    assert names.startswith("['dummy', 'mxnet'") and names.endswith("dlbs.launchers.pytorch")
    assert location == str(tmp_path / "launchers" / "__init__.py")


def test_every_package_folder_is_installed():
    """pyproject.toml lists the packages by hand (launchers maps into dlbs): none forgotten."""
    import tomllib

    declared = set(tomllib.loads((REPO / "pyproject.toml").read_text())
                   ["tool"]["setuptools"]["packages"])
    folders = {".".join(path.relative_to(REPO).parts) for path in (REPO / "dlbs").rglob("*")
               if path.is_dir() and path.name != "__pycache__"}
    assert folders | {"dlbs", "dlbs.launchers"} == declared
