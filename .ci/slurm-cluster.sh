#!/usr/bin/env bash
# A one-node SLURM cluster with accounting (Debian 12: SLURM 22.05, MariaDB,
# munge), for CI and for trying the cluster path of the workflow on one
# machine.  Needs root.  No systemd: every daemon is started directly and
# stopped by the PID it recorded.
#
#   .ci/slurm-cluster.sh install        # apt-get install the packages (once)
#   .ci/slurm-cluster.sh start          # munged, MariaDB, slurmdbd, slurmctld, slurmd
#   .ci/slurm-cluster.sh status         # which daemons run; sinfo
#   .ci/slurm-cluster.sh stop           # cancel our jobs, stop every daemon started here
#   .ci/slurm-cluster.sh clean          # stop, then remove the state folder and the configuration
#   .ci/slurm-cluster.sh stop-slurmd    # the node fails ...
#   .ci/slurm-cluster.sh start-slurmd   # ... and comes back
#
# The configuration goes where SLURM looks for it by default, /etc/slurm/
# (slurm.conf, gres.conf, slurmdbd.conf; an existing file that this script
# did not write is never touched: start fails instead).  It has to be there:
# the slurm executor's job step (snakemake-executor-plugin-slurm-jobstep)
# removes SLURM_* variables, SLURM_CONF included, before it calls srun inside
# the job.  Everything else lives in $SWGPU_SLURM_DIR (default
# /tmp/swgpu-slurm): MariaDB's data, spool folders, logs and PID files.
#
# The cluster "swgpu":
#   * munged as user munge on the default socket /run/munge (a munged that
#     answers there already is used, and left running);
#   * MariaDB on 127.0.0.1:$SWGPU_SLURM_DB_PORT (default 3307), data in the
#     state folder;
#   * slurmdbd: accounting, so sacct works; account "swgpu" with the calling
#     user in it;
#   * slurmctld and slurmd on this host; select/cons_tres; partitions "cpu"
#     (default) and "gpu", both the one node;
#   * the node declares $SWGPU_SLURM_CPUS CPUs (16), $SWGPU_SLURM_MEM_MB MB
#     (64000) and 2 GPUs of type "fake", whatever the machine has
#     (SlurmdParameters=config_overrides), so that jobs with the sizes of
#     profiles/slurm are scheduled.  Nothing is enforced (no cgroups here:
#     proctrack/linuxproc, task/none).  The GPUs are gres with two stand-in
#     device files (character devices 1:3, like /dev/null; AutoDetect=off):
#     a job given one gets CUDA_VISIBLE_DEVICES from SLURM, finds no usable
#     GPU and, with backend auto, scores on the CPU.
set -euo pipefail

DIR=${SWGPU_SLURM_DIR:-/tmp/swgpu-slurm}
CONF=/etc/slurm
DB_PORT=${SWGPU_SLURM_DB_PORT:-3307}
NODE=$(hostname -s)
CPUS=${SWGPU_SLURM_CPUS:-16}
MEM_MB=${SWGPU_SLURM_MEM_MB:-64000}
GPUS=2
MARK="# Written by swgpu .ci/slurm-cluster.sh"
PACKAGES="slurm-wlm slurmdbd munge mariadb-server"
DAEMONS="slurmd slurmctld slurmdbd mariadb munged"   # stop order

log() { echo "slurm-cluster: $*" >&2; }
die() { log "error: $*"; exit 1; }

pid_alive() {  # pid_alive NAME: the PID recorded for NAME runs
    local f="$DIR/run/$1.pid"
    [[ -s $f ]] && kill -0 "$(cat "$f")" 2>/dev/null
}

