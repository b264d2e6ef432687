#!/usr/bin/env bash
# A real Slurm cluster on one host for tests: several simulated nodes (one slurmd each, in its
# own UTS namespace so `hostname` differs), fake GPUs (gres files that are symlinks to /dev/null),
# munge authentication. Debian packages; runs as root; idempotent.
#
#   scripts/slurm-cluster.sh start    install if needed, (re)configure, start, wait until idle
#   scripts/slurm-cluster.sh stop     cancel jobs and stop the daemons this script started
#   scripts/slurm-cluster.sh status   sinfo
#
# Settings (environment): SLURM_CI_NODES (128), SLURM_CI_GPUS (8), SLURM_CI_GPU_TYPE (h100),
# SLURM_CI_CPUS (128), SLURM_CI_MEM_MB (1000000), SLURM_CI_PARTITIONS ("debug gpu batch", the
# first is the default; a partition "short" with MaxTime=00:30:00 is added), SLURM_CI_PORT_BASE (17000). Recipe: reference/ci-oracles.md §1.
set -euo pipefail

NODES="${SLURM_CI_NODES:-128}"
GPUS="${SLURM_CI_GPUS:-8}"
GPU_TYPE="${SLURM_CI_GPU_TYPE:-h100}"
CPUS="${SLURM_CI_CPUS:-128}"
MEM_MB="${SLURM_CI_MEM_MB:-1000000}"
PARTITIONS="${SLURM_CI_PARTITIONS:-debug gpu batch}"
PORT_BASE="${SLURM_CI_PORT_BASE:-17000}"

CONF_DIR=/etc/slurm
STATE=/var/spool/slurm-ci
LOGS=/var/log/slurm-ci
RUN=/run/slurm-ci
GPU_DIR=/var/lib/slurm-ci/gpu
HOSTS_TAG="# slurm-ci"

