"""Print a backend's model ids, with its framework stood in for (run as a script).

    python model_ids.py FOLDER PACKAGE [--real]

`dlbs list models` asks each backend's own registry (`PACKAGE.models.registry.model_ids()`),
the one source of truth for its ids. A registry knows its ids once every model file is
imported, and the model files import their framework: torch alone takes about 1 GB and
seconds to import, for names that its decorators hold. So the framework's packages (torch,
torchvision, mxnet, onnx, onnxruntime) are stood in for by permissive stand-ins, whose every
attribute, call, base class and decorator is harmless: the model files run their
`@register_model` decorators and nothing else. A registry that needs the real framework to
name its models fails or finds none that way; the caller then asks again with `--real`.

Standard library only: this file runs in a fresh interpreter, without dlbs on its path.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import json
import sys
import types
from typing import Any

#: The packages stood in for.
FRAMEWORKS = ("torch", "torchvision", "mxnet", "onnx", "onnxruntime")


class _StandIn(type):
    """A class that stands for anything of a framework."""

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _StandIn(name, (), {})

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]  # a decorator: the function or class itself
        return cls

    def __getitem__(cls, item: Any) -> Any:
        return cls

    def __or__(cls, other: Any) -> Any:
        return cls

    __ror__ = __or__

    def __iter__(cls) -> Any:
        return iter(())


class _StandInModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _StandIn(name, (), {})


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports of the frameworks' packages (and their submodules) give stand-ins."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name.split(".")[0] in FRAMEWORKS:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec: Any) -> types.ModuleType:
        module = _StandInModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def main(argv: list[str]) -> int:
    folder, package = argv[:2]
    if "--real" not in argv:
        sys.meta_path.insert(0, _Finder())
    sys.path.insert(0, folder)
    import warnings

    warnings.simplefilter("ignore")
    registry = importlib.import_module(package + ".models.registry")
    ids = registry.model_ids()
    if not ids:
        print("no model ids", file=sys.stderr)
        return 1
    print(json.dumps(list(ids)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
