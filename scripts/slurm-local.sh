#!/usr/bin/env bash
# slurm-local.sh - a single-node Slurm cluster on this machine (slurmctld and
# slurmd on localhost, auth/none, state and logs under DIR), for testing the
# Slurm sweep against a real scheduler; nothing outside DIR is written.
#
# usage: scripts/slurm-local.sh start DIR   # prints: export SLURM_CONF=DIR/slurm.conf
#        scripts/slurm-local.sh stop DIR
# Exit status: 0 done; 2 when Slurm is not installed or did not come up
# within 30 s (DIR/slurmctld.log and DIR/slurmd.log say why).
set -euo pipefail

die() {
    echo "slurm-local: $*" >&2
    exit 2
}
[ $# -eq 2 ] || die "usage: slurm-local.sh start|stop DIR"
. "$(dirname "$0")/portable.sh"
cmd=$1
dir=$(mkdir -p "$2" && cd "$2" && pwd)

stop() {
    for d in slurmd slurmctld; do
        [ -f "$dir/$d.pid" ] || continue
        pid=$(cat "$dir/$d.pid")
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
        rm -f "$dir/$d.pid"
    done
}

case "$cmd" in
stop) stop; exit 0 ;;
start) ;;
*) die "unknown command '$cmd' (expected start or stop)" ;;
esac
for b in slurmctld slurmd sbatch sinfo; do
    command -v $b >/dev/null 2>&1 || [ -x /usr/sbin/$b ] || {
        is_macos && die "$b is not installed (Homebrew packages no Slurm)"
        die "$b is not installed (Debian: apt-get install slurm-wlm)"
    }
done
# the processes of a job: Linux's /proc where there is one, else process groups
proctrack=pgid
[ -d /proc/self ] && proctrack=linuxproc # portable: the Linux plugin only where /proc is
host=$(hostname -s)
user=$(id -un)
# ports of our own, so a cluster of the machine's (if any) is not disturbed
port=$((20000 + ($$ % 20000)))
mkdir -p "$dir/state" "$dir/spool"
cat >"$dir/slurm.conf" <<EOF
# a single-node test cluster written by scripts/slurm-local.sh
ClusterName=mqtest
SlurmctldHost=$host
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/none
CredType=cred/none
SlurmUser=$user
SlurmdUser=$user
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/$proctrack
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
NodeName=$host CPUs=$(ncpu) State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$dir/slurm.conf
PATH=$PATH:/usr/sbin
slurmctld -f "$SLURM_CONF" || { stop; die "slurmctld did not start (see $dir/slurmctld.log)"; }
slurmd -f "$SLURM_CONF" || { stop; die "slurmd did not start (see $dir/slurmd.log)"; }
for _ in $(seq 60); do
    if sinfo -h -o %t 2>/dev/null | grep -qE '^(idle|mix|alloc)'; then
        echo "export SLURM_CONF=$SLURM_CONF"
        exit 0
    fi
    sleep 0.5
done
stop
die "the node did not come up within 30 s (see $dir/slurmctld.log, $dir/slurmd.log)"
