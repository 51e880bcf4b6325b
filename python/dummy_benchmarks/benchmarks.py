#!/usr/bin/env python3
"""The `dummy` benchmark backend: a stand-in for a framework, for tests and dry rehearsals.

Usage: python3 benchmarks.py --model resnet50 --batch_size 16 --num_batches 10 --sleep 0.05

It behaves like a real backend (docs/backends/protocol.md): the same flags, a little chatter,
and the log protocol's `__<key>__=<json>` lines. One "batch" is `--sleep` seconds of
`time.sleep` (or of a busy loop with `--busy`), timed with `time.perf_counter`, so the batch
times it reports are measured, not made up. `--fail MODE` makes it fail the ways real
backends fail, so that the engine's handling of each can be tested; see `FAIL_MODES`.

Standard library only, one file: it runs under a bare `python3` (3.8 or newer) in any
container. The evaluation scenarios (`--scenario`, docs/evaluation.md) also need
`benchmark_common` beside this folder and MLCommons LoadGen: one "batch" of a scenario is the
same `--sleep`, a service time the tests check LoadGen's numbers against. Exit status: 0 ok,
1 a failure (or the Python default for an uncaught exception), 2 a bad command line or
environment; killed by a signal, it dies by that signal.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import random
import signal
import stat
import struct
import sys
import time

if __package__ in (None, ""):
    # benchmark_common (the evaluation flags, the LoadGen harness) sits beside this folder.
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmark_common.flags import (  # noqa: E402 - standard library only
    DTYPES,
    TRACE_LEVELS,
    FlagError,
    FlagParser,
    add_bool_flag,
    add_num_classes_flag,
    check_trace_flags,
)
from benchmark_common.memory import peak_rss_mib  # noqa: E402 - standard library only
from benchmark_common.options import (  # noqa: E402 - standard library only
    add_evaluation_flags,
    evaluation_options,
)
from benchmark_common.protocol import emit, emit_failure, now_iso  # noqa: E402 - stdlib only
from benchmark_common.timed_marks import TimedMarks  # noqa: E402 - standard library only

__version__ = "1.0.0"

#: `--fail` modes, and what each does midway through the batches.
FAIL_MODES = {
    "none": "no failure",
    "exit": "print results.status failure with a reason, exit 1",
    "oom": "print a failure whose reason says 'out of memory' as PyTorch does, exit 1",
    "crash": "raise an uncaught exception: a traceback, no status line, exit 1",
    "hang": "sleep forever (SIGTERM and SIGINT still end it)",
    "garbage": "print junk and malformed protocol lines throughout, then valid results",
    "kill": "SIGKILL itself",
    "segv": "SIGSEGV itself",
}

# Human names of the model ids of docs/backends/protocol.md section 2; any other id is accepted
# and titled by itself, so the engine can be tested with made-up models.
MODEL_TITLES = {
    "deep_mnist": "DeepMNIST",
    "sensor_net": "SensorNet",
    "acoustic_model": "AcousticModel",
    "alexnet": "AlexNet",
    "alexnet_owt": "AlexNetOWT",
    "overfeat": "Overfeat",
    "googlenet": "GoogleNet",
    "vgg11": "VGG11",
    "vgg13": "VGG13",
    "vgg16": "VGG16",
    "vgg19": "VGG19",
    "resnet18": "ResNet18",
    "resnet34": "ResNet34",
    "resnet50": "ResNet50",
    "resnet101": "ResNet101",
    "resnet152": "ResNet152",
    "resnet200": "ResNet200",
    "resnet269": "ResNet269",
    "inception3": "InceptionV3",
    "inception4": "InceptionV4",
    "inception_resnet_v2": "InceptionResNetV2",
    "deep_speech2": "DeepSpeech2",
    "dummy": "Dummy",
}

DEVICES = ("cpu", "gpu")


class TopologyError(ValueError):
    """A bad WORLD_SIZE or RANK: the message names the variable."""


def _choice(allowed):
    """A converter that accepts one of `allowed` (any case) and names them all otherwise."""

    def convert(text: str) -> str:
        value = text.strip().lower()
        if value not in allowed:
            raise argparse.ArgumentTypeError(
                f"expected one of {', '.join(allowed)}, got {text!r}"
            )
        return value

    return convert


def _finite_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected seconds >= 0, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """Every flag the dummy backend accepts: docs/backends/protocol.md section 1, and its own."""
    p = FlagParser(
        prog="benchmarks.py",
        description="dlbs's dummy backend: sleeps per batch and reports protocol lines.",
        allow_abbrev=False,  # a misspelt flag is an error, never a silent prefix match
    )
    p.add_argument("--model", default="dummy", help="model id (any id; known ids get a title)")
    p.add_argument("--batch_size", type=int, default=16, help="per-replica batch")
    p.add_argument("--num_batches", type=int, default=10, help="timed batches")
    p.add_argument("--num_warmup_batches", type=int, default=1, help="untimed batches first")
    p.add_argument("--sleep", type=_finite_seconds, default=0.01,
                   help="seconds one batch takes")
    p.add_argument("--device", type=_choice(DEVICES), default="cpu", help="cpu or gpu")
    # The dtype is recorded as given (`float` stays `float`), not canonicalised.
    p.add_argument("--dtype", type=_choice(tuple(DTYPES)), default="float32",
                   help="; ".join(DTYPES))
    p.add_argument("--num_gpus", type=int, default=0,
                   help="GPUs on this node (recorded; a scenario's devices with --device gpu)")
    p.add_argument("--data_dir", default="", help="dataset path (recorded only)")
    p.add_argument("--num_threads", type=int, default=0, help="CPU threads (recorded only)")
    add_num_classes_flag(p, "the model's number of classes (the scenarios' dummy model's; "
                         "recorded)")
    for name, help_text in (
        ("forward_only", "inference if true, else training"),
        ("busy", "burn CPU for a batch's time instead of sleeping"),
    ):
        add_bool_flag(p, name, False, help_text)
    p.add_argument("--memory_mib", type=int, default=0,
                   help="MiB of host memory to allocate, touch and hold for the run")
    p.add_argument("--fail", type=_choice(tuple(FAIL_MODES)), default="none",
                   help="; ".join(f"{k}: {v}" for k, v in FAIL_MODES.items()))
    p.add_argument("--seed", type=int, default=None, help="seed of --fail garbage's junk")
    add_trace_flags(p)
    add_evaluation_flags(p)
    return p


def parse_options(argv=None) -> argparse.Namespace:
    """Parse and check the command line; raises FlagError."""
    opts = build_parser().parse_args(argv)
    opts.evaluation = evaluation_options(opts)
    if not opts.model.strip():
        raise FlagError("--model must not be empty")
    for name, least in (("batch_size", 1), ("num_batches", 1), ("num_warmup_batches", 0),
                        ("num_gpus", 0), ("num_threads", 0), ("memory_mib", 0)):
        if getattr(opts, name) < least:
            raise FlagError(f"--{name} must be >= {least}, got {getattr(opts, name)}")
    check_trace_flags(opts.trace_level, opts.trace_batches, opts.trace_file, opts.device)
    return opts


def topology_from_env():
    """(world size, rank) from WORLD_SIZE and RANK, else SLURM_NTASKS and SLURM_PROCID."""

    def read(name: str, fallback: str, default: int) -> int:
        text = os.environ.get(name) or os.environ.get(fallback) or ""
        if not text:
            return default
        try:
            return int(text)
        except ValueError:
            raise TopologyError(f"environment variable {name}={text!r} is not an integer") from None

    world = read("WORLD_SIZE", "SLURM_NTASKS", 1)
    rank = read("RANK", "SLURM_PROCID", 0)
    if world < 1 or not 0 <= rank < world:
        raise TopologyError(f"RANK={rank} is outside WORLD_SIZE={world}")
    return world, rank


def say(text: str) -> None:
    """An ordinary line of chatter, as any framework prints."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def percentile(sorted_values, percent: float) -> float:
    """Linear interpolation between closest ranks (numpy's default method)."""
    position = (len(sorted_values) - 1) * percent / 100.0
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    fraction = position - low
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * fraction


