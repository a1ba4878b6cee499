#!/usr/bin/env bash
# Installs helm, which the chart's tests (make test-chart) run, from the Go module proxy into
# $(go env GOBIN), else $(go env GOPATH)/bin, unless that version is there already. Prints
# the binary's path on stdout. Building it takes about 3 minutes on 2 cores.
set -euo pipefail
version=v3.22.0
gobin=$(go env GOBIN)
gobin=${gobin:-$(go env GOPATH)/bin}
helm=$gobin/helm
# A go-installed helm reports only v3.22 itself; its build info names the module's version.
have() { [ -x "$helm" ] && go version -m "$helm" 2>/dev/null | awk '$1 == "mod" { print $3 }' | grep -qx "$version"; }
if ! have; then
  echo "installing helm $version into $gobin (about 3 minutes on 2 cores)" >&2
  (cd /tmp && GOBIN=$gobin go install "helm.sh/helm/v3/cmd/helm@$version")
  have || { echo "install-helm: $helm is not helm $version after go install" >&2; exit 1; }
fi
echo "$helm"
