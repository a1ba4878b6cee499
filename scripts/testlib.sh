# Shared by the scripts that test the gateway against real programs
# (scrapers-test.sh, observability-test.sh, fleet-page-test.sh). Source it;
# it sets $work (a temporary directory) and removes it, and stops every
# process in $pids, on exit.

# need_debs CMD... -- PKG...: installs Debian's PKGs when a CMD is missing
# (always, given no CMD).
need_debs() {
  local cmds=() missing=
  while [ "$1" != -- ]; do cmds+=("$1"); shift; done
  shift
  [ ${#cmds[@]} = 0 ] && missing=1
  for c in "${cmds[@]}"; do command -v "$c" >/dev/null || missing=1; done
  [ -z "$missing" ] && return 0
  echo "installing $* (Debian packages)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends "$@" >/dev/null ||
    { apt-get update >/dev/null && apt-get install -y --no-install-recommends "$@" >/dev/null; }
}

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_http() { for _ in $(seq 200); do curl -sf -o /dev/null "$1" && return 0; sleep 0.1; done; echo "not up: $1"; return 1; }

# launch BIN ADMIN_PORT FLAGS...: starts `inferrail launch` on loopback
# with its admin port at ADMIN_PORT, and sets $gw to its client URL.
launch() {
  local bin=$1 admin=$2
  shift 2
  "$bin" launch --listen 127.0.0.1:0 --admin-listen "127.0.0.1:$admin" "$@" >"$work/launch.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 200); do grep -q 'gateway on http' "$work/launch.log" && break; sleep 0.05; done
  gw=$(grep -o 'gateway on http://[0-9.:]*' "$work/launch.log" | grep -o 'http://.*')
  wait_http "http://127.0.0.1:$admin/admin/replicas"
}
