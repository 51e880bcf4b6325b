"""MXNet: one process per node; dist_* kvstores get a scheduler, servers and workers."""

from __future__ import annotations

from dlbs.recipes.recipe import Experiment, Recipe, register_recipe


@register_recipe("mxnet")
class MXNetRecipe(Recipe):
    container_folder = "mxnet_benchmarks"

    def command(self, experiment: Experiment) -> list[str]:
        backend = super().command(experiment)
        if not str(experiment.get("mxnet.kv_store", "")).startswith("dist"):
            return backend
        # MXNet's tools/launch.py fails on Python 3.11: the backend's own launcher starts
        # the parameter-server roles from DMLC_* variables.
        nodes = int(experiment.get("exp.num_nodes") or 1)
        workers = int(experiment.get("mxnet.workers_per_node") or 1)
        servers = int(experiment.get("mxnet.num_servers") or 1)
        launcher = [self.python(experiment), f"{self.backend_dir(experiment)}/launch_dist.py",
                    f"--num_workers={workers * nodes}", f"--num_servers={servers}",
                    f"--python={self.python(experiment)}"]
        if nodes > 1:
            launcher += [f"--local_workers={workers}",
                         f"--local_servers={max(1, servers // nodes)}"]
        return [*launcher, "--", *backend]
