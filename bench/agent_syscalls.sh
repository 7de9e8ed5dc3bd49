#!/usr/bin/env bash
# The agent's system calls in one converged run of the reference playbook (issue 13): each BIN
# runs bench/site.yml on one host over the local transport, as the user fpbench (the bench's
# user, whose entry ends /etc/passwd), twice to converge, then a third time under `strace -f`;
# the calls of the fixpoint-agent process (its threads; not the commands it execs, not the
# controller) are counted by name. A count does not depend on what else the machine runs.
#
# Usage (as root; bench/run.sh creates fpbench, or `useradd -m fpbench`):
#   bash bench/agent_syscalls.sh BIN [BIN...]
# FIRST=1 traces the first run instead (on a fresh tree and journal: what a first run writes).
# Each BIN's work directory (/tmp/fp-agent-syscalls.XXXXXX/<n>) keeps its `trace`.
set -euo pipefail

die() { echo "agent_syscalls: $*" >&2; exit 1; }
[ "$#" -ge 1 ] || die "usage: agent_syscalls.sh BIN [BIN...]"
[ "$(id -u)" = 0 ] || die "run as root (it runs fixpoint as fpbench)"
id fpbench >/dev/null 2>&1 || die "the user fpbench is missing (bench/run.sh creates it)"
for tool in strace runuser python3; do command -v "$tool" >/dev/null || die "$tool is missing"; done
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOP=$(mktemp -d /tmp/fp-agent-syscalls.XXXXXX)
chmod 0755 "$TOP"
HOME_FP=$(getent passwd fpbench | cut -d: -f6)

# Count one `strace -f` log: the agent is the process that execs fixpoint-agent-*; its threads
# and children are followed through clone's return values (a child may log before its parent's
# clone returns, hence the loop); a child that execs something else is a command, not counted.
count() {
    python3 - "$1" <<'PY'
import collections, re, sys
line_re = re.compile(r'^(\d+)\s+(?:<\.\.\. (\w+) resumed>|(\w+)\()(.*)$')
lines = []
for line in open(sys.argv[1]):
    m = line_re.match(line)
    if m:
        lines.append((int(m.group(1)), m.group(2), m.group(3) or m.group(2), m.group(4), line))
def is_agent_exec(line):
    return 'fixpoint-agent' in line.split(',')[0]
execs_agent = {p for p, res, name, _, l in lines if name == 'execve' and not res and is_agent_exec(l)}
agent, commands = set(execs_agent), set()
changed = True
while changed:
    changed = False
    for pid, res, name, rest, line in lines:
        if pid not in agent:
            continue
        if name == 'execve' and not res and not is_agent_exec(line) and pid not in execs_agent and pid not in commands:
            commands.add(pid); changed = True
        if name in ('clone', 'clone3', 'fork', 'vfork') and '<unfinished' not in rest:
            r = re.search(r'= (\d+)\s*$', rest)
            if r and int(r.group(1)) not in agent:
                agent.add(int(r.group(1))); changed = True
seen_exec = set()
n = collections.Counter()
for pid, res, name, rest, line in lines:
    if name == 'execve' and pid in execs_agent and is_agent_exec(line):
        seen_exec.add(pid)
    # The bootstrap shell's own calls, before it execs the agent in its place, are not the agent's.
    if pid in execs_agent and pid not in seen_exec:
        continue
    if pid in agent and pid not in commands and not res:
        n[name] += 1
keys = ['openat', 'readlink', 'statx', 'newfstatat', 'read', 'umask', 'lseek', 'getdents64', 'brk', 'mremap', 'fsync', 'fdatasync']
print(f"total={sum(n.values())} " + " ".join(f"{k}={n[k]}" for k in keys))
print("  top: " + ", ".join(f"{k} {v}" for k, v in n.most_common(12)))
PY
}

i=0
for bin in "$@"; do
    [ -x "$bin" ] || die "$bin is not an executable"
    i=$((i + 1))
    W="$TOP/$i"
    mkdir -p "$W"
    cp -r "$REPO/bench" "$W/bench"
    cp "$bin" "$W/fixpoint"
    mkdir -p "$W/state" "$W/cache"
    printf '[bench]\nh1 ansible_connection=local base=%s/base\n' "$W" >"$W/inventory.ini"
    chown -R fpbench: "$W"
    run() {
        # A journal and an agent cache of its own: `Begin` reads every written-file record.
        (cd "$W" && runuser -u fpbench -- env -i HOME="$HOME_FP" USER=fpbench \
            XDG_STATE_HOME="$W/state" XDG_CACHE_HOME="$W/cache" \
            PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 "$@")
    }
    if [ "${FIRST:-0}" = 1 ]; then
        run strace -f -qq -o "$W/trace" ./fixpoint apply -i inventory.ini bench/site.yml >"$W/run1.log" 2>&1 ||
            die "$bin: the traced first run failed (see $W/run1.log)"
        grep -q "changed=[1-9].*failed=0" "$W/run1.log" || die "$bin: the traced first run changed nothing (see $W/run1.log)"
    else
        for pass in 1 2; do
            run ./fixpoint apply -i inventory.ini bench/site.yml >"$W/run$pass.log" 2>&1 ||
                die "$bin: run $pass failed (see $W/run$pass.log)"
        done
        run strace -f -qq -o "$W/trace" ./fixpoint apply -i inventory.ini bench/site.yml >"$W/run3.log" 2>&1 ||
            die "$bin: the traced run failed (see $W/run3.log)"
        grep -q "changed=0 .*failed=0" "$W/run3.log" || die "$bin: the traced run did not converge (see $W/run3.log)"
    fi
    echo "$bin"
    count "$W/trace"
done
echo "agent_syscalls: traces kept in $TOP"
