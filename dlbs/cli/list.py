"""`dlbs list models|frameworks|targets`."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from dlbs.config.loader import load_spec
from dlbs.errors import DlbsError
from dlbs.plan.builder import FRAMEWORK, host_environment


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("what", choices=("models", "frameworks", "targets"))
    parser.add_argument("--framework", help="models of this framework only")


def _frameworks() -> dict[str, str]:
    """Framework -> the folder of its backend, from the default configs."""
    spec = load_spec()
    choices = spec.params[FRAMEWORK].choices or []
    env = host_environment()
    folders = {}
    for name in choices:
        bench = spec.params.get(f"{name}.bench_path")
        path = str(bench.value) if bench is not None else ""
        folders[str(name)] = path.replace("${DLBS_ROOT}", env["DLBS_ROOT"])
    return folders


def _models(framework: str, folder: str) -> list[str]:
    """Ask the backend's own registry: it is the one source of truth for model ids.

    With the framework stood in for first (`model_ids.py`: a fraction of a second and tens
    of MB instead of seconds and a GB), then, if that finds nothing, with the framework.
    """
    path = Path(folder)
    lister = Path(__file__).with_name("model_ids.py")
    command = [sys.executable, str(lister), str(path.parent), path.name]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        result = subprocess.run([*command, "--real"], capture_output=True, text=True,
                                timeout=300)
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise DlbsError(f"cannot list the models of {framework}: {last}",
                        hint=f"is {framework} installed for {sys.executable}?")
    return json.loads(result.stdout)


def run(args: argparse.Namespace) -> int:
    if args.what == "frameworks":
        for name, folder in _frameworks().items():
            print(f"{name:10} {folder}")
    elif args.what == "targets":
        from dlbs.run.targets import targets

        for name, target in targets().items():
            state = f"  (unavailable: {target.unavailable})" if target.unavailable else ""
            print(f"{name:10} {target.summary}{state}")
    else:
        frameworks = _frameworks()
        if args.framework:
            if args.framework not in frameworks:
                raise DlbsError(f"unknown framework {args.framework!r}",
                                hint=f"frameworks: {', '.join(frameworks)}")
            frameworks = {args.framework: frameworks[args.framework]}
        for name, folder in frameworks.items():
            if name == "dummy":
                continue
            for model in _models(name, folder):
                print(f"{name:8} {model}")
    return 0
