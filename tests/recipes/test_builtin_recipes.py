"""Built-in recipes load without scanning the installed packages' entry points."""

from __future__ import annotations

import subprocess
import sys
import tomllib

from dlbs.recipes.recipe import BUILTIN_RECIPES
from tests.conftest import REPO


def test_the_builtin_list_is_the_entry_points_of_pyproject():
    with open(REPO / "pyproject.toml", "rb") as stream:
        entries = tomllib.load(stream)["project"]["entry-points"]["dlbs.recipes"]
    assert sorted(BUILTIN_RECIPES) == sorted(entries)
    assert all(entries[name] == f"dlbs.launchers.{name}" for name in BUILTIN_RECIPES)


def test_a_builtin_recipe_is_found_without_reading_entry_points():
    code = (
        "import sys\n"
        "from dlbs.recipes.recipe import recipe_for\n"
        "for name in ('pytorch', 'mxnet', 'onnxruntime', 'dummy'):\n"
        "    assert recipe_for({'exp.framework': name}).name == name\n"
        "print('importlib.metadata' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_an_unknown_framework_still_lists_every_recipe():
    code = (
        "from dlbs.errors import LaunchError\n"
        "from dlbs.recipes.recipe import recipe_for\n"
        "try:\n"
        "    recipe_for({'exp.framework': 'nosuch', 'exp.id': 'x'})\n"
        "except LaunchError as error:\n"
        "    print(error.hint)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "frameworks: dummy, mxnet, onnxruntime, pytorch"
