#!/usr/bin/env bash
# The Python-module benchmark (issue 16): bench/pymod.yml (20 tasks of modules fixpoint runs as
# Ansible's own Python code, plus one native `file`) on 5 loopback sshd hosts, fixpoint against
# ansible-playbook with pipelining, first and converged runs. It is bench/run.sh with another
# playbook and a shorter plan: one repetition, no cold-cache or --twice runs (the agent is
# shipped by run.sh's unmeasured warm-up), and a short wait for an idle machine.
#
# Usage (as root): bash bench/pymod.sh
# Needs an ansible-core 2.19 installation (fixpoint finds Ansible's module code through the
# ansible-playbook on PATH) and the `ansible` release's collections (community.general,
# ansible.posix): FIXPOINT_ANSIBLE (its bin/, default /var/cache/fixpoint-ci/ansible/bin) and
# FIXPOINT_ANSIBLE_COLLECTIONS (holding ansible_collections/, default
# /var/cache/fixpoint-ci/ansible-collections-12.3.0), as .ci/run makes them. run.sh's knobs
# (N, REPS, ANSIBLE_REPS, SKIP_BUILD, KEEP, IDLE_WAIT...) pass through.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ANSIBLE_BIN=${FIXPOINT_ANSIBLE:-/var/cache/fixpoint-ci/ansible/bin}
COLLECTIONS=${FIXPOINT_ANSIBLE_COLLECTIONS:-/var/cache/fixpoint-ci/ansible-collections-12.3.0}
[ -x "$ANSIBLE_BIN/ansible-playbook" ] || { echo "pymod: $ANSIBLE_BIN/ansible-playbook is missing (set FIXPOINT_ANSIBLE)" >&2; exit 1; }
[ -d "$COLLECTIONS/ansible_collections/community/general" ] || { echo "pymod: no community.general in $COLLECTIONS (set FIXPOINT_ANSIBLE_COLLECTIONS)" >&2; exit 1; }
export PATH="$ANSIBLE_BIN:$PATH"
export ANSIBLE_COLLECTIONS_PATH="$COLLECTIONS"
export ANSIBLE_PLAYBOOK="$ANSIBLE_BIN/ansible-playbook"
export PLAYBOOK="$REPO/bench/pymod.yml"
export REPS=${REPS:-1} ANSIBLE_REPS=${ANSIBLE_REPS:-1} COLD_RUNS=${COLD_RUNS:-0} TWICE=${TWICE:-0}
export IDLE_WAIT=${IDLE_WAIT:-10}
exec bash "$REPO/bench/run.sh"
