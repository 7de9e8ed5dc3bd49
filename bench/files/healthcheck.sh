#!/bin/sh
# Exit 0 when the shop API answers on its health endpoint.
set -eu
port="${SHOP_PORT:-8080}"
exec curl -fsS --max-time 2 "http://127.0.0.1:${port}/healthz" >/dev/null