def time_statistics(times_ms) -> dict:
    """Mean, population std, median and tail percentiles of batch times (milliseconds)."""
    ordered = sorted(times_ms)
    mean = math.fsum(times_ms) / len(times_ms)
    variance = math.fsum((t - mean) ** 2 for t in times_ms) / len(times_ms)
    return {
        "results.time": mean,
        "results.time_std": math.sqrt(variance),
        "results.time_median": percentile(ordered, 50),
        "results.time_p90": percentile(ordered, 90),
        "results.time_p95": percentile(ordered, 95),
        "results.time_p99": percentile(ordered, 99),
    }


def oom_message(opts) -> str:
    """A reason worded as PyTorch words it, so OOM detection sees what it will see for real."""
    if opts.device == "gpu":
        return ("out of memory: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
                "total capacity of 79.19 GiB of which 1.06 GiB is free. Of the allocated "
                "memory 75.82 GiB is allocated by PyTorch, and 1.11 GiB is reserved by "
                "PyTorch but unallocated.")
    return ("out of memory: DefaultCPUAllocator: can't allocate memory: you tried to "
            f"allocate {opts.batch_size * 2**30} bytes. Error code 12 (Cannot allocate memory)")


# Junk for --fail garbage. The malformed lines look like protocol lines but their values are
# not JSON (a parser must count and skip them); the "stale" ones are valid JSON that the real
# results, printed later, must override (the last occurrence of a key wins).
MALFORMED_LINES = (
    "__results.time__=",
    "__results.time__=12.5.3",
    "__results.status__=ok",
    '__results.throughput__={"images": ',
    '__exp.model_title__="unterminated',
    "__results.time_data__=[1.0, 2.0,",
    "__results.mem_peak__=NaNa",
    "__ results.time __=1",
    "____=1",
    "__results.time=5",
)
STALE_LINES = (
    '__results.time__="fast"',
    '__results.status__="failure"',
    "__results.throughput__=-1",
)


