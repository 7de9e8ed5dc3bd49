#!/usr/bin/env bash
# fixpoint benchmark: N loopback sshd hosts, the reference playbook bench/site.yml (86 tasks and
# 2 handlers per host), timed against the connection floor (one fresh `ssh host true` per host,
# all in parallel), and the same playbook and inventory under ansible-playbook when available.
#
# Usage (as root; it starts sshd and logs in as the dedicated user fpbench):
#   bash bench/run.sh
# Environment knobs (all optional):
#   N=5                  hosts (127.0.0.200-249, then 127.0.1.1-200), at most 250
#   CONCURRENCY=         handshakes at once (default fixpoint's: 4 per core, at most 10): fixpoint's
#                        --connect-concurrency, and the floor's `ssh host true` this many at a time
#   MAX_STARTUPS=1000    each sshd's MaxStartups
#   FIRST_RUNS=1         0: repetitions measure the floor and the converged run only
#   PYINFRA_REPS=$ANSIBLE_REPS  repetitions of the pyinfra 3 runs of bench/pyinfra_deploy.py
#                        (0 skips pyinfra); SETUP_PYINFRA=1 installs it into /tmp/fp-pyinfra
#   SUMMARY=             append one line `N floor converged cpu floor_cpu rss_kb fds hwm_kb
#                        concurrency hosts_cpu floor_hosts_cpu` to this file
#   REPS=3               repetitions of every measurement (the table shows medians)
#   ANSIBLE_REPS=$REPS   repetitions of the Ansible runs (0 skips Ansible)
#   ANSIBLE_PLAYBOOK=    path of ansible-playbook (default: PATH, then /tmp/fp-ansible/bin)
#   SETUP_ANSIBLE=1      create /tmp/fp-ansible (python3 -m venv + pip install ansible-core) when
#                        ansible-playbook is not found
#   PORT=2222            sshd port on every host address
#   SKIP_BUILD=0         1: use the existing target/release/fixpoint
#   KEEP=0               1: keep the work directory (keys, configs, logs) after the run
#   IDLE_WAIT=600        before each repetition, wait up to this many seconds for the machine to
#                        be idle (other processes below IDLE_MAX % CPU for 3 s in a row); the
#                        report says when a repetition started on a busy machine
#   IDLE_MAX=10
#   PLAYBOOK=bench/site.yml  the playbook measured (bench/pymod.sh measures bench/pymod.yml)
#   COLD_RUNS=1          0: leave out the cold-agent-cache runs of each repetition
#   TWICE=1              0: leave out the `--twice` convergence proof
#   FP_BIN=              the fixpoint binary measured (default target/release/fixpoint; with it,
#                        the build is skipped), to compare two builds on the same hosts
#   DELAY_MS=            a one-way delay in ms (25: a 50 ms round trip): every host is reached
#                        through bench/delay_proxy.rs (built as a cargo example) on PORT+1, by
#                        the floor, fixpoint, Ansible and pyinfra alike; bench/wan.sh sets it
#   ROUND_TRIPS=         1 (the default with DELAY_MS): two more fixpoint runs with --format json
#                        (first run, converged; not timed) for the round trips per host
#   PERF=0               1: after the measurements, one more converged run (not timed) under
#                        `perf record -g`, kept as $WORK/perf-converged.data (use with KEEP=1)
#
# Everything it starts (sshd, Ansible's ControlPersist masters) is stopped on exit. It only talks
# to 127.0.0.x. Every wait is bounded.
set -euo pipefail

N=${N:-5}
REPS=${REPS:-3}
ANSIBLE_REPS=${ANSIBLE_REPS:-$REPS}
SETUP_ANSIBLE=${SETUP_ANSIBLE:-1}
PORT=${PORT:-2222}
SKIP_BUILD=${SKIP_BUILD:-0}
KEEP=${KEEP:-0}
IDLE_WAIT=${IDLE_WAIT:-600}
IDLE_MAX=${IDLE_MAX:-10}
BENCH_USER=fpbench
FP_TIMEOUT=300       # seconds for one fixpoint run
ANSIBLE_TIMEOUT=1800 # seconds for one ansible-playbook run
SSH_TIMEOUT=30       # seconds for one `ssh host true`

