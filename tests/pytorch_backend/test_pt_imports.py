"""The backend imports only what runs inside a bare framework container."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest
from pytorch_backend_helpers import PYTHON_DIR
from pytorch_benchmarks.distributed import topology_from_env

pytestmark = pytest.mark.pytorch

# benchmark_common: the backends' shared package beside them (tests/evaluation checks its imports).
ALLOWED = {"numpy", "torch", "torchvision", "PIL", "lmdb", "pytorch_benchmarks",
           "benchmark_common"}
PACKAGE = PYTHON_DIR / "pytorch_benchmarks"


@pytest.mark.parametrize(
    "path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE))
)
def test_only_permitted_imports(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            assert top in ALLOWED or top in sys.stdlib_module_names, f"{path}: imports {name}"


def test_lmdb_is_imported_only_by_the_lmdb_reader_and_builder():
    for path in PACKAGE.rglob("*.py"):
        if "import lmdb" in path.read_text():
            assert path.name in {"caffe_lmdb.py", "build_caffe_lmdb.py"}, path


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, (1, 0, 0, 1)),
        (
            {"WORLD_SIZE": "4", "RANK": "3", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"},
            (4, 3, 1, 2),
        ),
        (
            {
                "SLURM_NTASKS": "2",
                "SLURM_PROCID": "1",
                "SLURM_LOCALID": "0",
                "SLURM_NTASKS_PER_NODE": "1",
            },
            (2, 1, 0, 1),
        ),
    ],
)
def test_topology_from_env(monkeypatch, env, expected):
    for name in [
        "WORLD_SIZE",
        "RANK",
        "LOCAL_RANK",
        "LOCAL_WORLD_SIZE",
        "SLURM_NTASKS",
        "SLURM_PROCID",
        "SLURM_LOCALID",
        "SLURM_NTASKS_PER_NODE",
    ]:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    topology = topology_from_env()
    assert (
        topology.world_size,
        topology.rank,
        topology.local_rank,
        topology.local_world_size,
    ) == expected


def test_topology_refuses_a_rank_outside_the_world(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "2")
    with pytest.raises(ValueError, match="outside WORLD_SIZE"):
        topology_from_env()


def test_torchvision_is_imported_only_for_a_model_that_is_built_from_it():
    """A model of the backend's own is built without importing torchvision.

    torchvision's import pulls in torch._dynamo (torchvision.ops): about a second of a
    backend's start that a run of such a model need not spend.
    """
    probe = (
        "import sys\n"
        "from pytorch_benchmarks import benchmarks, evaluation, runner\n"
        "from pytorch_benchmarks.data import sources, transforms\n"
        "from pytorch_benchmarks.models import get_model_spec, model_ids\n"
        "assert 'resnet50' in model_ids() and 'vgg16' in model_ids()\n"
        "get_model_spec('deep_mnist').build()\n"
        "before = 'torchvision' in sys.modules\n"
        "get_model_spec('resnet18').build()\n"
        "print(before, 'torchvision' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], cwd=PYTHON_DIR, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "True"]
