#!/usr/bin/env bash
# Set up everything the test suite needs and run all of it (as root on Debian 12):
# the venv with PyTorch and MXNet, the Docker Engine and a local test image, and a
# two-node SLURM cluster on this machine. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh --all
bash .ci/services/docker.sh
bash .ci/services/test-image.sh
bash .ci/services/slurm.sh
exec .venv/bin/python -m pytest "$@"