die() { echo "bench: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root (it starts sshd and logs in as $BENCH_USER)"
[[ "$N" =~ ^[0-9]+$ ]] && [ "$N" -ge 1 ] && [ "$N" -le 250 ] || die "N must be 1..250"
[[ "$REPS" =~ ^[0-9]+$ ]] && [ "$REPS" -ge 1 ] && [ "$REPS" -le 20 ] || die "REPS must be 1..20"
[[ "$ANSIBLE_REPS" =~ ^[0-9]+$ ]] && [ "$ANSIBLE_REPS" -le 20 ] || die "ANSIBLE_REPS must be 0..20"

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH="$REPO/bench"
PLAYBOOK=${PLAYBOOK:-$BENCH/site.yml}
COLD_RUNS=${COLD_RUNS:-1}
TWICE=${TWICE:-1}
FP=${FP_BIN:-$REPO/target/release/fixpoint}
[ -z "${FP_BIN:-}" ] || SKIP_BUILD=1
PERF=${PERF:-0}
CONCURRENCY=${CONCURRENCY:-$(( 4 * $(nproc) < 10 ? 4 * $(nproc) : 10 ))} # fixpoint's default
MAX_STARTUPS=${MAX_STARTUPS:-1000}
FIRST_RUNS=${FIRST_RUNS:-1}
PYINFRA_REPS=${PYINFRA_REPS:-$ANSIBLE_REPS}
SETUP_PYINFRA=${SETUP_PYINFRA:-1}
SUMMARY=${SUMMARY:-}
DELAY_MS=${DELAY_MS:-}
[ -z "$DELAY_MS" ] || [[ "$DELAY_MS" =~ ^[0-9]+$ ]] || die "DELAY_MS must be a number of milliseconds"
ROUND_TRIPS=${ROUND_TRIPS:-$([ -n "$DELAY_MS" ] && echo 1 || echo 0)}
PROXY=$REPO/target/release/examples/delay_proxy
# The port clients connect to: sshd's own, or its delaying proxy's.
CONNECT_PORT=$PORT
[ -z "$DELAY_MS" ] || CONNECT_PORT=$((PORT + 1))

for tool in /usr/sbin/sshd ssh ssh-keygen timeout /usr/bin/time awk; do
    command -v "$tool" >/dev/null || die "$tool is missing (openssh-server / openssh-client / coreutils)"
done

# ---- build ----------------------------------------------------------------------------------------
# The commit the measured binary is built from (with SKIP_BUILD=1: the tree as it is now).
COMMIT=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -z "$(git -C "$REPO" status --porcelain -- src modules Cargo.toml Cargo.lock 2>/dev/null)" ] || COMMIT="$COMMIT+uncommitted"
if [ "$SKIP_BUILD" != 1 ]; then
    echo "bench: cargo build --release" >&2
    (cd "$REPO" && cargo build --release --quiet) || die "cargo build --release failed"
fi
if [ -n "$DELAY_MS" ] && { [ "$SKIP_BUILD" != 1 ] || [ ! -x "$PROXY" ]; }; then
    (cd "$REPO" && cargo build --release --quiet --example delay_proxy) || die "building bench/delay_proxy.rs failed"
fi
[ -x "$FP" ] || die "$FP is missing (build it, or unset SKIP_BUILD)"

# ---- the benchmark user -------------------------------------------------------------------------
# Not root: root's ~/.bashrc here runs `pyenv init` on every ssh command (~0.12 s each).
if ! id "$BENCH_USER" >/dev/null 2>&1; then
    useradd -m -s /bin/bash "$BENCH_USER"
fi
usermod -p '*' "$BENCH_USER" # unlocked (`!` makes sshd without PAM refuse key logins)
BENCH_HOME=$(getent passwd "$BENCH_USER" | cut -d: -f6)
[ -d "$BENCH_HOME" ] || die "home of $BENCH_USER ($BENCH_HOME) is missing"
HOSTS_ROOT="$BENCH_HOME/fpbench-hosts"
install -d -o "$BENCH_USER" -g "$BENCH_USER" -m 0755 "$HOSTS_ROOT"

# ---- Ansible (optional) ---------------------------------------------------------------------------
ANSIBLE=${ANSIBLE_PLAYBOOK:-}
if [ -z "$ANSIBLE" ] && [ "$ANSIBLE_REPS" -gt 0 ]; then
    if command -v ansible-playbook >/dev/null; then
        ANSIBLE=$(command -v ansible-playbook)
    elif [ -x /tmp/fp-ansible/bin/ansible-playbook ]; then
        ANSIBLE=/tmp/fp-ansible/bin/ansible-playbook
    elif [ "$SETUP_ANSIBLE" = 1 ]; then
        echo "bench: installing ansible-core into /tmp/fp-ansible" >&2
        if timeout 600 python3 -m venv /tmp/fp-ansible &&
            timeout 600 /tmp/fp-ansible/bin/pip install -q ansible-core; then
            ANSIBLE=/tmp/fp-ansible/bin/ansible-playbook
        else
            echo "bench: could not install ansible-core; Ansible is left out" >&2
        fi
    fi
fi
[ "$ANSIBLE_REPS" -gt 0 ] || ANSIBLE=

# ---- pyinfra 3 (optional) -------------------------------------------------------------------------
PYINFRA=
if [ "$PYINFRA_REPS" -gt 0 ]; then
    if [ -x /tmp/fp-pyinfra/bin/pyinfra ]; then
        PYINFRA=/tmp/fp-pyinfra/bin/pyinfra
    elif [ "$SETUP_PYINFRA" = 1 ]; then
        echo "bench: installing pyinfra 3 into /tmp/fp-pyinfra" >&2
        if timeout 600 python3 -m venv /tmp/fp-pyinfra &&
            timeout 600 /tmp/fp-pyinfra/bin/pip install -q 'pyinfra>=3,<4'; then
            PYINFRA=/tmp/fp-pyinfra/bin/pyinfra
        else
            echo "bench: could not install pyinfra; it is left out" >&2
        fi
    fi
fi

# ---- work directory, keys, sshd -------------------------------------------------------------------
WORK=$(mktemp -d /tmp/fpbench.XXXXXX)
chmod 755 "$WORK" # sshd reads authorized_keys as $BENCH_USER
# fixpoint's controller cache (XDG_CACHE_HOME), the bench's own: the user's stays untouched.
FP_CACHE=$WORK/controller-cache
SSHD_PIDS=()
# The hosts' own CPU: every sshd runs in a CPU-accounting cgroup of its own, so its sessions and
# the agents they start are counted apart from the controller (these "hosts" share the
# controller's cores; on real hosts that work runs on their CPUs), whatever else the machine runs.
HOST_CG=
for cg in /sys/fs/cgroup/cpuacct /sys/fs/cgroup/unified /sys/fs/cgroup; do
    if [ -f "$cg/cpuacct.usage" ] || [ -f "$cg/cgroup.controllers" ]; then
        if mkdir "$cg/fpbench-$$" 2>/dev/null; then HOST_CG=$cg/fpbench-$$; break; fi
    fi
