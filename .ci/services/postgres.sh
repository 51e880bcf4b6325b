#!/usr/bin/env bash
# Install and start PostgreSQL 15 from Debian's packages (Debian 12, run as root), with a
# database and a user for the shared results store's tests (docs/results.md, docs/team.md).
#
# The cluster is Debian's `15/main` on 127.0.0.1:5432 (the SLURM nodes of slurm.sh run on
# this machine and reach it there). The user `dlbs` owns the database `dlbs`; its password is
# made once, kept in a root-only file and used again, so that the script is idempotent. The
# last line printed is the connection URL, which scripts/test.sh exports as
# DLBS_TEST_POSTGRES_URL. A throw-away test cluster: the password is in the URL it prints.
set -euo pipefail

version=15
cluster=main
port=5432
secret_file=/var/lib/postgresql/dlbs-ci-password

if ! command -v pg_ctlcluster >/dev/null 2>&1 || [ ! -x "/usr/lib/postgresql/$version/bin/postgres" ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "postgresql-$version" >/dev/null
fi
if ! pg_lsclusters -h 2>/dev/null | grep -q "^$version $cluster "; then
    pg_createcluster "$version" "$cluster" --port "$port" >/dev/null
fi
# The concurrent-writer tests and benchmarks open a few dozen connections at once.
conf=/etc/postgresql/$version/$cluster/postgresql.conf
if ! grep -q '^max_connections = 200' "$conf"; then
    sed -i 's/^max_connections = .*/max_connections = 200/' "$conf"
    if pg_lsclusters -h | grep -q "^$version $cluster .* online"; then
        pg_ctlcluster "$version" "$cluster" restart
    fi
fi
if ! pg_lsclusters -h | grep -q "^$version $cluster .* online"; then
    pg_ctlcluster "$version" "$cluster" start
fi
for _ in $(seq 1 30); do
    runuser -u postgres -- pg_isready -q -h 127.0.0.1 -p "$port" && break
    sleep 1
done
runuser -u postgres -- pg_isready -q -h 127.0.0.1 -p "$port" || {
    echo "postgres.sh: the cluster did not accept connections within 30 s" >&2
    tail -n 20 "/var/log/postgresql/postgresql-$version-$cluster.log" >&2 || true
    exit 1
}

if [ ! -s "$secret_file" ]; then
    (umask 077 && head -c 18 /dev/urandom | base64 | tr -d '/+=' >"$secret_file")
fi
password=$(cat "$secret_file")
psql_admin() {
    runuser -u postgres -- psql -X -q -v ON_ERROR_STOP=1 -p "$port" "$@"
}
if [ "$(psql_admin -tAc "SELECT 1 FROM pg_roles WHERE rolname = 'dlbs'")" != 1 ]; then
    psql_admin -c "CREATE ROLE dlbs LOGIN"
fi
# psql's :'var' quoting: the password never appears on a command line.
printf '%s\n' "ALTER ROLE dlbs PASSWORD :'password'" |
    psql_admin -v password="$password" >/dev/null
if [ "$(psql_admin -tAc "SELECT 1 FROM pg_database WHERE datname = 'dlbs'")" != 1 ]; then
    psql_admin -c "CREATE DATABASE dlbs OWNER dlbs"
fi
# Each run of the suite creates a database of its own (CREATEDB) and drops it at its end
# (tests/runs.py: the database `dlbs` is never written by the tests); the credentials
# and read-only tests make roles of their own (CREATEROLE: a password to look for in every
# output, a user who may only read), and drop them after.
psql_admin -c "ALTER ROLE dlbs CREATEDB CREATEROLE" >/dev/null
echo "postgres.sh: PostgreSQL $(runuser -u postgres -- psql -X -tAc 'SHOW server_version' -p "$port") up on 127.0.0.1:$port"
echo "postgresql://dlbs:${password}@127.0.0.1:${port}/dlbs"
