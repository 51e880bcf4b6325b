#!/usr/bin/env bash
# Set up everything the test suite needs and run all of it (as root on Debian 12):
# the venv with PyTorch and MXNet, the Docker Engine and a local test image (also served
# by Podman's Docker-compatible API), a
# two-node SLURM cluster on this machine, Debian's chromium (HTML report test) and
# PostgreSQL 15 (the shared results store).
# Each step skips what is already installed or running. Extra arguments go to pytest.
#
# The tests run on DLBS_TEST_WORKERS pytest-xdist workers (default 4 on this 2-core machine:
# the tests of the shared services, which mostly wait for them, run one after another on
# one worker while the others take the rest; tests/parallel.py; 4 kept both cores busy where
# 3 left them idle at times: pytest 749 s against 809 s, same machine, back to back); 0 runs
# them in one process.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh --all
# Byte-compiled once here: where PYTHONDONTWRITEBYTECODE is set, each of the suite's
# thousands of `dlbs` and backend processes would otherwise compile its modules again.
.venv/bin/python -m compileall -q dlbs launchers python tests >/dev/null
# pytest rewrites the asserts of each test module it imports; where PYTHONDONTWRITEBYTECODE
# is set it keeps no rewritten copy, and every worker rewrote all ~280 modules again (19
# CPU-s each). One collection, while the services start, leaves the copies for the workers;
# its errors, if any, are the run's to report.
env -u PYTHONDONTWRITEBYTECODE .venv/bin/python -m pytest --collect-only -q \
    -p no:cacheprovider >/dev/null 2>&1 &
collecting=$!
bash .ci/services/docker.sh
bash .ci/services/test-image.sh
bash .ci/services/podman.sh
bash .ci/services/slurm.sh
bash .ci/services/chromium.sh
# The shared results store's tests (docs/results.md): the service prints its URL last.
DLBS_TEST_POSTGRES_URL=$(bash .ci/services/postgres.sh | tail -n 1)
export DLBS_TEST_POSTGRES_URL
wait "$collecting" || true
exec .venv/bin/python -m pytest -n "${DLBS_TEST_WORKERS:-4}" --dist loadgroup "$@"
