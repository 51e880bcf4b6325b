#!/usr/bin/env bash
# Create (or update) the virtual environment .venv with dlbs installed from this checkout.
#
#   scripts/setup.sh            dlbs and its test tools
#   scripts/setup.sh --pytorch  ... plus the PyTorch backend's packages (CPU is enough)
#   scripts/setup.sh --all      ... plus PyTorch, MXNet 1.9.1 (numpy 1.23.5) and ONNX Runtime, in one venv
#
# Works on a fresh Debian machine as root: python3-venv is installed when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

extras="test"
case "${1:-}" in
    "") ;;
    --pytorch) extras="test,pytorch" ;;
    --all) extras="test,pytorch,mxnet,onnxruntime" ;;
    *) echo "usage: $0 [--pytorch|--all]" >&2; exit 2 ;;
esac

python=${PYTHON:-python3}
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "setup.sh: dlbs needs Python >= 3.11 ($python is $("$python" --version 2>&1))" >&2
    exit 2
fi
if ! "$python" -m venv --help >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
fi
[ -x .venv/bin/python ] || "$python" -m venv .venv
# What this venv was last set up from: pyproject.toml, the extras and the interpreter. When
# nothing of that changed, nothing is installed or checked again (pip alone takes most of a
# minute to find that everything is there).
stamp=.venv/.dlbs-setup
wanted=$( (cat pyproject.toml; echo "$extras"; .venv/bin/python -VV) | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" = "$wanted" ]; then
    echo "setup.sh: .venv is already set up from this pyproject.toml (extras: $extras)"
    exit 0
fi
rm -f "$stamp"
# uv installs what pip would (scripts/uv_install.py passes pip's sources on) on every core and
# links it from its cache (~/.cache/uv): this venv in 18 s from an empty cache and 5 s from a
# warm one, where pip took 75 s. It is fetched into the venv at a pinned version; where it
# cannot be had (no route to PyPI) or fails, pip installs as before.
UV_VERSION=0.13.9
install_with_uv() {
    case "$(.venv/bin/uv --version 2>/dev/null)" in  # "uv 0.13.9 (x86_64-unknown-linux-gnu)"
        "uv $UV_VERSION"|"uv $UV_VERSION "*) ;;
        *) .venv/bin/python -m pip install -q "uv==$UV_VERSION" >/dev/null 2>&1 || return 1 ;;
    esac
    .venv/bin/python scripts/uv_install.py .venv/bin/uv .venv/bin/python "$extras"
}
install_with_pip() {
    .venv/bin/python -m pip install -q --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
    .venv/bin/python -m pip install -q --no-compile -e ".[$extras]" 2>&1 \
        | grep -v "^WARNING: Location" || true
}
if ! install_with_uv; then
    echo "setup.sh: uv is not available here: installing with pip (a few minutes)" >&2
    install_with_pip
fi
# Where PYTHONDONTWRITEBYTECODE is set, Python writes no bytecode, and each process would
# compile every module it imports again (import torch: 10 s instead of 4): compile the venv
# here, once, on every core. Elsewhere Python writes a module's bytecode at its first import.
if [ -n "${PYTHONDONTWRITEBYTECODE:-}" ]; then
    site_packages=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    # Files that are not Python 3 (a few packages ship templates) fail and are skipped.
    .venv/bin/python -m compileall -q -j 0 "$site_packages" >/dev/null 2>&1 || true
fi
# Check that what we need imports (pip's exit status is hidden by its filter above), the
# checks side by side. They import what dlbs and the backends use (compare's statistics,
# plots, torch.compile's stack), so that where bytecode is written, it is written here, once,
# and not by each of the first processes that need a module (import torch the first time:
# 12 s; with torch.compile's stack: 20 s, then 8 s).
checks=("import dlbs.cli.main, ruamel.yaml, simpleeval, orjson, scipy.stats, matplotlib.pyplot")
case "$extras" in
    *pytorch*) checks+=("import torch, torchvision, torch._dynamo, torch._inductor.compile_fx") ;;
esac
case "$extras" in
    *mxnet*) checks+=("import warnings; warnings.simplefilter('ignore'); import mxnet") ;;
esac
case "$extras" in *onnxruntime*) checks+=("import onnxruntime, onnx, onnxscript") ;; esac
pids=()
for check in "${checks[@]}"; do
    .venv/bin/python -c "$check" &
    pids+=($!)
done
for pid in "${pids[@]}"; do
    wait "$pid"
done
echo "$wanted" >"$stamp"
echo "setup.sh: .venv ready (extras: $extras)"
