#!/usr/bin/env bash
# The wheels the GPU scripts (bench/evaluation/run_on_device.sh, bench/tracing/...) install
# on the GPU machine (Python 3.12, PyTorch preinstalled, no internet) through
# bench/device/setup_env.sh, downloaded here for CPython 3.12 on x86-64 Linux into
# bench/device/wheels (ignored by git; carry it to the device):
# - dlbs's dependencies as pyproject.toml pins them (ijson included: `dlbs trace` streams
#   traces with it), but numpy (the machine's torch brings one; 1.23.5 has no 3.12 wheel),
#   scipy and matplotlib (the machine has them, and `dlbs run` never imports them);
# - MLCommons LoadGen (the evaluation scenarios);
# - only for a machine that lacks them: numpy 2.2, Pillow, torchvision 0.26.0 (torch 2.11's).
#
#   bash bench/device/build_wheels.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
dest="${WHEELS:-$here/wheels}"
pip="${PIP:-python3 -m pip}"
rm -rf "$dest" && mkdir -p "$dest"
platform=(--only-binary=:all: --python-version 3.12 --implementation cp --abi cp312
          --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64
          --platform manylinux2014_x86_64 --platform any)
mapfile -t pins < <(python3 - "$repo/pyproject.toml" <<'PY'
import re, sys, tomllib
skip = {"numpy", "scipy", "matplotlib"}
for pin in tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]:
    if re.split(r"[=<>!~ ;\[]", pin, maxsplit=1)[0].lower() not in skip:
        print(pin)
PY
)
$pip download --dest "$dest" "${platform[@]}" "${pins[@]}" mlcommons-loadgen==6.0.17
mkdir -p "$dest/optional"
$pip download --dest "$dest/optional" "${platform[@]}" --no-deps numpy==2.2.6 \
    Pillow==13.0.0 torchvision==0.26.0
ls "$dest" "$dest/optional"
