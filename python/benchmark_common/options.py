"""The evaluation flags of every backend: scenario, bounds, weights, dataset slice, outputs.

Standard library only. A backend adds them to its parser with `add_evaluation_flags` and, after
parsing, takes them out with `evaluation_options`, which checks every value (a problem raises
`EvaluationFlagError`, a `flags.FlagError` like any other bad flag). The flags and
their meanings: docs/backends/protocol.md section 1 and docs/evaluation.md.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field

from .flags import FlagError, take_flags

#: `benchmark` is the backend's own timed loop; the others run through LoadGen.
SCENARIOS = ("benchmark", "single_stream", "multi_stream", "server", "offline", "max_qps",
             "accuracy")
#: The scenarios that measure latency and query rates (LoadGen's performance mode).
PERFORMANCE_SCENARIOS = ("single_stream", "multi_stream", "server", "offline", "max_qps")
#: The most batches in flight on one device (each has its own buffers and CUDA graphs).
MAX_INFERENCE_STREAMS = 16

_FLAGS = ("scenario", "target_qps", "latency_bound_ms", "latency_percentile", "min_duration_s",
          "min_query_count", "weights", "num_samples", "labels", "predictions_file",
          "loadgen_dir", "predict", "top", "inference_streams", "max_queue_delay_ms")


class EvaluationFlagError(FlagError):
    """A bad evaluation flag: the message names it and what is accepted."""


@dataclass(frozen=True)
class EvaluationOptions:
    """The evaluation flags, checked (see `add_evaluation_flags` for their meanings)."""

    scenario: str = "benchmark"
    target_qps: float = 0.0
    latency_bound_ms: float = 15.0
    latency_percentile: float = 99.0
    min_duration_s: float = 60.0
    min_query_count: int = 100
    weights: str = ""
    num_samples: int = -1
    labels: str = ""
    predictions_file: str = ""
    loadgen_dir: str = "loadgen_logs"
    predict: list[str] = field(default_factory=list)
    top: int = 5
    inference_streams: int = 1
    max_queue_delay_ms: float = 0.0

    @property
    def uses_loadgen(self) -> bool:
        """True for every scenario but `benchmark` (and not for `--predict`)."""
        return self.scenario != "benchmark" and not self.predict

    @property
    def is_evaluation(self) -> bool:
        """True when the backend runs the evaluation path instead of its benchmark loop."""
        return self.uses_loadgen or bool(self.predict)


def add_evaluation_flags(parser: argparse.ArgumentParser) -> None:
    """Add the evaluation flags to a backend's parser."""
    group = parser.add_argument_group("evaluation (docs/evaluation.md)")
    group.add_argument("--scenario", default="benchmark", choices=SCENARIOS,
                       help="benchmark: the backend's timed loop; the others run an MLPerf "
                            "scenario through LoadGen (accuracy: every sample once)")
    group.add_argument("--target_qps", type=float, default=0.0,
                       help="server: the rate of the Poisson arrivals, queries per second")
    group.add_argument("--latency_bound_ms", type=float, default=15.0,
                       help="server and max_qps: the bound of the latency percentile, ms")
    group.add_argument("--latency_percentile", type=float, default=99.0,
                       help="server and max_qps: the percentile held under the bound")
    group.add_argument("--min_duration_s", type=float, default=60.0,
                       help="LoadGen's minimum duration of a run (of each max_qps trial), s")
    group.add_argument("--min_query_count", type=int, default=100,
                       help="LoadGen's minimum number of queries")
    group.add_argument("--weights", default="",
                       help="the model's trained weights (empty: random initialisation)")
    group.add_argument("--num_samples", type=int, default=-1,
                       help="samples of the dataset to use, from its start (-1: all); with "
                            "synthetic data, how many distinct random samples to make")
    group.add_argument("--labels", default="",
                       help="a text file with one class name per line (line i names class i)")
    group.add_argument("--predictions_file", default="",
                       help="accuracy: write each sample's top classes here (JSON lines)")
    group.add_argument("--loadgen_dir", default="loadgen_logs",
                       help="the folder LoadGen writes its logs into")
    group.add_argument("--predict", nargs="+", default=[], metavar="IMAGE",
                       help="classify these image files and print their top classes")
    group.add_argument("--top", type=int, default=5,
                       help="--predict and --predictions_file: how many classes to give")
    group.add_argument("--inference_streams", type=int, default=1,
                       help="batches in flight at once on each device, each on its own stream "
                            "(a thread of its own on the CPU)")
    group.add_argument("--max_queue_delay_ms", type=float, default=0.0,
                       help="server and max_qps: how long the first waiting query may wait "
                            "for more to join its batch, ms")


def evaluation_options(namespace: argparse.Namespace) -> EvaluationOptions:
    """Take the evaluation flags out of a parsed namespace (deleting them) and check them."""
    options = EvaluationOptions(**take_flags(namespace, _FLAGS))
    check(options)
    return options


def check(options: EvaluationOptions) -> None:
    """Refuse values that cannot run; raises EvaluationFlagError."""
    for name in ("target_qps", "latency_bound_ms", "latency_percentile", "min_duration_s",
                 "max_queue_delay_ms"):
        value = getattr(options, name)
        if not math.isfinite(value) or value < 0:
            raise EvaluationFlagError(f"--{name} must be a finite number >= 0, got {value}")
    if options.scenario == "server" and options.target_qps <= 0:
        raise EvaluationFlagError("--scenario server needs --target_qps > 0 (queries per "
                                  "second)")
    if options.scenario in ("server", "max_qps") and options.latency_bound_ms <= 0:
        raise EvaluationFlagError(f"--scenario {options.scenario} needs --latency_bound_ms > 0")
    if not 0 < options.latency_percentile < 100:
        raise EvaluationFlagError(f"--latency_percentile must be between 0 and 100 "
                                  f"(exclusive), got {options.latency_percentile}")
    if options.min_query_count < 1:
        raise EvaluationFlagError(f"--min_query_count must be >= 1, got "
                                  f"{options.min_query_count}")
    if options.num_samples == 0 or options.num_samples < -1:
        raise EvaluationFlagError(f"--num_samples must be -1 (all) or >= 1, got "
                                  f"{options.num_samples}")
    if options.top < 1:
        raise EvaluationFlagError(f"--top must be >= 1, got {options.top}")
    if not 1 <= options.inference_streams <= MAX_INFERENCE_STREAMS:
        raise EvaluationFlagError(f"--inference_streams must be between 1 and "
                                  f"{MAX_INFERENCE_STREAMS}, got {options.inference_streams}")
    if options.uses_loadgen and not options.loadgen_dir:
        raise EvaluationFlagError(f"--scenario {options.scenario} needs --loadgen_dir")
    if options.predict and options.scenario != "benchmark":
        raise EvaluationFlagError("--predict classifies images on its own; leave --scenario "
                                  "at benchmark")
