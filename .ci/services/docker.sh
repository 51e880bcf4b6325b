#!/usr/bin/env bash
# Install and start the Docker Engine for the test suite (Debian 12, run as root).
#
# Idempotent: when `docker info` already answers, it only checks and returns. There is no
# systemd on the CI machine, so dockerd runs in the background with its log in
# /var/log/dockerd.log. Returns 0 once the daemon answers, non-zero (with the log's tail)
# when it does not within the wait.
set -euo pipefail

log=/var/log/dockerd.log
wait_s=${DOCKER_WAIT_S:-60}

if ! command -v dockerd >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq docker.io >/dev/null
fi

# The docker.io package installs its client as /usr/bin/docker; prefer it over any other client
# on PATH only for this script's own checks.
docker_cli=/usr/bin/docker
[ -x "$docker_cli" ] || docker_cli=$(command -v docker)

if "$docker_cli" info >/dev/null 2>&1; then
    echo "docker.sh: dockerd already running"
    exit 0
fi

# A stale pid file from a dockerd that died keeps a new one from starting.
if [ -f /var/run/docker.pid ] && ! kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then
    rm -f /var/run/docker.pid
fi

if ! pgrep -x dockerd >/dev/null 2>&1; then
    nohup dockerd >"$log" 2>&1 </dev/null &
fi

for _ in $(seq 1 "$wait_s"); do
    if "$docker_cli" info >/dev/null 2>&1; then
        echo "docker.sh: dockerd is up ($("$docker_cli" version --format '{{.Server.Version}}'))"
        exit 0
    fi
    sleep 1
done
echo "docker.sh: dockerd did not answer within ${wait_s}s; last lines of $log:" >&2
tail -n 30 "$log" >&2 || true
exit 1
