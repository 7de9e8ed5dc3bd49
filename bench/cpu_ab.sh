#!/usr/bin/env bash
# Controller CPU of converged runs, interleaved A/B between fixpoint binaries, next to the CPU of
# the connection floor (one fresh `ssh host true` per host, all at once) in the same rounds: a
# converged run pays one SSH handshake per host as the floor does, so its CPU above the floor's
# is what fixpoint itself costs (issue 13). CPU-seconds (user+sys, `/usr/bin/time`, children
# included) hold up on a shared machine; wall times are printed only as an indication.
#
# Usage (as root), on the hosts of a run of bench/run.sh kept with KEEP=1:
#   KEEP=1 N=50 bash bench/run.sh            # prints "bench: kept /tmp/fpbench.XXXXXX"
#   bash bench/cpu_ab.sh /tmp/fpbench.XXXXXX ROUNDS BIN [BIN...]
# It starts the kept sshd configurations again, runs ROUNDS rounds of (floor, each BIN once),
# prints one line per measurement and the medians, and stops the sshd it started. The hosts'
# CPU (the sshd sessions, the agents and whatever they start) is read from a cgroup-v1 `cpuacct`
# group the sshd are started in, when the machine has one (`/sys/fs/cgroup/cpuacct`).
set -euo pipefail

die() { echo "cpu_ab: $*" >&2; exit 1; }
[ "$#" -ge 3 ] || die "usage: cpu_ab.sh WORKDIR ROUNDS BIN [BIN...]"
W=$1 ROUNDS=$2
shift 2
[ -f "$W/inventory.ini" ] && [ -f "$W/ssh_config" ] || die "$W is not a work directory kept by bench/run.sh"
[[ "$ROUNDS" =~ ^[0-9]+$ ]] && [ "$ROUNDS" -ge 1 ] || die "ROUNDS must be a positive number"
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PLAYBOOK=${PLAYBOOK:-$REPO/bench/site.yml}

PIDS=()
# Everything the hosts' sshd fork stays in this group, so its usage is the hosts' CPU.
CG=/sys/fs/cgroup/cpuacct/fpbench-ab.$$
[ -d /sys/fs/cgroup/cpuacct ] && mkdir "$CG" 2>/dev/null || CG=
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    [ -z "$CG" ] || rmdir "$CG" 2>/dev/null || true
}
trap cleanup EXIT
for d in "$W"/sshd-*; do
    : >"$d/sshd-ab.log"
    # The subshell joins the group before it becomes sshd.
    (
        [ -z "$CG" ] || echo "$BASHPID" >"$CG/cgroup.procs"
        exec /usr/sbin/sshd -D -f "$d/sshd_config" -E "$d/sshd-ab.log" </dev/null >/dev/null 2>&1
    ) &
    PIDS+=("$!")
    for _ in $(seq 100); do
        grep -q "Server listening on" "$d/sshd-ab.log" 2>/dev/null && break
        sleep 0.05
    done
    grep -q "Server listening on" "$d/sshd-ab.log" || die "sshd in $d did not start"
done
HOSTS=$(awk '/^Host /{print $2}' "$W/ssh_config")

floor() {
    for h in $HOSTS; do
        timeout 30 ssh -F "$W/ssh_config" -o ControlMaster=no -o ControlPath=none "$h" true </dev/null &
    done
    wait
}

declare -A CPU HOST
host_ns() { if [ -n "$CG" ]; then cat "$CG/cpuacct.usage"; else echo 0; fi; }
measure() { # label cmd...: append "user+sys" to CPU[label], the hosts' to HOST[label], print
    local label=$1 out h0 h
    shift
    out=$(mktemp)
    h0=$(host_ns)
    /usr/bin/time -f "%U %S %e" -o "$out" "$@" >/dev/null 2>&1 || die "$label failed"
    h=$(awk -v a="$h0" -v b="$(host_ns)" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
    read -r u s e <"$out"
    rm -f "$out"
    CPU[$label]="${CPU[$label]:-} $(awk -v u="$u" -v s="$s" 'BEGIN { printf "%.2f", u + s }')"
    HOST[$label]="${HOST[$label]:-} $h"
    printf 'cpu_ab: %-40s cpu %5.2f s  hosts %s s  (wall %s s)\n' "$label" "$(awk -v u="$u" -v s="$s" 'BEGIN { print u + s }')" "$h" "$e"
}

export -f floor
export W HOSTS
# One unmeasured run of each binary first: a binary new to the hosts ships its agent, and may
# find state of another version's to settle.
for bin in "$@"; do
    timeout 300 "$bin" apply -i "$W/inventory.ini" --ssh-config "$W/ssh_config" "$PLAYBOOK" >/dev/null 2>&1 ||
        die "$bin failed on its unmeasured first run"
done
for _ in $(seq "$ROUNDS"); do
    measure floor bash -c floor
    for bin in "$@"; do
        measure "$bin" timeout 300 "$bin" apply -i "$W/inventory.ini" --ssh-config "$W/ssh_config" "$PLAYBOOK"
    done
done
median() { tr ' ' '\n' | awk 'NF' | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) printf "%.3f", v[(NR + 1) / 2]; else printf "%.3f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "cpu_ab: medians of $ROUNDS rounds, $(echo "$HOSTS" | wc -w) hosts:"
f=$(echo "${CPU[floor]}" | median)
fh=$(echo "${HOST[floor]}" | median)
echo "cpu_ab:   floor $f s (hosts $fh s)"
for bin in "$@"; do
    m=$(echo "${CPU[$bin]}" | median)
    mh=$(echo "${HOST[$bin]}" | median)
    echo "cpu_ab:   $bin $m s, above the floor $(awk -v m="$m" -v f="$f" 'BEGIN { printf "%.3f", m - f }') s; hosts $mh s, above the floor $(awk -v m="$mh" -v f="$fh" 'BEGIN { printf "%.3f", m - f }') s"
done
