"""The generation engine on the CPU (docs/llm-serving.md), in this process.

Greedy decoding from the KV cache must give exactly the tokens a full recomputation of the
whole sequence gives (float32, Llama 3's debug flavour), for prompts of different lengths
prefilled together (right-padded), and for requests that join and leave the running batch
in slots of their own; the compiled steps never compile again once prepared.
"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.pytorch]

PROMPT_LENGTHS = (5, 17, 33)
TOKENS = 24


@pytest.fixture(scope="module")
def decoder():
    """The debug flavour, float32, random weights; prompts; the reference continuations."""
    import torch
    from pytorch_benchmarks.generation.engine import build_model, greedy_reference
    from pytorch_benchmarks.models.llama import FLAVORS

    torch.set_num_threads(1)
    model = build_model(FLAVORS["llama3_debug"], torch.device("cpu"), torch.float32, seed=3)
    prompts = [[(7 * i + 11 * j + 1) % 512 for j in range(length)]
               for i, length in enumerate(PROMPT_LENGTHS)]
    references = [greedy_reference(model, prompt, TOKENS) for prompt in prompts]
    return model, prompts, references


def engine_for(model, slots: int = 4, **kwargs):
    from pytorch_benchmarks.generation.engine import Engine, cache_length

    return Engine(model, slots=slots, length=cache_length(max(PROMPT_LENGTHS) + TOKENS),
                  **kwargs)


def test_kv_cache_decode_equals_full_recomputation(decoder):
    from pytorch_benchmarks.generation.engine import generate, greedy_reference

    model, prompts, references = decoder
    engine = engine_for(model)
    engine.prepare_decode([1, 4])
    assert generate(engine, prompts, TOKENS) == references
    # The references are not trivial, and the model computes as before its weights were fused.
    assert all(len(set(reference)) > 3 for reference in references)
    assert greedy_reference(model, prompts[0], TOKENS) == references[0]


def test_requests_join_and_leave_the_running_batch(decoder):
    """Slots keep their own positions.

    A request admitted mid-way, into a slot another one left, continues exactly as alone;
    free slots inside the decoded range harm nobody.
    """
    from pytorch_benchmarks.generation.engine import padded_prompts

    model, prompts, references = decoder
    engine = engine_for(model)
    engine.prepare_decode([1, 4])
    produced: dict[int, list[int]] = {}

    def admit(slot: int, request: int) -> None:
        engine.prefill([slot], padded_prompts([prompts[request]], engine.device),
                       [len(prompts[request])])
        produced[request] = [int(engine.tokens[slot])]

    def step(size: int, slots: dict[int, int]) -> None:
        engine.decode(size)
        for slot, request in slots.items():
            produced[request].append(int(engine.tokens[slot]))

    admit(0, 0)
    for _ in range(5):
        step(1, {0: 0})
    admit(2, 1)                       # joins in slot 2; slot 1 stays free
    for _ in range(TOKENS - 6):
        step(4, {0: 0, 2: 1})
    assert produced[0] == references[0]   # request 0 is complete and leaves slot 0
    admit(0, 2)                       # request 2 takes the slot request 0 left
    for _ in range(5):
        step(4, {0: 2, 2: 1})
    assert produced[1] == references[1]
    for _ in range(TOKENS - 6):
        step(4, {0: 2})
    assert produced[2] == references[2]


def test_the_prepared_steps_never_compile_again(decoder):
    """What is prepared is all there is to compile.

    Every decode size and both prefill graphs (a batch of one, of more) are prepared; any
    prompt length, batch and step after that runs them without compiling.
    """
    import torch
    from pytorch_benchmarks.generation.engine import padded_prompts
    from pytorch_benchmarks.generation.setup import compilations

    model, prompts, _ = decoder
    torch._dynamo.reset()
    # aot_eager: dynamo and AOTAutograd's graphs (inductor's C++ would add minutes here).
    engine = engine_for(model, compile_steps=True, compile_backend="aot_eager")
    engine.prepare_decode([1, 4])
    engine.prefill([0, 1], padded_prompts(prompts[:2], engine.device), PROMPT_LENGTHS[:2])
    engine.prefill([2], padded_prompts(prompts[2:], engine.device), PROMPT_LENGTHS[2:])
    before = compilations()
    assert before > 0
    engine.prefill([0, 1, 2], padded_prompts(prompts, engine.device), PROMPT_LENGTHS)
    engine.prefill([3], padded_prompts([prompts[0][:3]], engine.device), [3])
    for size in (1, 4, 4, 1):
        for _ in range(6):
            engine.decode(size)
    assert compilations() == before


def test_a_prompt_longer_than_the_cache_is_one_clear_line():
    from evaluation_helpers import run_backend

    run = run_backend("pytorch", "--model", "llama3_debug", "--forward_only", "true",
                      "--device", "cpu", "--batch_size", "2", "--input_tokens", "20",
                      "--output_tokens", "8", "--kv_cache_tokens", "16")
    assert run.returncode == 2, run.stderr
    message = ("a prompt of 20 tokens and 8 output tokens need 28 positions; the KV cache "
               "holds 16 (exp.kv_cache_tokens)")
    assert run.values["results.status_msg"] == message
    assert run.stderr.strip().splitlines() == [f"benchmarks.py: error: {message}"]


def test_the_decode_reads_and_computes_what_the_formulas_say(decoder):
    """Bytes a step must read and FLOPs a token costs, from the model's own numbers."""
    from pytorch_benchmarks.models.llama import FLAVORS, num_params

    model, _, _ = decoder
    engine = engine_for(model)
    config = FLAVORS["llama3_debug"]
    # Every weight but the embedding table (the debug flavour's output is not tied).
    weights = num_params(config) - config.vocab_size * config.dim
    assert engine.weight_bytes == 4 * weights
    per_position = 2 * config.n_layers * config.n_kv_heads * config.head_dim * 4
    assert engine.read_bytes(rows=3, context_positions=100) == \
        4 * weights + 3 * config.dim * 4 + 100 * per_position
    attention = 4 * config.n_layers * config.n_heads * config.head_dim
    assert engine.flops_per_token(10.0) == 2.0 * weights + attention * 10.0
