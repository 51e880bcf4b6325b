"""One process per device: the job's shape from the launcher's environment (torchrun, srun)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from .errors import UserError


@dataclass(frozen=True)
class Topology:
    """Where this process sits in the job."""

    world_size: int
    rank: int
    local_rank: int
    local_world_size: int

    @property
    def distributed(self) -> bool:
        """True when there is more than one replica."""
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Rank 0 prints the job's results."""
        return self.rank == 0


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    try:
        return int(value) if value else default
    except ValueError:
        raise UserError(f"environment variable {name}={value!r} is not an integer") from None


def topology_from_env() -> Topology:
    """Read WORLD_SIZE, RANK, LOCAL_RANK, LOCAL_WORLD_SIZE (SLURM_* as a fallback)."""
    world = _env_int("WORLD_SIZE", _env_int("SLURM_NTASKS", 1))
    rank = _env_int("RANK", _env_int("SLURM_PROCID", 0))
    local_rank = _env_int("LOCAL_RANK", _env_int("SLURM_LOCALID", 0))
    local_world = _env_int(
        "LOCAL_WORLD_SIZE", _env_int("SLURM_NTASKS_PER_NODE", 1 if world == 1 else world)
    )
    if not 0 <= rank < world:
        raise UserError(f"RANK={rank} is outside WORLD_SIZE={world}")
    return Topology(world, rank, local_rank, local_world)


def init_process_group(topology: Topology, device: torch.device) -> None:
    """NCCL on GPUs, gloo on CPUs; the rendezvous (MASTER_ADDR/PORT) comes from the environment."""
    if not topology.distributed:
        return
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")
    if device.type == "cuda":
        dist.init_process_group(
            "nccl", rank=topology.rank, world_size=topology.world_size, device_id=device
        )
    else:
        dist.init_process_group("gloo", rank=topology.rank, world_size=topology.world_size)


def all_reduce_max(values: list[float], device: torch.device) -> list[float]:
    """Element-wise maximum over replicas (one collective, after the timed loop)."""
    if not dist.is_initialized() or not values:
        return values
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return tensor.tolist()


def shutdown() -> None:
    """Leave the process group cleanly."""
    if dist.is_initialized():
        dist.destroy_process_group()
