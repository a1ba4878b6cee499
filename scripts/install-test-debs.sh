#!/usr/bin/env bash
# Installs the Debian programs the Go tests drive when they are missing:
# nginx (bench/gwload's baseline proxy) and wrk (the throughput runs), so
# that `make test` runs those tests rather than skipping them.
set -euo pipefail
. "$(dirname "$0")/testlib.sh"
need_debs nginx wrk -- nginx wrk