done
# Nanoseconds of CPU the hosts' processes used so far ("-" without a cgroup).
host_cpu_ns() {
    if [ -z "$HOST_CG" ]; then echo -
    elif [ -f "$HOST_CG/cpuacct.usage" ]; then cat "$HOST_CG/cpuacct.usage"
    else awk '$1 == "usage_usec" { print $2 * 1000 }' "$HOST_CG/cpu.stat"; fi
}
host_cpu_since() { # start_ns: seconds of hosts' CPU since then ("-" without a cgroup)
    local now_ns
    now_ns=$(host_cpu_ns)
    [ "$1" != - ] && [ "$now_ns" != - ] || { echo -; return; }
    awk -v a="$1" -v b="$now_ns" 'BEGIN { printf "%.2f", (b - a) / 1e9 }'
}
PROXY_PIDS=()
cleanup() {
    local rc=$?
    set +e
    for pid in "${PROXY_PIDS[@]}"; do
        kill "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    # Ansible's ControlPersist masters (one per host), then the sshd listeners.
    for sock in "$WORK"/ansible-cp/*; do
        [ -S "$sock" ] && timeout 5 ssh -o ControlPath="$sock" -O exit dummy >/dev/null 2>&1
    done
    for pid in "${SSHD_PIDS[@]}"; do
        kill "$pid" 2>/dev/null
    done
    for pid in "${SSHD_PIDS[@]}"; do
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    [ -z "$HOST_CG" ] || rmdir "$HOST_CG" 2>/dev/null
    [ -z "${TRASH:-}" ] || rm -rf "$TRASH"
    if [ "$KEEP" = 1 ]; then
        echo "bench: kept $WORK" >&2
    else
        rm -rf "$WORK"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p /run/sshd && chmod 755 /run/sshd
mkdir -p "$WORK/logs" "$WORK/ansible-cp" "$WORK/ansible-tmp"
printf '[defaults]\n' >"$WORK/ansible.cfg" # no ansible.cfg from the environment; settings come from env
ssh-keygen -q -t ed25519 -N '' -C fpbench-client -f "$WORK/id_ed25519"
cp "$WORK/id_ed25519.pub" "$WORK/authorized_keys"
chmod 644 "$WORK/authorized_keys"
CFG="$WORK/ssh_config"
KNOWN="$WORK/known_hosts"
INV="$WORK/inventory.ini"
: >"$CFG"
: >"$KNOWN"
HOSTS=()
for i in $(seq "$N"); do
    h="fp$i"
    if [ "$i" -le 50 ]; then addr="127.0.0.$((199 + i))"; else addr="127.0.1.$((i - 50))"; fi
    HOSTS+=("$h")
    d="$WORK/sshd-$h"
    mkdir -p "$d"
    ssh-keygen -q -t ed25519 -N '' -C "fpbench-host-$h" -f "$d/host_ed25519_key"
    cat >"$d/sshd_config" <<EOF
Port $PORT
ListenAddress $addr:$PORT
HostKey $d/host_ed25519_key
AuthorizedKeysFile $WORK/authorized_keys
PidFile $d/sshd.pid
UsePAM no
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
StrictModes no
PermitRootLogin no
AllowUsers $BENCH_USER
Subsystem sftp internal-sftp
LogLevel VERBOSE
MaxSessions 50
MaxStartups $MAX_STARTUPS
PrintMotd no
PrintLastLog no
UseDNS no
EOF
    (
        [ -z "$HOST_CG" ] || echo "$BASHPID" >"$HOST_CG/cgroup.procs"
        exec /usr/sbin/sshd -D -f "$d/sshd_config" -E "$d/sshd.log" </dev/null >/dev/null 2>&1
    ) &
    SSHD_PIDS+=("$!")
    up=0
    for _ in $(seq 100); do
        if grep -q "Server listening on" "$d/sshd.log" 2>/dev/null; then up=1; break; fi
        kill -0 "${SSHD_PIDS[-1]}" 2>/dev/null || break
        sleep 0.05
    done
    [ "$up" = 1 ] || die "sshd for $h on $addr:$PORT did not start; log: $(cat "$d/sshd.log" 2>/dev/null)"
    echo "[$addr]:$PORT $(cut -d' ' -f1,2 "$d/host_ed25519_key.pub")" >>"$KNOWN"
    if [ -n "$DELAY_MS" ]; then
        "$PROXY" "$addr:$CONNECT_PORT" "$addr:$PORT" "$DELAY_MS" 2>>"$d/proxy.log" &
        PROXY_PIDS+=("$!")
        echo "[$addr]:$CONNECT_PORT $(cut -d' ' -f1,2 "$d/host_ed25519_key.pub")" >>"$KNOWN"
    fi
    cat >>"$CFG" <<EOF
Host $h
    HostName $addr
    Port $CONNECT_PORT
    User $BENCH_USER
    IdentityFile $WORK/id_ed25519
    IdentitiesOnly yes
    UserKnownHostsFile $KNOWN
    GlobalKnownHostsFile /dev/null
    StrictHostKeyChecking yes
    UpdateHostKeys no
    CheckHostIP no
    BatchMode yes
    ControlMaster no

EOF
done

# One inventory for both tools. All hosts share this filesystem, so each gets its own tree and
# its own fixpoint state directory (the run lock lives there).
{
    echo "[bench]"
    for h in "${HOSTS[@]}"; do
        echo "$h base=$HOSTS_ROOT/$h/tree fixpoint_state_dir=$HOSTS_ROOT/$h/state"
    done
    echo
    echo "[bench:vars]"
    echo "ansible_python_interpreter=/usr/bin/python3"
    echo "ansible_ssh_common_args=-F $CFG"
} >"$INV"
# The same hosts for pyinfra (its own SSH client, paramiko: the key, known_hosts and strict host
# key checking are given here, as the ssh_config gives them to the other two).
{
    echo "bench = ["
    for i in "${!HOSTS[@]}"; do
        h=${HOSTS[$i]}
        addr=$(awk -v h="$h" '$1 == "Host" { cur = $2 } $1 == "HostName" && cur == h { print $2 }' "$CFG")
        echo "    (\"$h\", {\"ssh_hostname\": \"$addr\", \"ssh_port\": $CONNECT_PORT, \"ssh_user\": \"$BENCH_USER\", \"ssh_key\": \"$WORK/id_ed25519\", \"ssh_known_hosts_file\": \"$KNOWN\", \"ssh_strict_host_key_checking\": \"yes\", \"ssh_allow_agent\": False, \"ssh_look_for_keys\": False, \"base\": \"$HOSTS_ROOT/$h/tree\"}),"
    done
    echo "]"
} >"$WORK/pyinfra_inventory.py"

# ---- helpers --------------------------------------------------------------------------------------
now() { date +%s.%N; }
sub() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
median() { tr ' ' '\n' | awk 'NF' | sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) { print "-"; exit }
    if (NR % 2) printf "%.3f", v[(NR + 1) / 2]; else printf "%.3f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0 && a != "-") printf "%.2f", a / b; else print "-" }'; }
accepted() { grep -c "Accepted publickey" "$WORK/sshd-$1/sshd.log" || true; }

# Connections made during the command run by the caller: "Accepted publickey" per host, as
# "min-max" (or one number when all hosts agree). Call conn_mark before, conn_count after.
declare -A MARK
conn_mark() { for h in "${HOSTS[@]}"; do MARK[$h]=$(accepted "$h"); done; }
conn_count() {
    local lo=999999 hi=0 c
    for h in "${HOSTS[@]}"; do
        c=$(($(accepted "$h") - ${MARK[$h]}))
        [ "$c" -lt "$lo" ] && lo=$c
        [ "$c" -gt "$hi" ] && hi=$c
    done
    if [ "$lo" = "$hi" ]; then echo "$lo"; else echo "$lo-$hi"; fi
}

# CPU busy % of the whole machine over one second, from /proc/stat.
busy_pct() {
    local _c a b c d e f g h t1 i1 t2 i2
    read -r _c a b c d e f g h _ </proc/stat
    t1=$((a + b + c + d + e + f + g + h)) i1=$((d + e))
    sleep 1
    read -r _c a b c d e f g h _ </proc/stat
    t2=$((a + b + c + d + e + f + g + h)) i2=$((d + e))
    echo $((100 * ((t2 - t1) - (i2 - i1)) / (t2 - t1 > 0 ? t2 - t1 : 1)))
}
# Wait (at most IDLE_WAIT s) until the machine has been idle for 3 s in a row: the floor and the
# runs are CPU-bound on 2 cores, so a concurrent build would distort them. Appends to BUSY_NOTES.
BUSY_NOTES=""
wait_idle() {
    local what=$1 quiet=0 waited=0 p=unmeasured
    while [ "$waited" -lt "$IDLE_WAIT" ]; do
        p=$(busy_pct)
        waited=$((waited + 1))
        if [ "$p" -le "$IDLE_MAX" ]; then quiet=$((quiet + 1)); else quiet=0; fi
        [ "$quiet" -ge 3 ] && return 0
        [ $((waited % 30)) = 0 ] && echo "bench: waiting for an idle machine before $what (busy ${p}%)" >&2
    done
    echo "bench: the machine stayed busy (last ${p}%) before $what; measuring anyway" >&2
    BUSY_NOTES="$BUSY_NOTES $what(busy ${p}%)"
}

# A first run is against new hosts: the controller's hints of what they hold (see
# src/engine/actions/held.rs) go with their trees, as a controller that never saw them has none.
# The old trees are moved aside, not deleted, and deleted at exit: on an ext4 without a journal
# (this VM's root), creating a file skips every inode freed in the last minute (more while its
# inode-table block is dirty), reading each one's inode-table block, so deleting the previous
# run's ~2,000 inodes just before a first run made each file that run created scan past them
# (0.42 of the agents' 0.76 CPU-s on 5 hosts). A new host has no such deletions behind it.
TRASH="$BENCH_HOME/fpbench-trash.$$"
clean_trees() {
    rm -rf "${FP_CACHE:?}/fixpoint/controller/held"
    mkdir -p "$TRASH"
    for h in "${HOSTS[@]}"; do
        [ ! -e "${HOSTS_ROOT:?}/$h" ] || mv "$HOSTS_ROOT/$h" "$(mktemp -d "$TRASH/t.XXXXXX")/"
    done
    for h in "${HOSTS[@]}"; do install -d -o "$BENCH_USER" -g "$BENCH_USER" -m 0755 "$HOSTS_ROOT/$h"; done
}
clean_agent_cache() { rm -rf "${BENCH_HOME:?}/.cache/fixpoint"; }

# Sum of changed= / failed= / unreachable= over the PLAY RECAP lines of a log (text output of
# both tools); with --twice only the last recap (pass 2) counts.
recap() {
    awk -v key="$2" '
        /PLAY RECAP/ { sum = 0; seen = 1; next }
        seen && $2 == ":" { for (i = 3; i <= NF; i++) { split($i, kv, "="); if (kv[1] == key) sum += kv[2] } }
        END { print seen ? sum : "?" }' "$1"
}

# floor: every host, one fresh connection (`ssh host true`), CONCURRENCY at a time (fixpoint's
# handshake cap). Prints seconds; appends the CPU (user+sys of the ssh clients) to floor-cpu.txt.
floor_once() {
    local t0 t1 bad=0 h0
    h0=$(host_cpu_ns)
    t0=$(now)
    printf '%s\n' "${HOSTS[@]}" | /usr/bin/time -f "%U %S" -o "$WORK/floor.time" \
        xargs -P "$CONCURRENCY" -I@ timeout "$SSH_TIMEOUT" ssh -F "$CFG" -o ControlMaster=no -o ControlPath=none @ true || bad=1
    t1=$(now)
    [ "$bad" = 0 ] || die "ssh to a host failed (see $WORK/sshd-*/sshd.log)"
    tail -n1 "$WORK/floor.time" | awk '{ printf "%.2f\n", $1 + $2 }' >>"$WORK/floor-cpu.txt"
    host_cpu_since "$h0" >>"$WORK/floor-hostcpu.txt"
    sub "$t0" "$t1"
}

