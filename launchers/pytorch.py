"""PyTorch: one process per replica, under torchrun when a node needs more than one.

An evaluation scenario is one process whatever its GPUs: LoadGen's system under test serves
them all (docs/evaluation.md, "Several GPUs").
"""

from __future__ import annotations

import os

from dlbs.recipes.recipe import Experiment, Recipe, register_recipe

#: The file that makes a folder a Caffe LMDB (pytorch.data_backend caffe_lmdb).
LMDB_FILE = "data.mdb"


@register_recipe("pytorch")
class PyTorchRecipe(Recipe):
    container_folder = "pytorch_benchmarks"

    def data_problem(self, experiment: Experiment, folder: str) -> tuple[str, str, str] | None:
        """A folder of the other format than pytorch.data_backend reads.

        The backend would stop at its start ("no data.mdb in it"), after validate said ok.
        """
        backend = experiment.get("pytorch.data_backend")
        if not os.path.isdir(folder):
            return None
        lmdb = os.path.isfile(os.path.join(folder, LMDB_FILE))
        shown = repr(experiment.get("exp.data_dir"))
        if backend == "caffe_lmdb" and not lmdb:
            return ("pytorch.data_backend",
                    f"exp.data_dir {shown} holds no {LMDB_FILE}, but pytorch.data_backend "
                    "caffe_lmdb reads a Caffe LMDB",
                    "set pytorch.data_backend image_folder: it reads class folders of images, "
                    "ImageNet's layout")
        if backend == "image_folder" and lmdb:
            return ("pytorch.data_backend",
                    f"exp.data_dir {shown} is a Caffe LMDB ({LMDB_FILE}), but "
                    "pytorch.data_backend image_folder reads class folders of images",
                    "set pytorch.data_backend caffe_lmdb")
        return None

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
