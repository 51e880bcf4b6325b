"""`--extra_models FILE`: a user's Python file that registers more models, imported once.

Standard library only. The file imports its backend's `register_model` (the backend's
folder is on the import path when it runs); docs/extending.md shows one.
"""

from __future__ import annotations

import importlib.util
import os
import sys


def import_model_file(path: str, error: type[Exception]) -> None:
    """Import `path` as a module; a missing or non-Python file raises `error` (its message).

    Whatever the file itself raises (a syntax error, a duplicate model id) goes up as is.
    """
    if not os.path.isfile(path):
        raise error(f"--extra_models: no such file: {path}")
    name = f"_dlbs_extra_models_{os.path.splitext(os.path.basename(path))[0]}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise error(f"--extra_models: cannot import {path} (not a Python file?)")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