# run LABEL CMD...: time one command; record wall, controller CPU, connections, changed, rc.
# Sets RUN_WALL RUN_CPU RUN_CONN RUN_CHANGED RUN_RC; the output goes to $WORK/logs/LABEL.log.
run_timed() {
    local label=$1 limit=$2
    shift 2
    local log="$WORK/logs/$label.log" t0 t1 h0
    conn_mark
    h0=$(host_cpu_ns)
    t0=$(now)
    set +e
    /usr/bin/time -f "%U %S %M" -o "$WORK/logs/$label.time" timeout "$limit" "$@" >"$log" 2>&1 &
    local tp=$! probe=""
    if [ "${FD_PROBE:-0}" = 1 ]; then
        fd_probe "$tp" >"$WORK/logs/$label.fds" &
        probe=$!
    fi
    wait "$tp"
    RUN_RC=$?
    set -e
    t1=$(now)
    RUN_WALL=$(sub "$t0" "$t1")
    RUN_CPU=$(tail -n1 "$WORK/logs/$label.time" | awk '{ printf "%.2f", $1 + $2 }')
    RUN_RSS=$(tail -n1 "$WORK/logs/$label.time" | awk '{ print $3 }')
    RUN_HOSTCPU=$(host_cpu_since "$h0")
    [ -z "$probe" ] || wait "$probe" # it ends with the run
    RUN_CONN=$(conn_count)
    RUN_CHANGED=$(recap "$log" changed)
    local failed unreach
    failed=$(recap "$log" failed)
    unreach=$(recap "$log" unreachable)
    printf 'bench: %-24s %7.3f s  cpu %5s s  hosts cpu %5s s  rss %6s kB  rc=%s  changed=%s  failed=%s  unreachable=%s  ssh connections/host=%s\n' \
        "$label" "$RUN_WALL" "$RUN_CPU" "$RUN_HOSTCPU" "$RUN_RSS" "$RUN_RC" "$RUN_CHANGED" "$failed" "$unreach" "$RUN_CONN" >&2
    echo "$label wall=$RUN_WALL cpu=$RUN_CPU hostcpu=$RUN_HOSTCPU rss_kb=$RUN_RSS rc=$RUN_RC changed=$RUN_CHANGED failed=$failed unreachable=$unreach conn=$RUN_CONN" >>"$WORK/samples.txt"
}

