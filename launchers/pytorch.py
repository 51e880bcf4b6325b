"""PyTorch: one process per replica, under torchrun when a node needs more than one.

An evaluation scenario is one process whatever its GPUs: LoadGen's system under test serves
them all (docs/evaluation.md, "Several GPUs").
"""

from __future__ import annotations

from dlbs.recipes.recipe import Experiment, Recipe, register_recipe


@register_recipe("pytorch")
class PyTorchRecipe(Recipe):
    container_folder = "pytorch_benchmarks"

    def command(self, experiment: Experiment) -> list[str]:
        backend = super().command(experiment)
        if str(experiment.get("exp.scenario") or "benchmark") != "benchmark":
            return backend
        processes = int(experiment.get("exp.num_local_replicas") or 1)
        nodes = int(experiment.get("exp.num_nodes") or 1)
        if processes == 1 and nodes == 1:
            return backend
        # torchrun sets WORLD_SIZE, RANK and LOCAL_RANK for each process. Over several nodes
        # (SLURM) it reads the rendezvous from PET_NNODES, PET_NODE_RANK, PET_MASTER_ADDR and
        # PET_MASTER_PORT, which the job script exports: no value here needs a shell.
        python, script, *args = backend
        rendezvous = ["--standalone"] if nodes == 1 else [f"--nnodes={nodes}"]
        return [python, "-m", "torch.distributed.run", f"--nproc_per_node={processes}",
                *rendezvous, script, *args]