def _junk_bytes(rng: random.Random, size: int) -> bytes:
    """Random bytes (invalid UTF-8 included) that never hold a newline or a `__`."""
    data = bytes(rng.getrandbits(8) for _ in range(size))
    return data.replace(b"\n", b"?").replace(b"__", b"_?")


def print_garbage(rng: random.Random, long_line: bool) -> None:
    """A burst of what a confused program might print, on stdout and stderr."""
    out = sys.stdout.buffer
    if long_line:  # longer than any line buffer a reader might assume
        out.write(_junk_bytes(rng, 256 * 1024) + b"\n")
    out.write(_junk_bytes(rng, rng.randint(1, 200)) + b"\n")
    out.write(rng.choice(MALFORMED_LINES).encode() + b"\n")
    out.write(b"progress 10%\rprogress 50%\r" + rng.choice(MALFORMED_LINES).encode() + b"\n")
    out.write(b"0: " + rng.choice(STALE_LINES).encode() + b"\n")
    out.write(b"\x00\x01\x02 nul bytes " + b"x" * rng.randint(0, 64) + b"\n")
    out.flush()
    sys.stderr.buffer.write(_junk_bytes(rng, rng.randint(1, 100)) + b"\n")
    sys.stderr.buffer.flush()


def _die_by(signum: int) -> None:
    """End this process by `signum` with its default action, as an external kill would."""
    sys.stdout.flush()
    sys.stderr.flush()
    if signum != signal.SIGKILL:  # SIGKILL's action cannot be set, nor needs to be
        signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    # SIGTERM/SIGINT/SIGKILL/SIGSEGV end the process before this point; wait if delivery lags.
    while True:
        time.sleep(1)


