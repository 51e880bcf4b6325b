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

# A pid file left by a dockerd (or its managed containerd) that is gone keeps a new one from
# starting: dockerd refuses ("pid file found") while any process has that pid, and on a fresh
# machine restored from an image the number is often reused by an unrelated process. So a pid
# file counts only when the process behind it runs the program it names.
clear_stale_pid_file() {  # clear_stale_pid_file FILE PROGRAM
    local file=$1 program=$2 pid
    [ -f "$file" ] || return 0
    pid=$(tr -dc '0-9' <"$file" || true)
    if [ -z "$pid" ] || [ "$(cat "/proc/$pid/comm" 2>/dev/null || true)" != "$program" ]; then
        echo "docker.sh: removing stale $file (pid ${pid:-none} is not $program)"
        rm -f "$file"
    fi
}

if ! pgrep -x dockerd >/dev/null 2>&1; then
    clear_stale_pid_file /var/run/docker.pid dockerd
    clear_stale_pid_file /var/run/docker/containerd/containerd.pid containerd
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
