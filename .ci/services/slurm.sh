#!/usr/bin/env bash
# Install and start a two-node SLURM cluster on this one machine (Debian 12, run as root).
#
# munged, slurmctld and two slurmd daemons (`slurmd -N node1`, `slurmd -N node2`) that both
# listen on localhost, each on its own port. There is no accounting storage (sacct answers
# nothing), so finished jobs stay visible to `scontrol show job` for MinJobAge seconds.
# Idempotent: running daemons are kept; the script returns once `sinfo` shows both nodes up.
set -euo pipefail

wait_s=${SLURM_WAIT_S:-60}
conf=/etc/slurm/slurm.conf
logdir=/var/log/slurm
nodes="node1 node2"

if ! command -v slurmctld >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq slurm-wlm munge >/dev/null
fi

mkdir -p /etc/slurm "$logdir" /var/spool/slurmctld /run/munge /var/log/munge
host=$(hostname -s)
cpus=$(nproc)
# Each node gets the whole machine's CPUs; config_overrides lets two slurmd share them.
new_conf=$(cat <<CONF
# Written by .ci/services/slurm.sh: a two-node test cluster on one machine.
ClusterName=dlbs
SlurmctldHost=${host}(127.0.0.1)
SlurmUser=root
SlurmctldPort=6817
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd/%n
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd-%n.pid
SlurmctldLogFile=${logdir}/slurmctld.log
SlurmdLogFile=${logdir}/slurmd-%n.log
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SlurmdParameters=config_overrides
ReturnToService=2
# No accounting storage: keep finished jobs in the controller for a day.
MinJobAge=86400
KillWait=2
InactiveLimit=0
NodeName=node1 NodeHostname=localhost NodeAddr=127.0.0.1 Port=6818 CPUs=${cpus} RealMemory=2000 State=UNKNOWN
NodeName=node2 NodeHostname=localhost NodeAddr=127.0.0.1 Port=6819 CPUs=${cpus} RealMemory=2000 State=UNKNOWN
PartitionName=debug Nodes=node1,node2 Default=YES MaxTime=INFINITE State=UP
CONF
)
conf_changed=0
if [ ! -f "$conf" ] || [ "$(cat "$conf")" != "$new_conf" ]; then
    printf '%s\n' "$new_conf" >"$conf.tmp" && mv "$conf.tmp" "$conf"
    conf_changed=1
fi

# munge: the package creates the key; make one if it is missing.
if [ ! -s /etc/munge/munge.key ]; then
    mungekey --create --keyfile=/etc/munge/munge.key
fi
chown -R munge:munge /etc/munge /run/munge /var/log/munge /var/lib/munge 2>/dev/null || true
chmod 0700 /etc/munge && chmod 0600 /etc/munge/munge.key
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    runuser -u munge -- /usr/sbin/munged --force
    for _ in $(seq 1 20); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.5; done
fi

running() {  # is a process with this exact command line alive?
    pgrep -f -x "$1" >/dev/null 2>&1
}
if ! running "slurmctld"; then
    slurmctld
elif [ "$conf_changed" = 1 ]; then
    scontrol reconfigure || true
fi
for n in $nodes; do
    mkdir -p "/var/spool/slurmd/$n"
    running "slurmd -N $n" || slurmd -N "$n"
done

for _ in $(seq 1 "$wait_s"); do
    states=$(sinfo -h -N -o '%N %t' 2>/dev/null | sort -u || true)
    up=0
    for n in $nodes; do
        # A node that is up answers idle, or mix/alloc/comp while jobs run on it.
        echo "$states" | grep -Eq "^$n (idle|mix|alloc|comp)$" && up=$((up + 1))
        # A node the controller marked down (e.g. after a restart) is told to resume.
        if echo "$states" | grep -Eq "^$n (down|drain|drng|fail)[*~#]?$"; then
            scontrol update NodeName="$n" State=RESUME >/dev/null 2>&1 || true
        fi
    done
    if [ "$up" = 2 ]; then
        echo "slurm.sh: cluster up: $(echo "$states" | tr '\n' ' ')"
        exit 0
    fi
    sleep 1
done
echo "slurm.sh: nodes not up within ${wait_s}s: ${states:-no answer from slurmctld}" >&2
tail -n 20 "$logdir/slurmctld.log" "$logdir"/slurmd-*.log >&2 || true
exit 1
