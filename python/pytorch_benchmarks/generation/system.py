"""A decoder's scenarios: `benchmark` (benchmark.py) and LoadGen's with token latencies.

`generate(opts, topology, abort)` runs `--scenario` for a Llama decoder in inference and
returns the protocol's results. For `server`, `offline` and `max_qps` the decoders are
LoadGen's system under test (`benchmark_common.token_harness`): one engine per device of
`--num_gpus` (a replica of the model on each), each serving its slots by continuous batching
(serving.py) from the one queue LoadGen's requests wait in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from benchmark_common.harness import EvaluationSetupError
from benchmark_common.token_harness import GenerationSystem, run_token_evaluation
from benchmark_common.token_lengths import request_lengths

from .. import distributed
from ..errors import UserError
from ..runner import SetupError, configure_torch, log, peak_memory_mib
from .benchmark import run_generation_benchmark
from .engine import Engine, Requests
from .serving import Replica
from .setup import build_engine, compilations, model_title
from .stamps import Stamps

#: The scenarios a decoder runs (the others are for classifiers).
SCENARIOS = ("benchmark", "server", "offline", "max_qps")
#: Distinct synthetic requests when --num_samples is -1.
DEFAULT_REQUESTS = 1024


def decode_sizes(slots: int, asked: Sequence[int] = ()) -> list[int]:
    """The decode sizes prepared for `slots` slots.

    `asked` (those below `slots`), else 1, 4, 16, ...; and `slots` itself.

    Continuous batching decodes the slots up to the highest busy one (serving.py); powers of
    four keep the compiled and captured sizes few while a lightly loaded engine still decodes
    small batches. Each size is a compilation (tens of seconds for an 8B model on a GPU): a
    serving run under load is served by the largest.
    """
    if asked:
        return sorted({size for size in asked if size < slots} | {slots})
    sizes, size = [], 1
    while size < slots:
        sizes.append(size)
        size *= 4
    return sizes + [slots]


class TorchGenerationSystem(GenerationSystem):
    """Engines on their devices over one set of synthetic requests (module doc)."""

    def __init__(self, opts: Any, devices: Sequence[torch.device]) -> None:
        gen = opts.generation
        count = opts.evaluation.num_samples if opts.evaluation.num_samples > 0 \
            else DEFAULT_REQUESTS
        self.lengths = request_lengths(gen.token_lengths, count, gen.input_tokens,
                                       gen.output_tokens, gen.token_range_ratio)
        self.total_samples = self.performance_samples = count
        self.replicas = len(devices)
        self.slots = opts.batch_size
        self.asked_sizes = gen.decode_sizes
        self.asynchronous = devices[0].type == "cuda"
        self.engines: list[Engine] = []
        self.serving: list[Replica] = []
        for device in devices:
            engine = build_engine(opts, device, self.lengths, slots=opts.batch_size, say=log)
            requests = Requests(self.lengths, engine.config.vocab_size, device)
            self.engines.append(engine)
            self.serving.append(Replica(engine, requests, Stamps(device)))

    def output_tokens(self, index: int) -> int:
        return self.lengths[index][1]

    def prepare(self, say: Callable[[str], None]) -> None:
        for replica in self.serving:
            replica.prepare(decode_sizes(replica.engine.slots, self.asked_sizes))
        say("prepared: decode sizes " + ", ".join(map(str, self.engines[0].decode_sizes))
            + f" on {self.replicas} engine(s)")

    def serve(self, replica: int, queue: Any, report: Any) -> None:
        self.serving[replica].serve(queue, report)

    def bind_thread(self, replica: int) -> None:
        device = self.engines[replica].device
        if device.type == "cuda":
            torch.cuda.set_device(device)

    def wait(self, replica: int, stamp: Any) -> None:
        self.serving[replica].stamps.wait(stamp)

    def compilations(self) -> int:
        return compilations()

    def served(self) -> str:
        return "; ".join(replica.line(reset=True) for replica in self.serving)


def generate(opts: Any, topology: distributed.Topology,
             abort: Callable[[BaseException], None]) -> dict[str, Any]:
    """Run `--scenario` for a decoder (module doc); the results to print."""
    from ..evaluation import evaluation_devices

    scenario = opts.evaluation.scenario
    if opts.evaluation.predict or scenario not in SCENARIOS:
        what = "--predict" if opts.evaluation.predict else f"--scenario {scenario}"
        raise UserError(f"{what} is for classifiers; a decoder ({opts.model}) runs "
                        f"--scenario {', '.join(SCENARIOS)}")
    if topology.world_size > 1:
        raise SetupError(f"a decoder's --scenario {scenario} runs one process (WORLD_SIZE is "
                         f"{topology.world_size}); the LoadGen scenarios serve every GPU of "
                         "--num_gpus from it")
    devices = evaluation_devices(opts, topology)
    configure_torch(opts, devices[0])
    results: dict[str, Any] = {"exp.model_title": model_title(opts.model),
                               "exp.framework_ver": torch.__version__}
    log(f"generation: model={opts.model} scenario={scenario} "
        f"devices={','.join(str(device) for device in devices)} dtype={opts.dtype} "
        f"slots={opts.batch_size} token_lengths={opts.generation.token_lengths} "
        f"input_tokens={opts.generation.input_tokens} "
        f"output_tokens={opts.generation.output_tokens} compile={opts.compile} "
        f"torch={torch.__version__}")
    if scenario == "benchmark":
        if len(devices) > 1:
            raise UserError("a decoder's benchmark runs on one GPU; server, offline and max_qps "
                            "serve several")
        results.update(run_generation_benchmark(opts, devices[0], log))
    else:
        system = TorchGenerationSystem(opts, devices)
        try:
            results.update(run_token_evaluation(system, opts.evaluation, opts.generation,
                                                say=log, abort=abort))
        except EvaluationSetupError as error:
            raise UserError(str(error)) from None
    results["results.mem_peak"] = max(peak_memory_mib(device) for device in devices)
    if devices[0].type == "cuda":
        results["results.gpu_model"] = torch.cuda.get_device_name(devices[0])
    return results