def _on_stop_signal(signum: int, frame) -> None:
    """SIGTERM or SIGINT (a timeout, Ctrl-C): report the failure, then die by the signal."""
    try:
        emit_failure(f"terminated by {signal.Signals(signum).name}")
    except (OSError, RuntimeError):
        pass  # the stream may be closed or in the middle of a write: dying matters more
    _die_by(signum)


def one_batch(seconds: float, busy: bool) -> float:
    """Spend one batch's time; return how long it really took, milliseconds."""
    start = time.perf_counter()
    if busy:
        deadline = start + seconds
        while time.perf_counter() < deadline:
            pass
    else:
        time.sleep(seconds)
    return (time.perf_counter() - start) * 1000.0


def fail_now(opts) -> int:
    """Fail the way `opts.fail` asks; returns an exit status for the modes that return."""
    say(f"dummy: failing as asked (--fail {opts.fail})")
    if opts.fail == "exit":
        emit_failure("dummy backend: requested failure (--fail exit)")
        return 1
    if opts.fail == "oom":
        print("RuntimeError: " + oom_message(opts).split(": ", 1)[1], file=sys.stderr)
        emit_failure(oom_message(opts))
        return 1
    if opts.fail == "crash":
        raise RuntimeError("dummy backend: requested crash (--fail crash)")
    if opts.fail == "hang":
        sys.stdout.flush()
        while True:
            time.sleep(3600)
    if opts.fail == "kill":
        _die_by(signal.SIGKILL)
    if opts.fail == "segv":
        _die_by(signal.SIGSEGV)
    raise AssertionError(f"unhandled --fail {opts.fail}")


