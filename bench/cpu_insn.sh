#!/usr/bin/env bash
# Controller instructions per converged task per host (issue 13), counted by valgrind's callgrind:
# an instruction count does not depend on what else the machine runs, so builds can be compared
# on a loaded machine where wall and even CPU times drift. Only the fixpoint process is counted
# (not the ssh processes it starts, whose handshakes the connection floor pays anyway).
#
# Usage (as root), on the hosts of a run of bench/run.sh kept with KEEP=1 (its trees converged):
#   KEEP=1 N=50 FIRST_RUNS=0 REPS=1 ANSIBLE_REPS=0 COLD_RUNS=0 TWICE=0 bash bench/run.sh
#   SIZES="1 10 50" bash bench/cpu_insn.sh /tmp/fpbench.XXXXXX BIN [BIN...]
# For every size S it runs each BIN once on the first S hosts (`--limit 'all[0:S-1]'`) under
# callgrind and prints the instructions (Ir) of the run, per task per host (whole run, start-up
# included), and between consecutive sizes the marginal instructions per task per host (the
# start-up cost cancels out). The callgrind files stay in WORKDIR/callgrind/ for
# `callgrind_annotate --inclusive=yes`. Every run must converge (changed=0, failed=0).
set -euo pipefail

die() { echo "cpu_insn: $*" >&2; exit 1; }
[ "$#" -ge 2 ] || die "usage: SIZES=\"1 10 50\" cpu_insn.sh WORKDIR BIN [BIN...]"
W=$1
shift
[ -f "$W/inventory.ini" ] && [ -f "$W/ssh_config" ] || die "$W is not a work directory kept by bench/run.sh"
command -v valgrind >/dev/null || die "valgrind is missing"
SIZES=${SIZES:-1 10 50}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PLAYBOOK=${PLAYBOOK:-$REPO/bench/site.yml}
HOSTS=$(awk '/^Host /{print $2}' "$W/ssh_config")
NHOSTS=$(echo "$HOSTS" | wc -w)
for s in $SIZES; do
    [[ "$s" =~ ^[0-9]+$ ]] && [ "$s" -ge 1 ] && [ "$s" -le "$NHOSTS" ] || die "size $s: the work directory has $NHOSTS hosts"
done

PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
for d in "$W"/sshd-*; do
    : >"$d/sshd-insn.log"
    /usr/sbin/sshd -D -f "$d/sshd_config" -E "$d/sshd-insn.log" </dev/null >/dev/null 2>&1 &
    PIDS+=("$!")
    for _ in $(seq 100); do
        grep -q "Server listening on" "$d/sshd-insn.log" 2>/dev/null && break
        sleep 0.05
    done
    grep -q "Server listening on" "$d/sshd-insn.log" || die "sshd in $d did not start"
done
mkdir -p "$W/callgrind"

recap() { # log key: the sum of key= over the PLAY RECAP lines
    awk -v key="$2" '
        /PLAY RECAP/ { sum = 0; seen = 1; next }
        seen && $2 == ":" { for (i = 3; i <= NF; i++) { split($i, kv, "="); if (kv[1] == key) sum += kv[2] } }
        END { print seen ? sum : "?" }' "$1"
}

declare -A IR TASKS
for bin in "$@"; do
    [ -x "$bin" ] || die "$bin is not an executable"
    for s in $SIZES; do
        tag="$(basename "$(dirname "$bin")")-$(basename "$bin")-$s"
        out="$W/callgrind/$tag.out"
        log="$W/callgrind/$tag.log"
        valgrind --tool=callgrind --callgrind-out-file="$out" \
            "$bin" apply -i "$W/inventory.ini" --ssh-config "$W/ssh_config" \
            --limit "all[0:$((s - 1))]" "$PLAYBOOK" >"$log" 2>&1 || die "$bin on $s hosts failed: $log"
        [ "$(recap "$log" changed)" = 0 ] && [ "$(recap "$log" failed)" = 0 ] ||
            die "$bin on $s hosts did not converge: $log"
        ir=$(awk '/^(summary|totals):/ { print $2; exit }' "$out")
        t=$(($(recap "$log" ok) + $(recap "$log" skipped)))
        IR[$bin:$s]=$ir
        TASKS[$bin:$s]=$t
        printf 'cpu_insn: %-40s %3s hosts  %6s host-tasks  %14s Ir  %9.0f Ir per task per host\n' \
            "$bin" "$s" "$t" "$ir" "$(awk -v i="$ir" -v t="$t" 'BEGIN { print i / t }')"
    done
done
echo "cpu_insn: marginal instructions per task per host (between consecutive sizes):"
for bin in "$@"; do
    prev=
    for s in $SIZES; do
        if [ -n "$prev" ]; then
            awk -v a="${IR[$bin:$prev]}" -v b="${IR[$bin:$s]}" -v ta="${TASKS[$bin:$prev]}" \
                -v tb="${TASKS[$bin:$s]}" -v bin="$bin" -v p="$prev" -v s="$s" \
                'BEGIN { printf "cpu_insn:   %-40s %3s -> %3s hosts  %9.0f Ir\n", bin, p, s, (b - a) / (tb - ta) }'
        fi
        prev=$s
    done
done