fp_apply() { run_timed "$1" "$FP_TIMEOUT" env XDG_CACHE_HOME="$FP_CACHE" "$FP" apply -i "$INV" --ssh-config "$CFG" --connect-concurrency "$CONCURRENCY" "${@:2}" "$PLAYBOOK"; }

# The most descriptors the fixpoint process under `/usr/bin/time timeout fixpoint` (pid $1) had
# open, and its peak RSS (VmHWM, kB), polled every 50 ms until it exits: "fds rss_kb".
fd_probe() {
    local tp=$1 fp="" max=0 hwm=0 n
    while kill -0 "$tp" 2>/dev/null; do
        [ -n "$fp" ] || fp=$(pgrep -P "$(pgrep -P "$tp" | head -n1)" 2>/dev/null | head -n1) || true
        if [ -n "$fp" ] && [ -d "/proc/$fp/fd" ]; then
            n=$(find "/proc/$fp/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
            [ "$n" -gt "$max" ] && max=$n
            n=$(awk '/^VmHWM/ { print $2 }' "/proc/$fp/status" 2>/dev/null || echo 0)
            [ "${n:-0}" -gt "$hwm" ] && hwm=$n
        fi
        sleep 0.05
    done
    echo "$max $hwm"
}

ansible_close_masters() {
    local sock
    for sock in "$WORK"/ansible-cp/*; do
        [ -S "$sock" ] && timeout 5 ssh -o ControlPath="$sock" -O exit dummy >/dev/null 2>&1 || true
    done
}
ansible_apply() {
    # Fresh ControlPersist masters for every run: each run pays its own connections.
    ansible_close_masters
    run_timed "$1" "$ANSIBLE_TIMEOUT" env \
        ANSIBLE_PIPELINING=1 \
        ANSIBLE_SSH_ARGS='-o ControlMaster=auto -o ControlPersist=60s' \
        ANSIBLE_SSH_CONTROL_PATH_DIR="$WORK/ansible-cp" \
        ANSIBLE_LOCAL_TEMP="$WORK/ansible-tmp" \
        ANSIBLE_NOCOLOR=1 ANSIBLE_FORCE_COLOR=0 \
        ANSIBLE_RETRY_FILES_ENABLED=0 \
        ANSIBLE_CONFIG="$WORK/ansible.cfg" \
        "$ANSIBLE" -i "$INV" -f "$N" "$PLAYBOOK"
    ansible_close_masters
}

check_run() { # label: the run must have succeeded, and changed nothing if converged
    local label=$1 want_changed=$2
    [ "$RUN_RC" = 0 ] || die "$label exited $RUN_RC; see $WORK/logs/$label.log (KEEP=1 keeps it)"
    if [ "$want_changed" = 0 ] && [ "$RUN_CHANGED" != 0 ]; then
        die "$label did not converge: changed=$RUN_CHANGED; see $WORK/logs/$label.log (KEEP=1 keeps it)"
    fi
}

# ---- measurements ---------------------------------------------------------------------------------
ANSIBLE_VERSION=
[ -z "$ANSIBLE" ] || ANSIBLE_VERSION=$("$ANSIBLE" --version 2>/dev/null | sed -n 1p || true)
TASKS=$("$FP" validate -i "$INV" "$PLAYBOOK" | grep -o '[0-9]* task(s)' | grep -o '[0-9]*')
echo "bench: $N hosts, $TASKS tasks per host, $REPS repetitions, ansible: ${ANSIBLE:-not available}, pyinfra: ${PYINFRA:-not used}" >&2
: >"$WORK/samples.txt"

# Warm-up: the first ssh logins and the first run pay for cold page caches; not measured.
floor_once >/dev/null
clean_trees; clean_agent_cache
FD_PROBE=1 fp_apply warmup; check_run warmup 1
read -r PEAK_FDS PEAK_HWM <"$WORK/logs/warmup.fds" || true
echo "bench: warm-up run: fixpoint held at most ${PEAK_FDS:-?} descriptors, VmHWM ${PEAK_HWM:-?} kB" >&2

FLOOR=() FP_COLD=() FP_CONV=() FP_WARM=() FP_CONN=() FP_CPU_CONV=() FP_CPU_COLD=() FP_RSS=() FP_HOSTCPU_CONV=()
: >"$WORK/floor-cpu.txt"
: >"$WORK/floor-hostcpu.txt"
for r in $(seq "$REPS"); do
    wait_idle "fixpoint-rep-$r"
    for _ in 1 2 3; do FLOOR+=("$(floor_once)"); done
    echo "bench: rep $r floor samples: ${FLOOR[*]: -3}" >&2

    if [ "$COLD_RUNS" = 1 ]; then
        clean_trees; clean_agent_cache
        fp_apply "fixpoint-cold-first-$r"; check_run "fixpoint-cold-first-$r" 1
        FP_COLD+=("$RUN_WALL"); FP_CPU_COLD+=("$RUN_CPU"); FP_CONN+=("$RUN_CONN")
        fp_apply "fixpoint-converged-$r"; check_run "fixpoint-converged-$r" 0
        FP_CONV+=("$RUN_WALL"); FP_CPU_CONV+=("$RUN_CPU"); FP_HOSTCPU_CONV+=("$RUN_HOSTCPU"); FP_CONN+=("$RUN_CONN")
    fi

    if [ "$FIRST_RUNS" = 1 ]; then
        clean_trees
        fp_apply "fixpoint-warm-first-$r"; check_run "fixpoint-warm-first-$r" 1
        FP_WARM+=("$RUN_WALL"); FP_CONN+=("$RUN_CONN")
    fi
    fp_apply "fixpoint-converged-$r-b"; check_run "fixpoint-converged-$r-b" 0
    FP_CONV+=("$RUN_WALL"); FP_CPU_CONV+=("$RUN_CPU"); FP_HOSTCPU_CONV+=("$RUN_HOSTCPU"); FP_CONN+=("$RUN_CONN"); FP_RSS+=("$RUN_RSS")
done

# Convergence proof on a clean tree: --twice exits 3 if the second pass changed anything.
TWICE_RC=- TWICE_CONN=-
if [ "$TWICE" = 1 ]; then
    clean_trees
    fp_apply fixpoint-twice --twice
    TWICE_RC=$RUN_RC TWICE_CONN=$RUN_CONN
    [ "$TWICE_RC" = 0 ] || echo "bench: fixpoint --twice exited $TWICE_RC (see $WORK/logs/fixpoint-twice.log)" >&2
fi

# A profile of the controller in a converged run (issue 13), outside the timed samples.
if [ "$PERF" = 1 ]; then
    command -v perf >/dev/null || die "perf is missing (apt-get install linux-perf)"
    run_timed perf-converged "$FP_TIMEOUT" perf record -q -g -o "$WORK/perf-converged.data" -- \
        env XDG_CACHE_HOME="$FP_CACHE" "$FP" apply -i "$INV" --ssh-config "$CFG" "$PLAYBOOK"
    check_run perf-converged 0
    echo "bench: perf profile in $WORK/perf-converged.data" >&2
fi

# Round trips per host (the JSON recap's `round_trips`), first run on a clean tree and converged.
RT_FIRST=- RT_CONV=-
round_trips_of() { # log: "min-max" (or one number) over the hosts of the last recap
    python3 -c 'import json,sys
r=[json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
t=[e for e in r if e.get("event")=="recap"][-1].get("round_trips",{}).values()
lo,hi=min(t),max(t)
print(lo if lo==hi else "%d-%d"%(lo,hi))' "$1"
}
if [ "$ROUND_TRIPS" = 1 ]; then
    clean_trees
    fp_apply fixpoint-json-first --format json; check_run fixpoint-json-first 1
    RT_FIRST=$(round_trips_of "$WORK/logs/fixpoint-json-first.log")
    fp_apply fixpoint-json-converged --format json
    RT_CONV=$(round_trips_of "$WORK/logs/fixpoint-json-converged.log")
fi

AN_FIRST=() AN_CONV=() AN_CONN=()
if [ -n "$ANSIBLE" ]; then
    echo "bench: $ANSIBLE_VERSION" >&2
    for r in $(seq "$ANSIBLE_REPS"); do
        wait_idle "ansible-rep-$r"
        FLOOR+=("$(floor_once)")
        clean_trees
        ansible_apply "ansible-first-$r"; check_run "ansible-first-$r" 1
        AN_FIRST+=("$RUN_WALL"); AN_CONN+=("$RUN_CONN")
        ansible_apply "ansible-converged-$r"; check_run "ansible-converged-$r" 0
        AN_CONV+=("$RUN_WALL"); AN_CONN+=("$RUN_CONN")
    done
fi

PY_FIRST=() PY_CONV=() PY_CONN=()
if [ -n "$PYINFRA" ]; then
    PYINFRA_VERSION=$("$PYINFRA" --version 2>/dev/null | head -n1)
    echo "bench: $PYINFRA_VERSION" >&2
    for r in $(seq "$PYINFRA_REPS"); do
        wait_idle "pyinfra-rep-$r"
        FLOOR+=("$(floor_once)")
        clean_trees
        for run in first converged; do
            run_timed "pyinfra-$run-$r" "$ANSIBLE_TIMEOUT" env FP_BENCH_DIR="$BENCH" PYINFRA_PROGRESS=off \
                "$PYINFRA" -y --parallel "$N" "$WORK/pyinfra_inventory.py" "$BENCH/pyinfra_deploy.py"
            [ "$RUN_RC" = 0 ] || die "pyinfra-$run-$r exited $RUN_RC; see $WORK/logs/pyinfra-$run-$r.log (KEEP=1 keeps it)"
            if [ "$run" = first ]; then PY_FIRST+=("$RUN_WALL"); else PY_CONV+=("$RUN_WALL"); fi
            PY_CONN+=("$RUN_CONN")
        done
    done
fi

# ---- report ---------------------------------------------------------------------------------------
floor=$(echo "${FLOOR[*]}" | median)
m_cold=$(echo "${FP_COLD[*]}" | median)
m_warm=$(echo "${FP_WARM[*]}" | median)
m_conv=$(echo "${FP_CONV[*]}" | median)
a_first=$(echo "${AN_FIRST[*]:-}" | median)
a_conv=$(echo "${AN_CONV[*]:-}" | median)
p_first=$(echo "${PY_FIRST[*]:-}" | median)
p_conv=$(echo "${PY_CONV[*]:-}" | median)
floor_cpu=$(median <"$WORK/floor-cpu.txt")
conv_cpu=$(echo "${FP_CPU_CONV[*]}" | median)
# Without a cgroup the hosts' CPU is "-": the median of nothing is "-" too.
conv_hostcpu=$(echo "${FP_HOSTCPU_CONV[*]}" | tr ' ' '\n' | grep -v '^-$' | median)
floor_hostcpu=$(grep -v '^-$' "$WORK/floor-hostcpu.txt" | median)
conv_rss=$(echo "${FP_RSS[*]}" | median | cut -d. -f1)
[ -z "$SUMMARY" ] || echo "$N $floor $m_conv $conv_cpu $floor_cpu $conv_rss ${PEAK_FDS:-?} ${PEAK_HWM:-?} $CONCURRENCY $conv_hostcpu $floor_hostcpu" >>"$SUMMARY"
verdict() { awk -v r="$1" -v t="$2" 'BEGIN { if (r == "-") print "-"; else if (r + 0 <= t + 0) print "met (<= " t "x)"; else print "MISSED (> " t "x)" }'; }
conns() { tr ' ' '\n' | awk 'NF' | sort -u | tr '\n' ' ' | sed 's/ $//'; }

{
    echo
    echo "fixpoint benchmark: $N hosts x $TASKS tasks (handlers included), $(nproc) cores, medians of $REPS repetitions ($(date -u +%Y-%m-%dT%H:%M:%SZ))"
    echo "fixpoint $COMMIT, $(ssh -V 2>&1), ${ANSIBLE_VERSION:-no ansible}"
    echo
    printf '%-34s %10s %10s  %-18s %s\n' "measurement" "seconds" "x floor" "target" "samples"
    printf '%-34s %10s %10s  %-18s %s\n' "connection floor (ssh true x$N, ||)" "$floor" "1.00" "" "${FLOOR[*]}"
    r=$(ratio "$m_cold" "$floor"); printf '%-34s %10s %10s  %-18s %s\n' "fixpoint first run, cold cache" "$m_cold" "$r" "$(verdict "$r" 2)" "${FP_COLD[*]}"
    r=$(ratio "$m_warm" "$floor"); printf '%-34s %10s %10s  %-18s %s\n' "fixpoint first run, warm cache" "$m_warm" "$r" "$(verdict "$r" 2)" "${FP_WARM[*]}"
    r=$(ratio "$m_conv" "$floor"); printf '%-34s %10s %10s  %-18s %s\n' "fixpoint converged run" "$m_conv" "$r" "$(verdict "$r" 1.15)" "${FP_CONV[*]}"
    if [ -n "$ANSIBLE" ]; then
        r=$(ratio "$a_first" "$floor"); printf '%-34s %10s %10s  %-18s %s\n' "ansible-playbook first run" "$a_first" "$r" "" "${AN_FIRST[*]}"
        r=$(ratio "$a_conv" "$floor"); printf '%-34s %10s %10s  %-18s %s\n' "ansible-playbook converged run" "$a_conv" "$r" "" "${AN_CONV[*]}"
    else
        echo "ansible-playbook: not available (pip install ansible-core, or SETUP_ANSIBLE=1)"
    fi
    if [ -n "$PYINFRA" ]; then
        r=$(ratio "$p_first" "$floor"); printf '%-34s %10s %10s  %-18s %s\n' "pyinfra first run" "$p_first" "$r" "" "${PY_FIRST[*]}"
        r=$(ratio "$p_conv" "$floor"); printf '%-34s %10s %10s  %-18s %s\n' "pyinfra converged run" "$p_conv" "$r" "" "${PY_CONV[*]}"
    fi
    echo
    [ -z "$ANSIBLE" ] || echo "ansible-playbook / fixpoint: first run $(ratio "$a_first" "$m_warm")x (warm cache) / $(ratio "$a_first" "$m_cold")x (cold cache), converged run $(ratio "$a_conv" "$m_conv")x"
    echo "fixpoint controller CPU (user+sys): converged median $conv_cpu s, cold first median $(echo "${FP_CPU_COLD[*]}" | median) s; floor's ssh clients $floor_cpu s"
    echo "hosts' CPU (their sshd sessions and agents, one cgroup): converged median ${conv_hostcpu} s, floor ${floor_hostcpu} s"
    echo "fixpoint converged run: max RSS $conv_rss kB (/usr/bin/time); warm-up run: at most ${PEAK_FDS:-?} descriptors, VmHWM ${PEAK_HWM:-?} kB; --connect-concurrency $CONCURRENCY"
    [ -z "$PYINFRA" ] || echo "ssh connections per host per run: pyinfra $(echo "${PY_CONN[*]:-}" | conns)"
    echo "ssh connections per host per run: fixpoint $(echo "${FP_CONN[*]}" | conns) (target 1), fixpoint --twice $TWICE_CONN, ansible $(echo "${AN_CONN[*]:-}" | conns)"
    echo "fixpoint --twice on a clean tree: exit $TWICE_RC (target 0)"
    [ "$ROUND_TRIPS" != 1 ] || echo "fixpoint round trips per host (JSON recap): first run $RT_FIRST, converged $RT_CONV"
    if [ -n "$DELAY_MS" ]; then
        rtt=$(awk -v d="$DELAY_MS" 'BEGIN { printf "%.3f", 2 * d / 1000 }')
        over() { awk -v a="$1" -v f="$floor" -v r="$rtt" 'BEGIN { if (a == "-") print "-"; else printf "%.1f", (a - f) / r }'; }
        echo "WAN: round trip $(awk -v r="$rtt" 'BEGIN { print r * 1000 }') ms (delay_proxy, ${DELAY_MS} ms each way); time above the floor, in round trips: converged $(over "$m_conv") (target <= 4), first run warm cache $(over "$m_warm") (target <= 10), cold cache $(over "$m_cold"), ansible converged $(over "$a_conv"), ansible first $(over "$a_first")"
    fi
    echo "repetitions started on a busy machine:${BUSY_NOTES:- none}"
    echo
    echo "command: $FP apply -i <inventory> --ssh-config <ssh_config> $PLAYBOOK"
    [ -z "$PYINFRA" ] || echo "pyinfra: $PYINFRA -y --parallel $N <inventory.py> bench/pyinfra_deploy.py  (${PYINFRA_VERSION:-})"
    [ -z "$ANSIBLE" ] || echo "ansible: ANSIBLE_PIPELINING=1 ANSIBLE_SSH_ARGS='-o ControlMaster=auto -o ControlPersist=60s' $ANSIBLE -i <inventory> -f $N $PLAYBOOK  (ansible_ssh_common_args=-F <ssh_config>)"
} | tee "$WORK/results.txt"
