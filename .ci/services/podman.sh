#!/usr/bin/env bash
# Install Podman, serve its Docker-compatible API, and put the test image in its store
# (Debian 12, run as root; after test-image.sh, which builds dlbs-test:latest in Docker).
#
# `podman system service --time=0 unix:///run/podman/podman.sock` runs in the background (log
# in /var/log/podman-service.log): dlbs drives Podman through that socket with the Docker
# SDK (exp.container_engine: podman). The image is copied from Docker's store with
# `docker save | podman load` when Podman lacks it or has an older build (the image's
# dlbs.fingerprint label tells). Idempotent; returns 0 once the socket answers and the image
# is there.
set -euo pipefail

socket=/run/podman/podman.sock
log=/var/log/podman-service.log
image=dlbs-test:latest
wait_s=${PODMAN_WAIT_S:-60}

if ! command -v podman >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq podman >/dev/null
fi

# Containers get Podman's default ulimits (nofile, nproc) unless told otherwise; a machine
# whose root lacks CAP_SYS_RESOURCE (CI's sandbox) cannot raise them, and every container
# fails to start with "error setting rlimit". Give the highest values that this machine
# lets a container set, found by trying (each try is one `podman run` of the test image
# once it is loaded; before that, this machine's own hard limits).
conf=/etc/containers/containers.conf
mkdir -p /etc/containers "$(dirname "$socket")"
write_limits() {  # nofile nproc
    printf '# Written by .ci/services/podman.sh: ulimits this machine lets containers set.\n[containers]\ndefault_ulimits = ["nofile=%s:%s", "nproc=%s:%s"]\n' \
        "$1" "$1" "$2" "$2" >"$conf.tmp" && mv "$conf.tmp" "$conf"
}
[ -f "$conf" ] || write_limits "$(ulimit -Hn)" "$(ulimit -Hu)"

answers() {  # podman as a client of the API: no curl needed
    timeout 10 podman --remote --url "unix://$socket" version >/dev/null 2>&1
}
start_service() {
    if ! answers; then
        rm -f "$socket"
        setsid nohup podman system service --time=0 "unix://$socket" >"$log" 2>&1 </dev/null &
        for _ in $(seq 1 "$wait_s"); do
            answers && return 0
            sleep 1
        done
        echo "podman.sh: the API socket $socket did not answer within ${wait_s}s:" >&2
        tail -n 20 "$log" >&2 || true
        exit 1
    fi
}
start_service

# The test image, from Docker's store (built by test-image.sh).
docker_cli=/usr/bin/docker
[ -x "$docker_cli" ] || docker_cli=$(command -v docker)
wanted=$("$docker_cli" image inspect --format '{{index .Config.Labels "dlbs.fingerprint"}}' \
    "$image")
have=$(podman image inspect --format '{{index .Config.Labels "dlbs.fingerprint"}}' \
    "localhost/$image" 2>/dev/null || true)
if [ "$wanted" != "$have" ]; then
    "$docker_cli" save "$image" | podman load -q >/dev/null
    podman tag "localhost/$image" "localhost/$image" >/dev/null 2>&1 || true
fi

# The ulimits: keep the configured ones if a container starts with them, else step down
# (a container that starts here is also the proof below).
if podman run --rm "localhost/$image" true >/dev/null 2>&1; then
    started=yes
else
    started=no
    hard_n=$(ulimit -Hn)
    for nproc in "$(ulimit -Hu)" 65536 32768 16384 4096; do
        write_limits "$hard_n" "$nproc"
        podman run --rm "localhost/$image" true >/dev/null 2>&1 && break
    done
    # The service reads containers.conf when it starts: restart it with the new limits.
    pid=$(pgrep -f -x "podman system service --time=0 unix://$socket" || true)
    [ -n "$pid" ] && kill "$pid" && sleep 1
    start_service
fi
[ "$started" = yes ] || podman run --rm "localhost/$image" true || {
    echo "podman.sh: a container of $image does not start under Podman" >&2; exit 1; }
echo "podman.sh: Podman $(podman version --format '{{.Server.Version}}' 2>/dev/null ||
    podman --version) serves $socket; $image is in its store"