log() { printf 'slurm-cluster: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

install_packages() {
  if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v sbatch >/dev/null \
     && command -v munged >/dev/null; then
    return
  fi
  [[ "$(id -u)" == 0 ]] || die "installing Slurm needs root"
  log "installing slurmctld slurmd slurm-client munge"
  local policy=/usr/sbin/policy-rc.d added_policy=0
  if [[ ! -e "${policy}" ]]; then  # keep the packages from starting their init scripts
    printf '#!/bin/sh\nexit 101\n' > "${policy}" && chmod +x "${policy}" && added_policy=1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null
  if [[ "${added_policy}" == 1 ]]; then rm -f "${policy}"; fi
}

node_names() { seq -f 'node%g' 1 "${NODES}"; }

write_config() {
  mkdir -p "${CONF_DIR}" "${STATE}/ctld" "${LOGS}" "${RUN}" "${GPU_DIR}"
  local gres_files="" i
  for ((i = 0; i < GPUS; i++)); do
    ln -sfn /dev/null "${GPU_DIR}/nvidia${i}"
  done
  ((GPUS > 0)) && gres_files="${GPU_DIR}/nvidia[0-$((GPUS - 1))]"
  local gres="" gres_type=""
  if ((GPUS > 0)); then
    gres_type="${GPU_TYPE:+${GPU_TYPE}:}"
    gres="Gres=gpu:${gres_type}${GPUS}"
  fi
  {
    cat <<CONF
# Written by gen-launch scripts/slurm-cluster.sh; a test cluster on one host.
ClusterName=ci
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0
ReturnToService=2
SlurmdParameters=config_overrides
KillWait=5
StateSaveLocation=${STATE}/ctld
SlurmdSpoolDir=${STATE}/d/%n
SlurmctldPidFile=${RUN}/slurmctld.pid
SlurmdPidFile=${RUN}/slurmd.%n.pid
SlurmctldLogFile=${LOGS}/slurmctld.log
SlurmdLogFile=${LOGS}/slurmd.%n.log
GresTypes=gpu
CONF
    local n=1 name
    for name in $(node_names); do
      echo "NodeName=${name} NodeHostname=${name} NodeAddr=127.0.0.1 Port=$((PORT_BASE + n)) CPUs=${CPUS} Sockets=2 CoresPerSocket=$((CPUS / 2)) ThreadsPerCore=1 RealMemory=${MEM_MB} ${gres} State=UNKNOWN"
      n=$((n + 1))
    done
    local first=1 partition
    for partition in ${PARTITIONS}; do
      echo "PartitionName=${partition} Nodes=ALL Default=$([[ ${first} == 1 ]] && echo YES || echo NO) MaxTime=INFINITE State=UP"
      first=0
    done
    # a partition with a maximum time limit (the tests of slurm.max_time, GL314)
    echo "PartitionName=short Nodes=ALL Default=NO MaxTime=00:30:00 State=UP"
  } > "${CONF_DIR}/slurm.conf.new"
  {
    echo "AutoDetect=off"
    if ((GPUS > 0)); then
      echo "NodeName=node[1-${NODES}] Name=gpu${GPU_TYPE:+ Type=${GPU_TYPE}} File=${gres_files}"
    fi
  } > "${CONF_DIR}/gres.conf"
}

write_hosts() {
  # /etc/hosts may be a bind mount: rewrite it in place, never replace the file.
  local line
  line="127.0.0.1 $(node_names | tr '\n' ' ')${HOSTS_TAG}"
  if ! grep -qxF "${line}" /etc/hosts; then
    local kept
    kept="$(grep -vF "${HOSTS_TAG}" /etc/hosts || true)"
    printf '%s\n%s\n' "${kept}" "${line}" > /etc/hosts
  fi
}

start_munge() {
  mkdir -p /run/munge /var/log/munge /var/lib/munge /etc/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge
  if [[ ! -s /etc/munge/munge.key ]]; then
    mungekey --create --keyfile=/etc/munge/munge.key 2>/dev/null \
      || dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
    chown munge:munge /etc/munge/munge.key
    chmod 400 /etc/munge/munge.key
  fi
  if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    runuser -u munge -- /usr/sbin/munged
    local i
    for ((i = 0; i < 50; i++)); do
      munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && return
      sleep 0.1
    done
    die "munged did not start"
  fi
}

pid_alive() { [[ -s "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

all_idle() {
  local states
  states="$(sinfo -h -N -o '%t' 2>/dev/null | sort -u | tr '\n' ' ')"
  [[ "${states}" == "idle " ]] && [[ "$(sinfo -h -N -o '%N' 2>/dev/null | sort -u | wc -l)" == "${NODES}" ]]
}

stop_daemons() {
  scancel --quiet --full "--user=$(id -un)" 2>/dev/null || true
  local pidfile pids=()
  for pidfile in "${RUN}"/slurmd.*.pid "${RUN}"/slurmctld.pid; do
    [[ -s "${pidfile}" ]] && pids+=("$(cat "${pidfile}")")
  done
  if ((${#pids[@]})); then
    kill "${pids[@]}" 2>/dev/null || true
    local i
    for ((i = 0; i < 50; i++)); do
      kill -0 "${pids[@]}" 2>/dev/null || break
      sleep 0.1
    done
    kill -9 "${pids[@]}" 2>/dev/null || true
  fi
  rm -f "${RUN}"/*.pid
}

start() {
  install_packages
  write_config
  write_hosts
  start_munge
  if cmp -s "${CONF_DIR}/slurm.conf.new" "${CONF_DIR}/slurm.conf" && pid_alive "${RUN}/slurmctld.pid" \
     && all_idle; then
    rm -f "${CONF_DIR}/slurm.conf.new"
    log "already up: ${NODES} nodes idle"
    return
  fi
  stop_daemons
  mv "${CONF_DIR}/slurm.conf.new" "${CONF_DIR}/slurm.conf"
  rm -rf "${STATE:?}/ctld" "${STATE:?}/d"
  mkdir -p "${STATE}/ctld"
  slurmctld
  local i
  for ((i = 0; i < 100; i++)); do
    scontrol ping 2>/dev/null | grep -q "is UP" && break
    sleep 0.1
  done
  scontrol ping | grep -q "is UP" || die "slurmctld did not come up (see ${LOGS}/slurmctld.log)"
  local name
  for name in $(node_names); do
    mkdir -p "${STATE}/d/${name}"
    unshare --uts sh -c "hostname ${name} && exec slurmd -N ${name}"
  done
  for ((i = 0; i < 600; i++)); do
    all_idle && break
    if ((i % 20 == 19)) && sinfo -h -N -o '%t' | grep -qE 'drain|drng|inval|down'; then
      scontrol update "nodename=node[1-${NODES}]" state=resume 2>/dev/null || true
    fi
    sleep 0.1
  done
  all_idle || { sinfo -N >&2; die "nodes did not become idle (see ${LOGS})"; }
  log "up: ${NODES} nodes × ${GPUS} GPUs idle, partitions: ${PARTITIONS}"
}

case "${1:-}" in
  start) start ;;
  stop) stop_daemons; log "stopped" ;;
  status) sinfo ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
