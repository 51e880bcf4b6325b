#!/usr/bin/env bash
# The wheels run_on_device.sh installs on the GPU machine (Python 3.12, PyTorch preinstalled,
# no internet): what `dlbs run` imports, MLCommons LoadGen, and, only in case the machine
# lacks them, torchvision 0.26.0 (torch 2.11's) and numpy. Downloaded here for CPython 3.12
# on x86-64 Linux, into bench/evaluation/wheels (ignored by git; carry it to the device).
#
#   bash bench/evaluation/build_wheels.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dest="${WHEELS:-$here/wheels}"
pip="${PIP:-python3 -m pip}"
mkdir -p "$dest"
platform=(--only-binary=:all: --python-version 3.12 --implementation cp --abi cp312
          --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64
          --platform manylinux2014_x86_64 --platform any)
# dlbs's own pins (pyproject.toml) for what `dlbs run` imports; numpy 1.23.5 has no 3.12
# wheel, so the newest numpy 2.2 stands in, used only if the machine has no numpy.
$pip download --dest "$dest" "${platform[@]}" \
    mlcommons-loadgen==6.0.17 ruamel.yaml==0.19.1 simpleeval==1.0.8 orjson==3.13.0 \
    rich==15.0.0 Jinja2==3.1.6 docker==7.2.0 Pillow==13.0.0 numpy==2.2.6 setuptools==80.9.0
$pip download --dest "$dest" "${platform[@]}" --no-deps torchvision==0.26.0
ls "$dest"
