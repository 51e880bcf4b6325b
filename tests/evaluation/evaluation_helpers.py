"""Helpers of the evaluation tests: the backends as subprocesses, and what `dlbs run` left."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlbs.results.protocol import parse_lines, parse_log
from tests.preloaded import MXNET, TORCH

REPO = Path(__file__).resolve().parents[2]
PYTHON_DIR = REPO / "python"
PRELOADED = {"pytorch": TORCH, "mxnet": MXNET}
BACKENDS = {name: PYTHON_DIR / f"{name}_benchmarks" / "benchmarks.py"
            for name in ("dummy", "pytorch", "mxnet")}

if str(PYTHON_DIR) not in sys.path:  # in-process tests import benchmark_common
    sys.path.insert(0, str(PYTHON_DIR))


@dataclass
class Run:
    """A finished backend process and the protocol values it printed."""

    returncode: int
    stdout: str
    stderr: str
    values: dict[str, Any]


def backend_env() -> dict[str, str]:
    """Few threads (CI has 2 cores), no GPU, no launcher rank."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "SLURM_NTASKS", "SLURM_PROCID")}
    env.update({"OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "", "PYTHONUNBUFFERED": "1"})
    return env


def run_backend(framework: str, *args: str, timeout: float = 300) -> Run:
    """Run a backend's benchmarks.py with `args`; parse what it printed.

    PyTorch's and MXNet's are forked from an interpreter that has imported the framework
    (tests/preloaded.py).
    """
    if framework in PRELOADED:
        done = PRELOADED[framework].run([str(BACKENDS[framework]), *args], backend_env(),
                                        timeout=timeout)
    else:
        done = subprocess.run([sys.executable, str(BACKENDS[framework]), *args],
                              capture_output=True, text=True, timeout=timeout,
                              env=backend_env())
    values = parse_lines(done.stdout.splitlines()).values
    return Run(done.returncode, done.stdout, done.stderr, values)


def statuses(db: Path) -> list[tuple[str, str]]:
    """(exp_id, status) of every attempt in the results store, in the order they started."""
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT exp_id, status FROM attempts ORDER BY started_at").fetchall()


def logs_by_scenario(folder: Path) -> dict[str, dict[str, Any]]:
    """The values of each experiment log in `folder`, by its exp.scenario."""
    found = {}
    for log in sorted(folder.glob("*.log")):
        values = parse_log(log).values
        found[values["exp.scenario"]] = {**values, "log": log}
    return found


# -- datasets and tiny models the tests make themselves (nothing can be downloaded) ---------

#: One colour per class, far apart, so that a tiny network learns them in a few steps.
PALETTE = [(220, 30, 30), (30, 200, 40), (40, 60, 220), (230, 210, 40), (200, 40, 200),
           (40, 210, 210), (250, 140, 20), (120, 120, 120), (20, 20, 20), (250, 250, 250)]


def colour_image(colour, rng, size=(40, 36)):
    """An image of `colour` with noise, of `size` (width, height), as a Pillow image."""
    import numpy as np
    from PIL import Image

    width, height = size
    noise = rng.integers(-40, 40, size=(height, width, 3))
    pixels = np.clip(np.array(colour)[None, None, :] + noise, 0, 255).astype(np.uint8)
    return Image.fromarray(pixels, "RGB")


def make_image_folder(root: Path, classes: int, per_class: int, *, seed: int = 0,
                      mislabeled_every: int = 0, noise_only: bool = False) -> Path:
    """`classes` folders of PNG images, `per_class` in each.

    Every `mislabeled_every`-th image of a class shows the next class's colour (so a perfect
    model gets those wrong); with `noise_only`, random pixels: classes unrelated to content.
    """
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    for label in range(classes):
        folder = root / f"class_{label:02d}"
        folder.mkdir(parents=True)
        for index in range(per_class):
            size = (36 + index % 7, 32 + index % 5)  # shapes vary: the resize has work to do
            if noise_only:
                pixels = rng.integers(0, 256, size=(size[1], size[0], 3), dtype=np.uint8)
                image = Image.fromarray(pixels, "RGB")
            else:
                shown = label
                if mislabeled_every and index % mislabeled_every == mislabeled_every - 1:
                    shown = (label + 1) % classes
                image = colour_image(PALETTE[shown], rng, size)
            image.save(folder / f"img_{index:03d}.png")
    return root


TORCH_MODELS = '''
import torch.nn as nn
from pytorch_benchmarks.models import register_model


def tiny_classifier(classes):
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(8, classes))


@register_model("tiny_colours", title="TinyColours", input_shape=(3, 32, 32), num_classes=4)
def tiny_colours():
    return tiny_classifier(4)


@register_model("tiny_ten", title="TinyTen", input_shape=(3, 32, 32), num_classes=10)
def tiny_ten():
    return tiny_classifier(10)
'''

MXNET_MODELS = '''
from mxnet import gluon
from mxnet_benchmarks.models import Model, register_model


def tiny_classifier(classes):
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Conv2D(8, 3, padding=1), gluon.nn.Activation("relu"),
            gluon.nn.GlobalAvgPool2D(), gluon.nn.Flatten(), gluon.nn.Dense(classes))
    return net


@register_model("tiny_colours_mx", "tiny_ten_mx")
class TinyColours(Model):
    def __init__(self, model_id):
        super().__init__(model_id)
        self.num_classes = 4 if model_id == "tiny_colours_mx" else 10
        self.input_shape = (3, 32, 32)
        self.title = "TinyColoursMX"

    def build(self):
        return tiny_classifier(self.num_classes)
'''


def training_batch(classes: int, count: int, seed: int):
    """Preprocessed colour images (benchmark_common.preprocess) and their classes."""
    import numpy as np
    from benchmark_common.preprocess import preprocess

    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, size=count)
    images = np.stack([preprocess(colour_image(PALETTE[label], rng), 32) for label in labels])
    return images, labels


#: What an accuracy run of a 4-class model reports instead of its top-5 (which the plain loop
#: finds to be 1: every class is among the five best).
FOUR_CLASSES_TOP5 = ("the model has 4 classes, all among its 5 best: top-5 would be 1 "
                     "whatever it predicts")


def reported_accuracy(values: dict) -> tuple[float, object]:
    """(top-1, top-5) of a run's results; a top-5 not reported: why."""
    return values["results.top1"], values.get("results.top5",
                                              values.get("results.top5_unavailable"))


def top_k_fractions(scores, labels) -> tuple[float, float]:
    """Top-1 and top-5 of class scores (n, classes) against labels, as fractions."""
    import numpy as np

    order = np.argsort(-np.asarray(scores), axis=1, kind="stable")
    labels = np.asarray(labels)
    top1 = int((order[:, 0] == labels).sum())
    top5 = int(sum(label in row[:5] for row, label in zip(order, labels)))
    return top1 / len(labels), top5 / len(labels)