def run(opts, world_size: int, rank: int) -> int:
    """The benchmark loop; prints the results (rank 0 only) and returns the exit status."""
    is_main = rank == 0
    title = MODEL_TITLES.get(opts.model, opts.model)
    phase = "inference" if opts.forward_only else "training"
    say(f"dummy backend {__version__} on Python {platform.python_version()}, "
        f"rank {rank} of {world_size}")
    say(f"model={opts.model} ({title}) phase={phase} batch_size={opts.batch_size} "
        f"device={opts.device} num_gpus={opts.num_gpus} dtype={opts.dtype} "
        f"data_dir={opts.data_dir!r} num_threads={opts.num_threads}"
        + (f" num_classes={opts.num_classes}" if opts.num_classes else ""))
    if is_main:
        emit("exp.model_title", title)
        emit("exp.framework_ver", f"dummy {__version__}")
    held = bytearray(opts.memory_mib * 2**20)
    held[::4096] = b"\x01" * len(range(0, len(held), 4096))  # touch every page: make it RSS
    rng = random.Random(opts.seed)
    total = opts.num_warmup_batches + opts.num_batches
    fail_at = total // 2 if opts.fail not in ("none", "garbage") else -1
    warmup_ms, timed_ms = [], []
    report_every = max(1, opts.num_batches // 4)
    marks = TimedMarks(emit, enabled=is_main)
    for index in range(total):
        if index == fail_at:
            return fail_now(opts)
        if opts.fail == "garbage":
            print_garbage(rng, long_line=index == 0)
        if index == opts.num_warmup_batches:
            marks.start()
        elapsed = one_batch(opts.sleep, opts.busy)
        if index < opts.num_warmup_batches:
            warmup_ms.append(elapsed)
            continue
        timed_ms.append(elapsed)
        if len(timed_ms) % report_every == 0:
            say(f"batch {len(timed_ms)}/{opts.num_batches}: {elapsed:.3f} ms")
    if opts.num_batches:
        marks.end()
    del held
    stats = time_statistics(timed_ms)
    if stats["results.time"] <= 0:
        emit_failure("the batch time was too short to measure (--sleep 0 on a coarse clock)")
        return 1
    memory = peak_rss_mib()  # before the traced pass, which never counts
    trace = trace_pass(opts) if is_main and opts.trace_level != "none" else {}
    if is_main:
        for key, value in stats.items():
            emit(key, value)
        emit("results.time_data", timed_ms)
        emit("results.warmup_time_data", warmup_ms)
        emit("results.throughput",
             opts.batch_size * world_size * 1000.0 / stats["results.time"])
        emit("results.mem_peak", memory)
        for key, value in trace.items():
            emit(key, value)
        emit("results.status", "ok")
        emit("results.end_time", now_iso())
    say(f"done: {opts.num_batches} batches, {stats['results.time']:.3f} ms per batch")
    return 0


# -- a synthetic trace (docs/tracing.md), so the engine's side is tested without a framework --
#: The made-up network of the synthetic trace: (name, type, share of its parent, children).
SYNTHETIC_LAYERS = (
    ("conv1", "Conv2d", 0.06, ()),
    *((f"layer{stage}", "Sequential", 0.2, (
        (f"layer{stage}.0", "Bottleneck", 0.45, ()), (f"layer{stage}.1", "Bottleneck", 0.45, ()),
    )) for stage in (1, 2, 3, 4)),
    ("fc", "Linear", 0.04, ()),
)
#: (phase, share of a training step); inference is data_wait and forward.
TRAINING_PHASES = (("data_wait", 0.05), ("forward", 0.3), ("backward", 0.45),
                   ("optimizer", 0.1))
INFERENCE_PHASES = (("data_wait", 0.05), ("forward", 0.85))


def add_trace_flags(parser: argparse.ArgumentParser) -> None:
    """--trace_level, --trace_batches, --trace_file (docs/backends/protocol.md section 1)."""
    parser.add_argument("--trace_level", type=_choice(TRACE_LEVELS), default="none",
                        help="none, or write a synthetic Chrome trace of this level "
                             "after the timed batches")
    parser.add_argument("--trace_batches", type=int, default=5, help="batches to trace")
    parser.add_argument("--trace_file", default="",
                        help="where the trace goes (.json.gz); needed with --trace_level")


def trace_pass(opts) -> dict:
    """Run --trace_batches more batches and write their synthetic trace; its protocol keys."""
    events = []
    for batch in range(opts.trace_batches):
        start = time.perf_counter_ns()
        one_batch(opts.sleep, opts.busy)
        end = time.perf_counter_ns()
        events.extend(synthetic_step(opts, batch, start / 1000.0, (end - start) / 1000.0))
    meta = {"format": 1, "framework": "dummy", "framework_ver": f"dummy {__version__}",
            "model": opts.model, "model_title": MODEL_TITLES.get(opts.model, opts.model),
            "phase": "inference" if opts.forward_only else "training", "device": opts.device,
            "dtype": opts.dtype, "batch_size": opts.batch_size,
            "trace_level": opts.trace_level, "trace_batches": opts.trace_batches,
            "layer_spans": opts.trace_level != "step", "synthetic": True}
    path = os.path.abspath(opts.trace_file)
    try:
        write_trace(path, meta, events)
    except OSError as error:
        return {"results.trace_error": f"cannot write the trace {path}: {error.strerror}"}
    return {"results.trace_file": path}


def synthetic_step(opts, batch: int, start: float, length: float) -> list:
    """One traced batch: the step, its phases and, by level, layers, operators, kernels."""
    pid = tid = os.getpid()
    level = TRACE_LEVELS.index(opts.trace_level)

    def span(cat, name, ts, dur, **args):
        return {"ph": "X", "cat": cat, "name": name, "ts": round(ts, 3),
                "dur": round(dur, 3), "pid": pid, "tid": tid, "args": {"batch": batch, **args}}

    events = [span("dlbs.step", "step", start, length)]
    at = start
    for name, share in INFERENCE_PHASES if opts.forward_only else TRAINING_PHASES:
        events.append(span("dlbs.phase", name, at, share * length))
        if name in ("forward", "backward") and level >= 2:
            events.extend(synthetic_layers(opts, span, name, at, share * length, level))
        at += share * length
    return events


def synthetic_layers(opts, span, phase: str, start: float, length: float, level: int) -> list:
    """Layer spans nested as SYNTHETIC_LAYERS (forward), operators and kernels by level."""
    events = []
    model = opts.model

    def leaf_work(name, kind, at, dur):
        if level < 3:
            return
        operator = ("aten::linear" if kind == "Linear" else "aten::conv2d") if \
            phase == "forward" else "autograd::engine::evaluate_function: ConvolutionBackward0"
        events.append(span("cpu_op", operator, at, 0.8 * dur))
        if level >= 4 and opts.device == "gpu":
            kernel = "sm90_xmma_gemm_f32f32_tf32f32" if kind == "Linear" else \
                "cudnn::implicit_convolve_sgemm"
            events.append({"ph": "X", "cat": "kernel", "name": kernel, "ts": round(at + 1, 3),
                           "dur": round(0.7 * dur, 3), "pid": 0, "tid": 7,
                           "args": {"dlbs.layer": name, "dlbs.operator": operator,
                                    "dlbs.phase": phase}})

    if phase == "backward":  # backward has no layer spans; its work is the leaves' gradients
        at = start
        for name, kind, share, children in SYNTHETIC_LAYERS:
            for leaf, leaf_kind, leaf_share, _ in children or ((name, kind, 1.0, ()),):
                dur = share * leaf_share * 0.9 * length
                leaf_work(leaf, leaf_kind, at, dur)
                at += dur
        return events
    root = 0.98 * length
    events.append(span("dlbs.layer", model, start, root, parent="", depth=0, type="Model"))
    at = start
    for name, kind, share, children in SYNTHETIC_LAYERS:
        dur = share * root
        events.append(span("dlbs.layer", name, at, dur, parent=model, depth=1, type=kind))
        child_at = at
        for child, child_kind, child_share, _ in children:
            events.append(span("dlbs.layer", child, child_at, child_share * dur,
                               parent=name, depth=2, type=child_kind))
            leaf_work(child, child_kind, child_at, child_share * dur)
            child_at += child_share * dur
        if not children:
            leaf_work(name, kind, at, dur)
        at += dur
    return events


def write_trace(path: str, meta: dict, events: list) -> None:
    """The gzip-compressed Chrome trace (benchmark_common.chrome_trace)."""
    from benchmark_common.chrome_trace import write_trace as write_chrome_trace

    write_chrome_trace(path, meta, events)


#: Classes of the dummy "model" in the scenarios; a sample's class is its index modulo this.
DUMMY_CLASSES = 1000
#: Samples of the dummy's query sample library when --num_samples is -1.
DUMMY_SAMPLES = 1024


def dummy_system(opts):
    """The dummy as LoadGen's system under test: each batch takes --sleep seconds.

    Its lanes are --inference_streams per device (--num_gpus devices with --device gpu, one
    on the CPU), each a thread of the harness that sleeps its batch's time: the stand-in for
    the GPUs of one system under test, with which the harness's dispatch is tested.
    Sample i's class is i % classes (--num_classes, else DUMMY_CLASSES); the dummy answers
    it first, except for every fourth sample (i % 4 == 3), where it ranks it second: top-1 is
    0.75 and top-5 1.0 over a multiple of four samples (with five classes or fewer, top-5 is
    not reported: benchmark_common/accuracy.py).
    """
    from benchmark_common.system import InferenceSystem

    devices = max(1, opts.num_gpus) if opts.device == "gpu" else 1
    classes_of_model = opts.num_classes or DUMMY_CLASSES

    class DummySystem(InferenceSystem):
        title = MODEL_TITLES.get(opts.model, opts.model)
        total_samples = opts.evaluation.num_samples if opts.evaluation.num_samples > 0 \
            else DUMMY_SAMPLES
        performance_samples = min(total_samples, DUMMY_SAMPLES)
        num_classes = classes_of_model
        lanes = devices * opts.evaluation.inference_streams

        def load(self, indices):
            pass

        def submit(self, indices, top=0, lane=0):
            one_batch(opts.sleep, opts.busy)
            if not top:
                return lambda: None
            classes, chances = [], []
            for index in indices:
                label = self.label(index)
                best = [(label + k) % classes_of_model for k in range(min(top, classes_of_model))]
                if index % 4 == 3 and len(best) > 1:
                    best[0], best[1] = best[1], best[0]
                classes.append(best)
                chances.append([0.5 / (k + 1) for k in range(top)])
            return lambda: (classes, chances)

        def label(self, index):
            return index % classes_of_model

        def sample_name(self, index):
            return f"sample_{index}"

    return DummySystem()


#: The most pixels an image may have: Pillow's limit (PIL.Image.MAX_IMAGE_PIXELS), which the
#: framework backends apply (a small file can decode to gigabytes).
MAX_IMAGE_PIXELS = 89_478_485
#: Bytes of the header read to tell an image and its size.
_HEADER_BYTES = 64 * 1024


def image_size(path: str) -> tuple[str, int, int]:
    """(format, width, height) from an image file's header; ValueError when it is no image.

    The dummy decodes nothing (standard library only), but it tells images from other files
    as the framework backends do: by the signatures of PNG, JPEG, GIF, BMP, WebP and TIFF,
    and, where the header holds it, the size, refused above MAX_IMAGE_PIXELS.
    """
    # O_NONBLOCK: a FIFO is opened without waiting for a writer (and then refused).
    with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise ValueError("not a regular file")
        head = handle.read(_HEADER_BYTES)
    if not head:
        raise ValueError("the file is empty")
    try:
        kind, width, height = _header_size(head)
    except struct.error:   # a signature, then the file ends before the size: one image's error
        raise ValueError("not an image: the file ends inside its header (truncated)") from None
    if width * height > MAX_IMAGE_PIXELS:
        raise ValueError(f"the image has {width * height} pixels, more than the "
                         f"{MAX_IMAGE_PIXELS:,} an image may have (a decompression bomb?)")
    return kind, width, height


def _header_size(head: bytes) -> tuple[str, int, int]:
    """(format, width, height) from the signature and header (0 x 0 where it holds none).

    Raises ValueError for a file of no known signature, struct.error for a header cut short.
    """
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        if head[12:16] != b"IHDR":
            if len(head) < 16:
                raise struct.error("cut short")
            raise ValueError("not an image (a PNG whose first chunk is not IHDR)")
        return "PNG", *struct.unpack(">II", head[16:24])
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "GIF", *struct.unpack("<HH", head[6:10])
    if head.startswith(b"BM"):
        return "BMP", *(abs(v) for v in struct.unpack("<ii", head[18:26]))
    if head.startswith(b"\xff\xd8\xff"):
        return "JPEG", *_jpeg_size(head)
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "WebP", 0, 0
    if head[:4] in (b"II*\x00", b"MM\x00*"):
        return "TIFF", 0, 0
    raise ValueError("not an image (no PNG, JPEG, GIF, BMP, WebP or TIFF signature)")


def _jpeg_size(head: bytes) -> tuple[int, int]:
    """Width and height from a JPEG's start-of-frame marker ((0, 0) past the header read).

    A file that ends before its frame header (shorter than the header read) is cut short.
    """
    position = 2
    while position + 9 < len(head):
        if head[position] != 0xFF:
            raise ValueError("not an image (a JPEG whose markers are broken)")
        marker = head[position + 1]
        length = struct.unpack(">H", head[position + 2:position + 4])[0]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", head[position + 5:position + 9])
            return width, height
        position += 2 + length
    if len(head) < _HEADER_BYTES:
        raise struct.error("the file ends before the JPEG's frame header")
    return 0, 0


def predict_files(paths, top: int) -> int:
    """--predict without a framework: an image's "class" is its size modulo DUMMY_CLASSES.

    A file that is no image (`image_size`) is an error line, as in the framework backends.
    """
    failed = 0
    for path in paths:
        try:
            image_size(path)
            size = os.path.getsize(path)
        except (OSError, ValueError) as error:
            reason = (error.strerror or str(error)) if isinstance(error, OSError) else str(error)
            emit("predict.result", {"image": path, "error": reason})
            failed += 1
            continue
        best = [(size + k) % DUMMY_CLASSES for k in range(top)]
        emit("predict.result", {"image": path, "top": [
            {"class": cls, "probability": 0.5 / (k + 1)} for k, cls in enumerate(best)]})
    # A file that is not an image is the file's problem, told on its own line: the run is ok.
    say(f"{failed} of {len(paths)} files could not be classified")
    emit("results.status", "ok")
    emit("results.end_time", now_iso())
    return 0


def evaluate(opts, world_size: int) -> int:
    """--predict, or a LoadGen scenario (docs/evaluation.md) over the dummy system."""
    emit("exp.model_title", MODEL_TITLES.get(opts.model, opts.model))
    emit("exp.framework_ver", f"dummy {__version__}")
    evaluation = opts.evaluation
    if evaluation.predict:
        return predict_files(evaluation.predict, evaluation.top)
    if world_size > 1:
        print("benchmarks.py: error: the scenarios run one process (WORLD_SIZE is "
              f"{world_size})", file=sys.stderr)
        emit_failure(f"bad environment: --scenario {evaluation.scenario} runs one process")
        return 2
    from benchmark_common.harness import EvaluationSetupError, run_evaluation

    def abort(error):
        emit_failure(f"{type(error).__name__}: {error}")
        sys.stdout.flush()
        os._exit(1)

    say(f"dummy backend {__version__}: scenario {evaluation.scenario}, batch {opts.batch_size}, "
        f"{opts.sleep * 1000:g} ms per batch, {dummy_system(opts).lanes} lane(s)")
    try:
        results = run_evaluation(dummy_system(opts), evaluation, batch_size=opts.batch_size,
                                 warmup=opts.num_warmup_batches, say=say, abort=abort)
    except EvaluationSetupError as error:
        print(f"benchmarks.py: error: {error}", file=sys.stderr)
        emit_failure(str(error))
        return 2
    except RuntimeError as error:
        emit_failure(f"RuntimeError: {error}")
        return 1
    for key, value in results.items():
        emit(key, value)
    emit("results.mem_peak", peak_rss_mib())
    emit("results.status", "ok")
    emit("results.end_time", now_iso())
    return 0


def main(argv=None) -> int:
    """Parse flags, run, print the protocol lines; return the exit status."""
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _on_stop_signal)
    start_time = now_iso()
    try:
        opts = parse_options(argv)
        world_size, rank = topology_from_env()
    except (FlagError, TopologyError) as error:
        message = str(error).replace("\n", " ")
        what = "command line" if isinstance(error, FlagError) else "environment"
        print(f"benchmarks.py: error: {message}", file=sys.stderr)
        emit_failure(f"bad {what}: {message}")
        return 2
    if rank == 0:
        emit("results.start_time", start_time)
    if opts.evaluation.is_evaluation:
        return evaluate(opts, world_size)
    return run(opts, world_size, rank)


if __name__ == "__main__":
    sys.exit(main())
