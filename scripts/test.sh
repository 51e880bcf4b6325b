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

# Python writes each module's bytecode at its first import, once for the whole suite, also
# where the environment says PYTHONDONTWRITEBYTECODE: otherwise each of the suite's thousands
# of `dlbs` and backend processes compiles the modules it imports again, and setup.sh would
# compile all of the venv's 10,000 modules ahead (31 s) for the few thousand that run.
unset PYTHONDONTWRITEBYTECODE
bash scripts/setup.sh --all
# pytest rewrites the asserts of each test module it imports and keeps the rewritten copy
# beside its bytecode: one collection, while the services start, leaves them for the workers
# (each rewrote all ~280 modules again, 19 CPU-s each); its errors, if any, are the run's to
# report.
.venv/bin/python -m pytest --collect-only -q -p no:cacheprovider >/dev/null 2>&1 &
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
