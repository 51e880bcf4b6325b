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
# pip keeps the wheels it downloads in its cache (~/.cache/pip): the venv of a fresh clone
# installs from there.
.venv/bin/python -m pip install -q --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
# pip byte-compiles the ~10,000 modules it installs one after another (about half of its
# time); compileall does it on every core. Files that are not Python 3 (a few packages ship
# templates) fail to compile under pip as well and are skipped alike.
.venv/bin/python -m pip install -q --no-compile -e ".[$extras]" 2>&1 \
    | grep -v "^WARNING: Location" || true
site_packages=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
.venv/bin/python -m compileall -q -j 0 "$site_packages" >/dev/null 2>&1 || true
# pip's exit status is hidden by the filter above: check that what we need imports.
.venv/bin/python -c "import dlbs.cli.main, ruamel.yaml, simpleeval, orjson"
case "$extras" in
    *pytorch*) .venv/bin/python -c "import torch, torchvision" ;;
esac
case "$extras" in
    *mxnet*) .venv/bin/python -W ignore -c "import mxnet" ;;
esac
case "$extras" in
    *onnxruntime*) .venv/bin/python -c "import onnxruntime, onnx, onnxscript" ;;
esac
echo "$wanted" >"$stamp"
echo "setup.sh: .venv ready (extras: $extras)"
