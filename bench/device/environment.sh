# Sourced by the GPU scripts of the LoadGen scenarios (bench/evaluation/run_on_device.sh,
# bench/llm_serving/run_on_device.sh) after setup_env.sh: the date, Python, torch, CUDA,
# LoadGen, the CPUs, the GPUs and the driver, into $out/environment.txt (and the log).
# Expects: out (the output folder), python (the interpreter that holds PyTorch and LoadGen).
{
    date -u +"%Y-%m-%dT%H:%M:%SZ"
    "$python" - <<'PY'
import os, platform, torch, mlperf_loadgen  # noqa: F401
print("python", platform.python_version(), "torch", torch.__version__,
      "cuda", torch.version.cuda, "loadgen 6.0.17 (pinned)", "cpus", os.cpu_count())
for index in range(torch.cuda.device_count()):
    print("gpu", index, torch.cuda.get_device_name(index))
PY
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.max.sm \
        --format=csv,noheader || true
} | tee "$out/environment.txt"
