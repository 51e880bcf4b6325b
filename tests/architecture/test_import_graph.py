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


def _imports(path: Path, known: set[str]) -> set[str]:
    """The dlbs modules a file imports, anywhere in it (the exact module, when known)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if submodule in known else node.module)
    return {name for name in found if name == ROOT or name.startswith(ROOT + ".")}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ROOT


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(path, set(modules)) for name, path in modules.items()}


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


PARAMETER = re.compile(r"^(exp|runtime|slurm|monitor|pytorch|mxnet|dummy)\.[a-z_]")


def test_no_target_reads_a_raw_parameter():
    """Targets get everything from the Invocation: no `x.get("exp...")` or `x["exp..."]`."""
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
                    PARAMETER.match(key.value):
                readers.append(f"{path.name}:{node.lineno} reads {key.value}")
    assert readers == []


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
