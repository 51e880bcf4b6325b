"""The backend runs where dlbs is not installed: it imports the stdlib, numpy and mxnet only."""

from __future__ import annotations

import ast
import sys

import pytest
from mx_helpers import PYTHON_DIR

pytestmark = pytest.mark.mxnet

# benchmark_common: the backends' shared package beside them (tests/evaluation checks its imports).
ALLOWED = set(sys.stdlib_module_names) | {"numpy", "mxnet", "mxnet_benchmarks", "benchmark_common"}
SOURCES = sorted((PYTHON_DIR / "mxnet_benchmarks").rglob("*.py"))


def imported_top_level_modules(path) -> set[str]:
    """Absolute imports of a source file, by their top-level package."""
    modules = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            modules.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module.split(".")[0])
    return modules


def test_sources_were_found():
    names = {path.name for path in SOURCES}
    assert {"benchmarks.py", "launch_dist.py", "runner.py", "resnet.py"} <= names


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: path.name)
def test_backend_imports_only_stdlib_numpy_and_mxnet(path):
    assert imported_top_level_modules(path) <= ALLOWED


def test_launcher_imports_only_the_standard_library():
    launcher = PYTHON_DIR / "mxnet_benchmarks" / "launch_dist.py"
    assert imported_top_level_modules(launcher) <= set(sys.stdlib_module_names)
