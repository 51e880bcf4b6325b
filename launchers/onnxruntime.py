"""ONNX Runtime: one process, one session; in a container it also sees the model cache.

The backend exports the PyTorch backend's models into `onnxruntime.cache_dir` and reuses
them, so a container mounts that host folder (read-write; Docker creates it when it is
missing) at /workspace/onnx_cache, and a user's `onnxruntime.model_file` read-only under
/workspace/onnx_model (a bind mount: a missing file is an error, never an empty folder made
in its place). `onnxruntime.args` already names those container paths.
"""

from __future__ import annotations

import os

from dlbs.errors import LaunchError
from dlbs.recipes.invocation import Mount, experiment_label
from dlbs.recipes.recipe import WORKSPACE, Experiment, Recipe, register_recipe

CACHE_IN_CONTAINER = f"{WORKSPACE}/onnx_cache"
MODEL_FOLDER_IN_CONTAINER = f"{WORKSPACE}/onnx_model"


@register_recipe("onnxruntime")
class OnnxRuntimeRecipe(Recipe):
    container_folder = "onnxruntime_benchmarks"

    def docker_arg_tokens(self, experiment: Experiment) -> list[str]:
        """The framework's docker args, plus the model cache as a volume."""
        tokens = super().docker_arg_tokens(experiment)
        cache = str(experiment.get("onnxruntime.cache_dir") or "")
        if not cache:
            return tokens
        host = os.path.abspath(cache)
        if ":" in host:
            raise LaunchError(f"onnxruntime.cache_dir {host!r} holds ':', which a docker "
                              f"volume cannot carry (experiment {experiment_label(experiment)})",
                              hint="choose a folder without ':'")
        return [*tokens, "-v", f"{host}:{CACHE_IN_CONTAINER}"]

    def mounts(self, experiment: Experiment) -> list[Mount]:
        """A user's model file, read-only, where `onnxruntime.backend_model_file` says."""
        model_file = str(experiment.get("onnxruntime.model_file") or "")
        if not model_file or not self.in_container(experiment):
            return []
        return [Mount(os.path.abspath(model_file),
                      f"{MODEL_FOLDER_IN_CONTAINER}/{os.path.basename(model_file)}",
                      read_only=True)]
