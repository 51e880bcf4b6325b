#!/usr/bin/env bash
# Set up everything the test suite needs and run all of it (as root on Debian 12):
# the venv with PyTorch and MXNet, the Docker Engine and a local test image (also served
# by Podman's Docker-compatible API), a
# two-node SLURM cluster on this machine, Debian's chromium (HTML report test) and
# PostgreSQL 15 (the shared results store).
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh --all
bash .ci/services/docker.sh
bash .ci/services/test-image.sh
bash .ci/services/podman.sh
bash .ci/services/slurm.sh
bash .ci/services/chromium.sh
# The shared results store's tests (docs/results.md): the service prints its URL last.
DLBS_TEST_POSTGRES_URL=$(bash .ci/services/postgres.sh | tail -n 1)
export DLBS_TEST_POSTGRES_URL
exec .venv/bin/python -m pytest "$@"
