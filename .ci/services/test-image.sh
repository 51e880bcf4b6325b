#!/usr/bin/env bash
# Build the local image `dlbs-test:latest` for the container tests, with no registry.
#
# The image holds only a shell, a few coreutils and the shared libraries that the host's
# Python interpreter and the project's venv need (found with ldd). It does not contain
# Python: a container runs the HOST's interpreter and venv, mounted read-only at the same
# paths they have here. The image's PATH starts with the venv's bin folder, so `python`
# inside the container is the venv's interpreter once the two folders are mounted. Labels
# record what to mount:
#   dlbs.venv         the venv folder (mount it read-only at the same path)
#   dlbs.python_home  the interpreter's prefix that the venv points to (same)
#
# Usage: test-image.sh [VENV]   (default: the repository's .venv). Needs a running dockerd.
# Idempotent: an image built from the same venv and the same libraries is kept as it is.
set -euo pipefail

image=dlbs-test:latest
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
venv=$(cd "${1:-${DLBS_TEST_VENV:-$here/../../.venv}}" && pwd)
docker_cli=/usr/bin/docker
[ -x "$docker_cli" ] || docker_cli=$(command -v docker)

[ -x "$venv/bin/python" ] || { echo "test-image.sh: no python in venv $venv" >&2; exit 1; }
interpreter=$(readlink -f "$venv/bin/python")
python_home=$("$venv/bin/python" -c 'import sys; print(sys.base_prefix)')

work=$(mktemp -d /tmp/dlbs-test-image.XXXXXX)
trap 'rm -rf "$work"' EXIT
root=$work/root

# Everything whose libraries the image must carry: the shell and tools tests use, the
# interpreter, and every extension module of the interpreter and the venv.
tools="sh bash cat echo env ls sleep true false id mkdir rm pwd printf head tail kill"

# A quick look first: the same extension modules (path, size, time) and the same host
# library cache as the image was built from mean the same image; only a change runs ldd
# over every module (most of a minute on a loaded machine).
quickprint=$( (echo "$venv $python_home $interpreter $tools"
    stat -c '%n %s %Y' /etc/ld.so.cache 2>/dev/null
    find "$python_home/lib" "$venv/lib" -name '*.so*' -type f -printf '%p %s %T@\n' | sort) |
    sha256sum | cut -c1-16)
if [ "$("$docker_cli" image inspect --format '{{index .Config.Labels "dlbs.quickprint"}}' \
        "$image" 2>/dev/null || true)" = "$quickprint" ]; then
    echo "test-image.sh: $image is up to date (same modules: $quickprint)"
    exit 0
fi
{
    for t in $tools; do type -P "$t"; done
    echo "$interpreter"
    find "$python_home/lib" "$venv/lib" -name '*.so*' -type f
} >"$work/objects"

# Shared libraries outside the mounted trees, as ldd resolves them on this host.
while read -r obj; do
    ldd "$obj" 2>/dev/null || true
done <"$work/objects" |
    awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' |
    grep -v -e "^$venv/" -e "^$python_home/" | sort -u >"$work/libs"

fingerprint=$( (echo "$venv $python_home"; cat "$work/libs"; sort "$work/objects") | sha256sum | cut -c1-16)
current=$("$docker_cli" image inspect --format '{{index .Config.Labels "dlbs.fingerprint"}}' \
    "$image" 2>/dev/null || true)
if [ "$current" = "$fingerprint" ]; then
    # The same libraries: label it with this quick look, so the next one is quick too.
    "$docker_cli" build -q -t "$image" --label "dlbs.quickprint=$quickprint" - >/dev/null \
        <<<"FROM $image" 2>/dev/null || true
    echo "test-image.sh: $image is up to date ($fingerprint)"
    exit 0
fi

# A merged-/usr layout like Debian 12's, so that /lib64/ld-linux-x86-64.so.2 and the
# multiarch folders resolve as on the host.
mkdir -p "$root"/usr/bin "$root"/usr/lib/x86_64-linux-gnu "$root"/usr/lib64 "$root"/etc \
    "$root"/tmp "$root"/root "$root"/workspace
chmod 1777 "$root/tmp"
for d in bin sbin lib lib64; do
    target=usr/$d; [ "$d" = sbin ] && target=usr/bin
    ln -s "$target" "$root/$d"
done
copy_to_real_dir() {  # copy file $1 (dereferenced) into the real folder of its path
    local dir; dir=$(readlink -f "$(dirname "$1")")
    mkdir -p "$root$dir"
    cp -L "$1" "$root$dir/$(basename "$1")"
}
while read -r lib; do copy_to_real_dir "$lib"; done <"$work/libs"
for t in $tools; do copy_to_real_dir "$(type -P "$t")"; done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n' \
    >"$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
cp /etc/ld.so.conf "$root/etc/" 2>/dev/null || true
cp -r /etc/ld.so.conf.d "$root/etc/" 2>/dev/null || true
ldconfig -r "$root" 2>/dev/null || true

tar -C "$root" -c . | "$docker_cli" import \
    --change "ENV PATH=$venv/bin:/usr/local/bin:/usr/bin:/bin" \
    --change "ENV PYTHONDONTWRITEBYTECODE=1" \
    --change "WORKDIR /workspace" \
    --change "LABEL dlbs.venv=$venv" \
    --change "LABEL dlbs.python_home=$python_home" \
    --change "LABEL dlbs.fingerprint=$fingerprint" \
    --change "LABEL dlbs.quickprint=$quickprint" \
    --change 'CMD ["/bin/sh"]' \
    - "$image" >/dev/null

# Prove it: the interpreter and the venv run inside (torch too, when the venv has it).
"$docker_cli" run --rm -v "$venv:$venv:ro" -v "$python_home:$python_home:ro" "$image" \
    python -c 'import sys, importlib.util as u
print("test-image.sh: python", sys.version.split()[0], "torch" if u.find_spec("torch") else "")'
echo "test-image.sh: built $image ($(du -sh "$root" | cut -f1) root filesystem, $fingerprint)"
