"""Helpers for the PyTorch backend's tests: run it as a subprocess, parse it, tiny datasets."""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tests.preloaded import TORCH

ROOT = Path(__file__).resolve().parents[2]
PYTHON_DIR = ROOT / "python"
BACKEND = PYTHON_DIR / "pytorch_benchmarks" / "benchmarks.py"
BUILDER = PYTHON_DIR / "pytorch_benchmarks" / "build_caffe_lmdb.py"
KEY_LINE = re.compile(r"^(?:\S+:\s*)?__([A-Za-z0-9_.]+)__=(.*)$")

if str(PYTHON_DIR) not in sys.path:
    sys.path.insert(0, str(PYTHON_DIR))


@dataclass
class BackendRun:
    """What one backend process did: exit code, output, and its ``__key__`` values."""

    returncode: int
    stdout: str
    stderr: str
    values: dict = field(default_factory=dict)
    counts: dict = field(default_factory=dict)


def parse_keys(text: str) -> tuple[dict, dict]:
    """The last value of every ``__key__=json`` line, and how often each key appeared."""
    values: dict = {}
    counts: dict = {}
    for line in text.splitlines():
        match = KEY_LINE.match(line.strip())
        if match:
            values[match.group(1)] = json.loads(match.group(2))
            counts[match.group(1)] = counts.get(match.group(1), 0) + 1
    return values, counts


def backend_env() -> dict[str, str]:
    """A small, quiet environment: few threads (CI has 2 cores), no CUDA."""
    env = dict(os.environ)
    env.update({"OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "", "PYTHONUNBUFFERED": "1"})
    env.pop("WORLD_SIZE", None)
    env.pop("RANK", None)
    env.pop("LOCAL_RANK", None)
    return env


def run_backend(*args: str, launcher: list[str] | None = None, timeout: float = 180) -> BackendRun:
    """Run benchmarks.py (optionally under a launcher such as torchrun) and parse its output.

    Without a launcher the process is forked from an interpreter that has imported torch
    (tests/preloaded.py): the run, not torch's import, is what these tests are about.
    """
    proc = TORCH.run([*(launcher or []), str(BACKEND), *args], backend_env(), cwd=ROOT,
                     timeout=timeout)
    values, counts = parse_keys(proc.stdout)
    return BackendRun(proc.returncode, proc.stdout, proc.stderr, values, counts)


TINY_MODELS = '''
import time
import torch
import torch.nn as nn
from pytorch_benchmarks.models import register_model


@register_model("tiny_cnn", title="TinyCNN", input_shape=(3, 32, 32), num_classes=3)
def tiny_cnn():
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3),
    )


class Sleeper(nn.Module):
    """A forward pass of known duration: the host sleeps, then a tiny linear layer runs."""

    def __init__(self, seconds):
        super().__init__()
        self.seconds = seconds
        self.linear = nn.Linear(8, 2)

    def forward(self, x):
        time.sleep(self.seconds)
        return self.linear(x)


@register_model("sleep_50ms", title="Sleep50ms", input_shape=(8,), num_classes=2)
def sleep_50ms():
    return Sleeper(0.05)


class OutOfMemory(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 2)

    def forward(self, x):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.00 TiB")


@register_model("oom_model", title="OOM", input_shape=(8,), num_classes=2)
def oom_model():
    return OutOfMemory()
'''


def make_image_folder(root: Path, classes: int = 3, per_class: int = 4, size: int = 40) -> Path:
    """Tiny PNG images in one folder per class, with distinct colours."""
    from PIL import Image

    for label in range(classes):
        folder = root / f"class_{label}"
        folder.mkdir(parents=True)
        for index in range(per_class):
            colour = (40 * label + 10 * index, 255 - 30 * label, 7 * index)
            Image.new("RGB", (size + index, size), colour).save(folder / f"img_{index}.png")
    return root


RANK_FAILURE_MODEL = """
import os
import torch.nn as nn
from pytorch_benchmarks.models import register_model


class BreaksOnRankOne(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 2)

    def forward(self, x):
        if os.environ.get("RANK") == "1":
            raise RuntimeError("rank 1 broke on purpose")
        return self.linear(x)


@register_model("breaks_on_rank_one", title="Breaks", input_shape=(8,), num_classes=2)
def breaks_on_rank_one():
    return BreaksOnRankOne()
"""
