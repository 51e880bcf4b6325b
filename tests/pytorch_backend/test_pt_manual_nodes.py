"""DLBS's distributed tutorial: two "nodes" started by hand, told apart by pytorch.distributed_rank.

Each node plans the same spec with its own `-P pytorch.distributed_rank=N`; the pytorch recipe
wraps the backend in torchrun, which reads the node rank and rendezvous from the PET_*
variables of pytorch.env. Here both nodes are processes of this host (gloo on CPU).
"""

from __future__ import annotations

import socket
import subprocess

import pytest
from pytorch_backend_helpers import ROOT, backend_env, parse_keys

from dlbs.config.loader import load_spec
from dlbs.plan.builder import Planner
from dlbs.recipes.recipe import recipe_for

pytestmark = pytest.mark.pytorch


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def node_command(rank: int, port: int) -> tuple[list[str], dict[str, str]]:
    spec = load_spec(params=[
        "exp.model=sensor_net", "exp.replica_batch=4", "exp.num_batches=3",
        "exp.num_warmup_batches=1", "pytorch.num_threads=1", "exp.num_nodes=2",
        f"pytorch.distributed_rendezvous=127.0.0.1:{port}", f"pytorch.distributed_rank={rank}"])
    (experiment,) = Planner(spec).experiments()
    recipe = recipe_for(experiment)
    return recipe.command(experiment), {**backend_env(), **recipe.environment(experiment)}


def test_two_hand_started_nodes_run_one_job():
    port = free_port()
    nodes = []
    for rank in (0, 1):
        argv, env = node_command(rank, port)
        assert argv[1:3] == ["-m", "torch.distributed.run"] and "--nnodes=2" in argv
        assert env["PET_NODE_RANK"] == str(rank)
        nodes.append(subprocess.Popen(argv, env=env, cwd=ROOT, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    outputs = [node.communicate(timeout=300) for node in nodes]
    for node, (_, stderr) in zip(nodes, outputs):
        assert node.returncode == 0, stderr[-3000:]
    first, _ = parse_keys(outputs[0][0])
    second, _ = parse_keys(outputs[1][0])
    assert first["results.status"] == "ok"
    # One job of two replicas: node 0 holds rank 0, which reports for both; node 1 is silent.
    assert first["results.throughput"] == pytest.approx(4 * 2 * 1000.0 / first["results.time"])
    assert second == {}
    assert "batch=4x2" in outputs[1][0]
