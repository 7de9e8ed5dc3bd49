#!/usr/bin/env bash
# fixpoint over an emulated WAN (issue 13): bench/run.sh with every host behind
# bench/delay_proxy.rs, 1 and then 5 hosts, a 50 ms round trip. Each size prints run.sh's table
# (connection floor through the same proxy, fixpoint cold/warm first run and converged run,
# Ansible from the same run), the time above the floor counted in round trips, and fixpoint's
# round trips per host from its JSON recap. Targets: converged <= floor + 4 RTT, first run <=
# floor + 10 RTT.
#
# Usage (as root, like run.sh; it starts and stops sshd and the proxies itself):
#   bash bench/wan.sh
# Knobs: SIZES="1 5", RTT_MS=50, REPS=3, ANSIBLE_REPS=$REPS (0 leaves Ansible out), and any
# of run.sh's (PYINFRA_REPS=0 is the default here: the issue's WAN table has no pyinfra column).
# Do not measure on a loaded machine: run.sh waits for an idle one before each repetition.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SIZES=${SIZES:-1 5}
RTT_MS=${RTT_MS:-50}
[[ "$RTT_MS" =~ ^[0-9]+$ ]] && [ "$RTT_MS" -ge 2 ] || { echo "wan: RTT_MS must be a number >= 2" >&2; exit 1; }
export DELAY_MS=$((RTT_MS / 2))
export PYINFRA_REPS=${PYINFRA_REPS:-0}
export ROUND_TRIPS=1
first=1
for n in $SIZES; do
    echo "wan: $n host(s), ${RTT_MS} ms round trip" >&2
    # The first size builds fixpoint and the proxy; the others reuse them.
    if [ "$first" = 1 ]; then
        N=$n bash "$REPO/bench/run.sh"
        first=0
    else
        N=$n SKIP_BUILD=1 bash "$REPO/bench/run.sh"
    fi
done
