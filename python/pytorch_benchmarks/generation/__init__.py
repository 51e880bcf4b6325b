"""Generation with the Llama decoders (models/llama.py), beside the model: docs/llm-serving.md.

- `engine.py`: the engine, gpt-fast's way: fused weights, a static KV cache of fixed slots,
  prefill, and a decode step compiled and captured in a CUDA graph; greedy, on the device.
- `serving.py`: continuous batching over the engine's slots, for LoadGen's scenarios.
- `benchmark.py`: `exp.scenario benchmark` of a decoder: prefill and decode of one batch,
  TTFT, TPOT, tokens per second and the bytes a decode step reads.
- `system.py`: the decoders as LoadGen's system under test (benchmark_common.token_harness).
"""
