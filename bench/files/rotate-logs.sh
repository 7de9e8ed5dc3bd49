#!/bin/sh
# Compress shop logs older than a day and drop those older than two weeks.
set -eu
dir="${1:?usage: rotate-logs.sh LOGDIR}"
find "$dir" -name '*.log.*' ! -name '*.gz' -mtime +1 -exec gzip -9 {} +
find "$dir" -name '*.gz' -mtime +14 -delete
