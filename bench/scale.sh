#!/usr/bin/env bash
# fixpoint scale curve (issue 13): the reference playbook's converged run on 1, 10, 50, 100 and 200
# loopback sshd hosts, against the connection floor at the same handshake concurrency, with the
# controller's CPU, peak RSS and peak open descriptors per size. Each size is one bench/run.sh
# (which starts and stops its sshd instances) with only the floor and the converged run measured.
#
# Usage (as root):
#   bash bench/scale.sh
# Knobs (all optional): SIZES="1 10 50 100 200", REPS=2, CONCURRENCY (default fixpoint's, 4 per
# core and at most 10: the --connect-concurrency given to fixpoint and the floor's parallelism), IDLE_WAIT=20 (seconds to
# wait for an idle machine before each repetition; the report says when it stayed busy),
# FP_BIN / SKIP_BUILD as for run.sh (the release build runs once, before the first size).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SIZES=${SIZES:-1 10 50 100 200}
REPS=${REPS:-2}
CONCURRENCY=${CONCURRENCY:-$(( 4 * $(nproc) < 10 ? 4 * $(nproc) : 10 ))} # fixpoint's default
IDLE_WAIT=${IDLE_WAIT:-20}
[ "$(id -u)" = 0 ] || { echo "scale: run as root (bench/run.sh starts sshd)" >&2; exit 1; }

if [ -z "${FP_BIN:-}" ] && [ "${SKIP_BUILD:-0}" != 1 ]; then
    echo "scale: cargo build --release" >&2
    (cd "$REPO" && cargo build --release --quiet)
fi
FP_BIN=${FP_BIN:-$REPO/target/release/fixpoint}
SUMMARY=$(mktemp /tmp/fpscale.XXXXXX)
trap 'rm -f "$SUMMARY"' EXIT

LOAD=()
for n in $SIZES; do
    echo "scale: $n hosts" >&2
    LOAD+=("$(cut -d' ' -f1 /proc/loadavg)")
    N=$n REPS=$REPS ANSIBLE_REPS=0 PYINFRA_REPS=0 COLD_RUNS=0 TWICE=0 FIRST_RUNS=0 \
        IDLE_WAIT=$IDLE_WAIT CONCURRENCY=$CONCURRENCY FP_BIN=$FP_BIN SUMMARY=$SUMMARY \
        bash "$REPO/bench/run.sh" >&2
done

# One line per size from run.sh: N floor converged cpu floor_cpu rss_kb fds hwm_kb concurrency.
{
    echo
    echo "fixpoint scale curve: bench/site.yml (88 tasks per host), $(nproc) cores, --connect-concurrency $CONCURRENCY, medians of $REPS repetitions ($(date -u +%Y-%m-%dT%H:%M:%SZ))"
    echo "fixpoint $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown), $(ssh -V 2>&1); load average before each size: ${LOAD[*]}"
    echo
    printf '| %5s | %8s | %9s | %6s | %7s | %9s | %15s | %9s | %10s | %15s | %10s | %9s | %8s | %5s |\n' \
        hosts "floor s" "converged" "x floor" "CPU s" "floor CPU" "above/task/host" "hosts CPU" "floor hosts" "hosts/task/host" "RSS MB" "first MB" "per host" "fds"
    printf '| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n'
    while read -r n floor conv cpu fcpu rss fds hwm _ hcpu fhcpu; do
        awk -v n="$n" -v f="$floor" -v c="$conv" -v cpu="$cpu" -v fc="$fcpu" -v rss="$rss" -v fds="$fds" -v hwm="$hwm" \
            -v hc="${hcpu:--}" -v fhc="${fhcpu:--}" 'BEGIN {
            per = (hc == "-" || fhc == "-") ? "-" : sprintf("%.3f ms", (hc - fhc) * 1000 / (n * 88))
            printf "| %5d | %8.3f | %9.3f | %6.2f | %7.2f | %9.2f | %12.3f ms | %9s | %10s | %15s | %10.1f | %9.1f | %5.0f kB | %5s |\n",
                n, f, c, (f > 0 ? c / f : 0), cpu, fc, (cpu - fc) * 1000 / (n * 88), hc, fhc, per, rss / 1024, hwm / 1024, hwm / n, fds }'
    done <"$SUMMARY"
    echo
    echo "converged: fixpoint apply --connect-concurrency $CONCURRENCY on a converged tree; floor: ssh host true for every host, $CONCURRENCY at a time (xargs -P)"
    echo "CPU: user+sys of the command and the processes it waited for (/usr/bin/time); above/task/host = (CPU - floor CPU) / (hosts x 88)"
    echo "hosts CPU: CPU of every bench sshd and what it started (sessions, agents) during the run, one cpuacct cgroup; hosts/task/host = (hosts CPU - floor hosts) / (hosts x 88)"
    echo "RSS MB: max RSS of the converged run (/usr/bin/time: the largest of fixpoint and the ssh clients it waited for);"
    echo "first MB, per host, fds: the fixpoint process alone in the warm-up (first) run: VmHWM, and the most descriptors it held"
}
