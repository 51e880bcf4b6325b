# Sourced by the GPU scripts (bench/evaluation/run_on_device.sh, bench/tracing/...): makes
# dlbs and its dependencies importable on the GPU machine, where nothing can be downloaded.
#
# Expects: repo (the checkout), wheels (bench/device/wheels, from build_wheels.sh), python
# (the interpreter that holds PyTorch; on the GPU machines a venv of its own, so a new
# `--system-site-packages` venv over it would not see torch). The wheels are installed with
# `--target` into $DLBS_SITE (default /tmp/dlbs-site) and dlbs runs from the checkout:
# PYTHONPATH=<repo>:<site> (dlbs then loads its recipes from the checkout's launchers/).
# numpy, Pillow and torchvision come from the wheels only where the machine lacks them.
# SKIP_INSTALL=1 installs nothing and uses $python as it is (how the CPU rehearsals run).
if [[ "${SKIP_INSTALL:-0}" != 1 ]]; then
    dlbs_site="${DLBS_SITE:-/tmp/dlbs-site}"
    dlbs_pip=("$python" -m pip install --quiet --no-index --no-deps --no-compile
              --no-cache-dir --upgrade --target "$dlbs_site")
    "${dlbs_pip[@]}" "$wheels"/*.whl
    for module in numpy:numpy PIL:pillow torchvision:torchvision; do
        "$python" -c "import ${module%%:*}" 2>/dev/null ||
            "${dlbs_pip[@]}" "$wheels"/optional/"${module##*:}"-*.whl
    done
    export PYTHONPATH="$repo:$dlbs_site${PYTHONPATH:+:$PYTHONPATH}"
fi
