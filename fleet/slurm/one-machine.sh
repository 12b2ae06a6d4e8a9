#!/usr/bin/env bash
# A throwaway Slurm on one machine, to try the Slurm recipe before a rack (and what the
# project's own Slurm tests run on): munged, slurmctld and one slurmd per node, every
# node a name of its own on this host (`slurmd -N`, each on its own port), all of it
# in one folder (configuration, state, spool, logs, munge's key and socket).
#
#   sudo bash fleet/slurm/one-machine.sh start /tmp/slurm-try 4   # nodes n1..n4
#   export SLURM_CONF=/tmp/slurm-try/slurm.conf                   # what `start` prints
#   sudo bash fleet/slurm/one-machine.sh stop /tmp/slurm-try      # daemons stopped by pid
#
# Needs root (the daemons run as root: SlurmUser=root), Debian's slurm-wlm and munge
# (`apt-get install slurm-wlm munge`; .ci/slurm-tools.sh does that), and python3 (to
# find free ports). docs/fleet.md, "Try it on one machine", runs the soak array on it.
set -euo pipefail

usage() {
  echo "usage: one-machine.sh start DIR [NODES] | stop DIR" >&2
  exit 3
}

# Stop the daemons started in DIR (newest first), then remove the folder.
stop() {
  local dir=$1 pid
  [ -f "$dir/pids" ] || { echo "one-machine: no cluster in $dir (no pids file)" >&2; exit 3; }
  while read -r pid; do
    kill -TERM "$pid" 2>/dev/null || true
  done < <(tac "$dir/pids")
  for _ in $(seq 1 100); do
    local alive=0
    while read -r pid; do
      kill -0 "$pid" 2>/dev/null && alive=1
    done < "$dir/pids"
    [ "$alive" = 0 ] && break
    sleep 0.2
  done
  while read -r pid; do kill -KILL "$pid" 2>/dev/null || true; done < "$dir/pids"
  rm -rf "$dir"
}

# Start a daemon in the background, its pid recorded for `stop`.
daemon() {
  local dir=$1
  shift
  SLURM_CONF="$dir/slurm.conf" "$@" >> "$dir/log/daemons.out" 2>&1 &
  echo $! >> "$dir/pids"
}

logs_tail() {
  local file
  for file in "$1"/log/*; do
    echo "--- $(basename "$file")"
    tail -n 40 "$file"
  done >&2
}

wait_for() {  # DIR WHAT COMMAND...: poll until COMMAND succeeds (60 s), a daemon dying ends it
  local dir=$1 what=$2 pid
  shift 2
  for _ in $(seq 1 300); do
    "$@" && return 0
    while read -r pid; do
      if ! kill -0 "$pid" 2>/dev/null; then
        echo "one-machine: a daemon exited while waiting for $what" >&2
        logs_tail "$dir"
        exit 1
      fi
    done < "$dir/pids"
    sleep 0.2
  done
  echo "one-machine: $what: not after 60 s" >&2
  logs_tail "$dir"
  exit 1
}

all_idle() {  # DIR NODES...
  local dir=$1
  shift
  local states
  states=$(SLURM_CONF="$dir/slurm.conf" sinfo --noheader --Node --format '%N %t' 2>/dev/null) \
    || return 1
  local node
  for node in "$@"; do
    grep -qx "$node idle" <<<"$states" || return 1
  done
}

start() {
  local dir=$1 count=${2:-4}
  [[ "$count" =~ ^[1-9][0-9]*$ ]] || { echo "one-machine: NODES must be a positive number, got '$count'" >&2; exit 3; }
  [ "$(id -u)" = 0 ] || { echo "one-machine: run it as root (the daemons run as root)" >&2; exit 3; }
  local tool
  for tool in munged slurmctld slurmd sinfo python3; do
    command -v "$tool" >/dev/null 2>&1 \
      || { echo "one-machine: $tool is not installed (apt-get install slurm-wlm munge)" >&2; exit 3; }
  done
  if [ -e "$dir/pids" ]; then
    echo "one-machine: $dir holds a cluster already (stop it first)" >&2
    exit 3
  fi
  mkdir -p "$dir"/{munge,state,spool,log}
  dir=$(cd "$dir" && pwd)
  chmod 755 "$dir"      # munge wants the folders of its socket open to all
  chmod 700 "$dir/munge"
  : > "$dir/pids"
  head -c 1024 /dev/urandom > "$dir/munge/munge.key"
  chmod 400 "$dir/munge/munge.key"

  local host ports cpus i
  host=$(hostname -s)
  cpus=$(nproc)
  # One free port for the controller and one a node.
  read -r -a ports < <(python3 -c '
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))' $((count + 1)))
  local nodes=()
  {
    echo "ClusterName=dsv4try"
    echo "SlurmctldHost=$host"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "SlurmctldPort=${ports[0]}"
    echo "AuthType=auth/munge"
    echo "AuthInfo=socket=$dir/munge/munge.sock"
    echo "CredType=cred/munge"
    echo "StateSaveLocation=$dir/state"
    echo "SlurmdSpoolDir=$dir/spool/%n"
    echo "SlurmctldPidFile=$dir/slurmctld.pid"
    echo "SlurmdPidFile=$dir/slurmd-%n.pid"
    echo "SlurmctldLogFile=$dir/log/slurmctld.log"
    echo "SlurmdLogFile=$dir/log/slurmd-%n.log"
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_CPU"
    echo "ReturnToService=2"
    echo "MpiDefault=none"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "AccountingStorageType=accounting_storage/none"
    echo "SlurmctldDebug=info"
    echo "SlurmdDebug=info"
    echo "KillWait=5"
    echo "InactiveLimit=0"
    for i in $(seq 1 "$count"); do
      echo "NodeName=n$i NodeHostname=$host NodeAddr=127.0.0.1 Port=${ports[$i]} CPUs=$cpus State=UNKNOWN"
    done
    echo "PartitionName=try Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
  } > "$dir/slurm.conf"
  for i in $(seq 1 "$count"); do nodes+=("n$i"); done

  daemon "$dir" munged --foreground --force "--socket=$dir/munge/munge.sock" \
    "--key-file=$dir/munge/munge.key" "--log-file=$dir/log/munged.log" \
    "--pid-file=$dir/munge/munged.pid" "--seed-file=$dir/munge/seed"
  wait_for "$dir" "munged's socket" test -S "$dir/munge/munge.sock"
  daemon "$dir" slurmctld -D -c -f "$dir/slurm.conf"
  for i in "${nodes[@]}"; do
    daemon "$dir" slurmd -D -N "$i" -f "$dir/slurm.conf"
  done
  wait_for "$dir" "the nodes to come up idle" all_idle "$dir" "${nodes[@]}"
  echo "one-machine: Slurm up in $dir: nodes ${nodes[*]} (partition try)" >&2
  echo "export SLURM_CONF=$dir/slurm.conf"
}

[ $# -ge 2 ] || usage
case $1 in
  start) [ $# -le 3 ] || usage; start "$2" "${3:-4}" ;;
  stop) [ $# -eq 2 ] || usage; stop "$2" ;;
  *) usage ;;
esac