wait_for() {  # wait_for SECONDS WHAT COMMAND...: retry COMMAND until it succeeds
    local t=$1 what=$2
    shift 2
    local end=$((SECONDS + t))
    until "$@" >/dev/null 2>&1; do
        if ((SECONDS >= end)); then
            log "$what not ready after ${t}s; last lines of the logs:"
            tail -n 20 "$DIR"/log/*.log >&2 || true
            return 1
        fi
        sleep 0.5
    done
}

cmd_install() {
    local missing="" p
    for p in $PACKAGES; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
            missing="$missing $p"
    done
    if [[ -z $missing ]]; then
        log "installed already: $PACKAGES"
        return 0
    fi
    [[ $(id -u) == 0 ]] || die "installing$missing needs root"
    log "apt-get install$missing"
    export DEBIAN_FRONTEND=noninteractive
    # Debian's maintainer scripts would start the daemons as services: forbid
    # that with a policy-rc.d answering 101, unless one is in place already.
    local policy=/usr/sbin/policy-rc.d added=0 aptlog=${TMPDIR:-/tmp}/slurm-apt.log
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy"
        chmod 755 "$policy"
        added=1
    fi
    # shellcheck disable=SC2086
    if ! apt-get install -y -q --no-install-recommends $missing >"$aptlog" 2>&1; then
        # stale package lists: update once and try again
        apt-get update -q >>"$aptlog" 2>&1 || true
        if ! apt-get install -y -q --no-install-recommends $missing >>"$aptlog" 2>&1; then
            tail -n 30 "$aptlog" >&2
            ((added)) && rm -f "$policy"
            die "apt-get install$missing failed (log: $aptlog)"
        fi
    fi
    ((added)) && rm -f "$policy"
    log "installed:$missing"
}

put_conf() {  # put_conf NAME MODE: stdin -> $CONF/NAME, unless a foreign file is there
    local f="$CONF/$1"
    if [[ -e $f ]] && ! grep -qF "$MARK" "$f"; then
        die "$f exists and was not written by this script; not touching it"
    fi
    { echo "$MARK (state folder $DIR)"; cat; } >"$f.tmp"
    chmod "$2" "$f.tmp"
    mv "$f.tmp" "$f"
}

write_configs() {
    mkdir -p "$CONF" "$DIR"/{run,log,spool/ctld,spool/d,munge,mysql,mysqld,dev}
    chown munge:munge "$DIR/munge"
    chmod 700 "$DIR/munge"
    local user i
    user=$(id -un)
    # Two stand-in GPU device files: slurmd wants character devices; nothing
    # opens them (1:3 are /dev/null's numbers).
    for i in 0 1; do
        [[ -c $DIR/dev/fakegpu$i ]] || { rm -f "$DIR/dev/fakegpu$i"; mknod "$DIR/dev/fakegpu$i" c 1 3; }
    done

    put_conf slurm.conf 644 <<EOF
ClusterName=swgpu
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=$user
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$DIR/spool/ctld
SlurmdSpoolDir=$DIR/spool/d
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=10
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStorageTRES=gres/gpu,gres/gpu:fake
AccountingStoreFlags=job_comment
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1000
GresTypes=gpu
SlurmdParameters=config_overrides
ReturnToService=2
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=300
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM_MB Gres=gpu:fake:$GPUS State=UNKNOWN
PartitionName=cpu Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=$NODE MaxTime=INFINITE State=UP
EOF
    put_conf gres.conf 644 <<EOF
AutoDetect=off
NodeName=$NODE Name=gpu Type=fake File=$DIR/dev/fakegpu[0-1]
EOF
    put_conf slurmdbd.conf 600 <<EOF
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
SlurmUser=$user
PidFile=$DIR/run/slurmdbd.pid
LogFile=$DIR/log/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=swgpu-ci
StorageLoc=slurm_acct_db
EOF
}

start_munged() {
    pid_alive munged && return 0
    if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
        log "a munged answers on /run/munge already: using it"
        return 0
    fi
    [[ -s /etc/munge/munge.key ]] || die "/etc/munge/munge.key is missing (the munge package makes it)"
    mkdir -p /run/munge
    chown munge:munge /run/munge
    chmod 755 /run/munge
    runuser -u munge -- /usr/sbin/munged --force --num-threads=10 \
        --pid-file="$DIR/munge/munged.pid" \
        --log-file="$DIR/munge/munged.log" --seed-file="$DIR/munge/munged.seed"
    wait_for 20 munged test -s "$DIR/munge/munged.pid"
    cp "$DIR/munge/munged.pid" "$DIR/run/munged.pid"
    wait_for 20 "munge socket" sh -c "munge -n | unmunge"
}

start_mariadb() {
    pid_alive mariadb && return 0
    # MariaDB runs as user mysql: data, socket, PID file and log in folders of its own
    chown mysql:mysql "$DIR/mysql" "$DIR/mysqld"
    if [[ ! -d $DIR/mysql/mysql ]]; then
        mariadb-install-db --no-defaults --user=mysql --datadir="$DIR/mysql" \
            --auth-root-authentication-method=socket >"$DIR/log/mariadb-install.log" 2>&1 ||
            { tail -n 20 "$DIR/log/mariadb-install.log" >&2; die "mariadb-install-db failed"; }
    fi
    setsid /usr/sbin/mariadbd --no-defaults --user=mysql --datadir="$DIR/mysql" \
        --socket="$DIR/mysqld/mysqld.sock" --pid-file="$DIR/mysqld/mariadb.pid" \
        --port="$DB_PORT" --bind-address=127.0.0.1 --skip-name-resolve \
        --innodb-buffer-pool-size=64M --innodb-lock-wait-timeout=900 \
        --log-error="$DIR/mysqld/mariadb.log" </dev/null >/dev/null 2>&1 &
    wait_for 60 MariaDB mariadb --no-defaults --socket="$DIR/mysqld/mysqld.sock" -u root -e "select 1" ||
        { tail -n 20 "$DIR/mysqld/mariadb.log" >&2; die "MariaDB did not start"; }
    cp "$DIR/mysqld/mariadb.pid" "$DIR/run/mariadb.pid"
    mariadb --no-defaults --socket="$DIR/mysqld/mysqld.sock" -u root <<'EOF'
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'swgpu-ci';
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'swgpu-ci';
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
EOF
}

start_slurmdbd() {
    pid_alive slurmdbd && return 0
    /usr/sbin/slurmdbd || { tail -n 20 "$DIR/log/slurmdbd.log" >&2; die "slurmdbd did not start"; }
    wait_for 60 slurmdbd sacctmgr -n show cluster
}

start_slurmctld() {
    pid_alive slurmctld && return 0
    /usr/sbin/slurmctld || { tail -n 20 "$DIR/log/slurmctld.log" >&2; die "slurmctld did not start"; }
    wait_for 60 slurmctld scontrol ping
}

cmd_start_slurmd() {
    pid_alive slurmd && return 0
    /usr/sbin/slurmd || { tail -n 20 "$DIR/log/slurmd.log" >&2; die "slurmd did not start"; }
    wait_for 60 "the node" sh -c "sinfo -h -N -o '%t' | grep -Eq '^(idle|mix|alloc)'"
}

stop_one() {  # stop_one NAME: SIGTERM the recorded PID, wait up to 30 s, then SIGKILL
    local name=$1 f="$DIR/run/$1.pid" pid i
    [[ -s $f ]] || return 0
    pid=$(cat "$f")
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        for i in $(seq 1 60); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.5
        done
        if kill -0 "$pid" 2>/dev/null; then
            log "$name (PID $pid) did not stop in 30 s: SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    rm -f "$f"
}

cmd_start() {
    command -v slurmctld >/dev/null || die "slurmctld is not installed (run: $0 install)"
    [[ $(id -u) == 0 ]] || die "start needs root"
    local t0=$SECONDS user
    user=$(id -un)
    write_configs
    start_munged
    start_mariadb
    start_slurmdbd
    sacctmgr -i add cluster swgpu >/dev/null 2>&1 || true
    start_slurmctld
    sacctmgr -i add account swgpu Cluster=swgpu Description=swgpu-ci Organization=swgpu >/dev/null 2>&1 || true
    sacctmgr -i add user "$user" Account=swgpu Cluster=swgpu >/dev/null 2>&1 || true
    cmd_start_slurmd
    # a node left down or drained by an earlier run comes back
    scontrol update NodeName="$NODE" State=RESUME >/dev/null 2>&1 || true
    log "started in $((SECONDS - t0)) s (state folder $DIR, configuration $CONF)"
    sinfo -N -o "%N %P %t %c %m %G" >&2
}

cmd_stop() {
    local d i
    if [[ -d $DIR/run ]]; then
        # jobs first, so that no job step outlives slurmd
        if pid_alive slurmctld; then
            scancel -u "$(id -un)" 2>/dev/null || true
            for i in $(seq 1 60); do
                [[ -z $(squeue -h -u "$(id -un)" -o %i 2>/dev/null) ]] && break
                sleep 0.5
            done
        fi
        for d in $DAEMONS; do
            stop_one "$d"
        done
    fi
    if pgrep -x slurmstepd >/dev/null 2>&1; then
        log "warning: slurmstepd processes still run: $(pgrep -x slurmstepd | tr '\n' ' ')"
    fi
    log "stopped"
}

cmd_clean() {
    cmd_stop
    local f
    for f in slurm.conf gres.conf slurmdbd.conf; do
        if [[ -e $CONF/$f ]] && grep -qF "$MARK" "$CONF/$f"; then
            rm -f "$CONF/$f"
        fi
    done
    rm -rf "$DIR"
}

cmd_status() {
    local d
    for d in munged mariadb slurmdbd slurmctld slurmd; do
        if pid_alive "$d"; then
            echo "$d: running (PID $(cat "$DIR/run/$d.pid"))"
        else
            echo "$d: not running"
        fi
    done
    if pid_alive slurmctld; then
        sinfo -N -o "%N %P %t %c %m %G"
    fi
}

case ${1:-} in
    install) cmd_install ;;
    start) cmd_start ;;
    stop) cmd_stop ;;
    clean) cmd_clean ;;
    status) cmd_status ;;
    stop-slurmd) stop_one slurmd ;;
    start-slurmd) cmd_start_slurmd ;;
    *)
        echo "usage: $0 install|start|stop|clean|status|stop-slurmd|start-slurmd" >&2
        exit 2
        ;;
esac
