"""What inference evaluation (docs/evaluation.md) and the backends' shared package add.

- Output flags: a scenario's backend writes LoadGen's logs into `<log stem>.loadgen/` beside
  the experiment's log (`--loadgen_dir`; where an earlier attempt's folder is, the backend
  makes the next free `<log stem>.attemptN.loadgen/` and prints which as
  `results.loadgen_log_dir`), and with `exp.publish_predictions` an accuracy run writes
  `<log stem>.predictions.jsonl` (`--predictions_file`). Both are absolute paths.
- Containers: the backends' shared package (`runtime.benchmark_common_path`) is mounted
  read-only at /workspace/benchmark_common, beside the backend; the weights, the labels and
  the framework's extra-models file read-only, and the log folder writable, each at its own
  host path, with the host's working directory as the container's, so that every path a
  spec gives (relative or absolute) means inside the container what it means on the host,
  and every path a backend prints is a host path.
- Bare metal: the backends import the package from the folder above their own; when
  `<framework>.bench_path` puts a backend elsewhere, PYTHONPATH names the package's folder.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from dlbs.errors import LaunchError
from dlbs.recipes.parts import Mount, experiment_label
from dlbs.util.booleans import truthy

Experiment = Mapping[str, Any]
#: Where a container sees the backends' shared package (beside /workspace/<backend>).
COMMON_IN_CONTAINER = "/workspace/benchmark_common"
COMMON_PATH = "runtime.benchmark_common_path"


def scenario(experiment: Experiment) -> str:
    """`exp.scenario`, `benchmark` when unset."""
    return str(experiment.get("exp.scenario") or "benchmark")


def output_stem(experiment: Experiment) -> str:
    """The experiment's log file without its suffix, absolute."""
    log_file = str(experiment.get("exp.log_file") or "")
    if not log_file:
        raise LaunchError(f"experiment {experiment_label(experiment)}: exp.scenario "
                          f"{scenario(experiment)} writes beside exp.log_file, which is empty")
    return os.path.splitext(os.path.abspath(log_file))[0]


def loadgen_dir(experiment: Experiment) -> str:
    """Where LoadGen writes its logs: `<log stem>.loadgen`."""
    return output_stem(experiment) + ".loadgen"


def predictions_file(experiment: Experiment) -> str:
    """Where an accuracy run publishes its predictions: `<log stem>.predictions.jsonl`."""
    return output_stem(experiment) + ".predictions.jsonl"


def output_flags(experiment: Experiment) -> list[str]:
    """The backend flags that say where a scenario writes (none for `benchmark`)."""
    if scenario(experiment) == "benchmark":
        return []
    flags = ["--loadgen_dir", loadgen_dir(experiment)]
    if scenario(experiment) == "accuracy" and truthy(experiment.get("exp.publish_predictions",
                                                                    False)):
        flags += ["--predictions_file", predictions_file(experiment)]
    return flags


def container_mounts(experiment: Experiment, framework: str) -> list[Mount]:
    """The shared package, the inputs (read-only) and the log folder (writable)."""
    mounts = []
    common = str(experiment.get(COMMON_PATH) or "")
    if common:
        mounts.append(Mount(os.path.abspath(common), COMMON_IN_CONTAINER, read_only=True))
    for name in ("exp.weights", "exp.labels", f"{framework}.extra_models"):
        mounts.extend(_same_path(experiment, name, read_only=True))
    if scenario(experiment) != "benchmark":
        # The run loop makes the log folder before it starts the container.
        folder = os.path.dirname(output_stem(experiment))
        mounts.append(Mount(folder, folder, read_only=False))
    return mounts


def container_workdir(mounts: list[Mount]) -> str | None:
    """The host's working directory when a path is mounted at its own host path, else None."""
    if any(mount.host == mount.container for mount in mounts):
        return os.getcwd()
    return None


def _same_path(experiment: Experiment, name: str, read_only: bool) -> list[Mount]:
    value = str(experiment.get(name) or "")
    if not value:
        return []
    path = os.path.abspath(value)
    if not os.path.exists(path):
        raise LaunchError(f"{name}: no such file: {value} (experiment "
                          f"{experiment_label(experiment)})",
                          hint="a container gets it mounted: it must exist on this host")
    return [Mount(path, path, read_only=read_only)]


def common_env(experiment: Experiment, backend_dir: str,
               env: Mapping[str, str]) -> dict[str, str]:
    """PYTHONPATH for a bare-metal backend whose folder is not beside the shared package."""
    common = str(experiment.get(COMMON_PATH) or "")
    if not common:
        return {}
    parent = os.path.dirname(os.path.abspath(common))
    if os.path.dirname(os.path.abspath(backend_dir)) == parent:
        return {}
    inherited = env.get("PYTHONPATH") or str(
        experiment.get("runtime.env.PYTHONPATH") or os.environ.get("PYTHONPATH", ""))
    return {"PYTHONPATH": os.pathsep.join(part for part in (parent, inherited) if part)}
