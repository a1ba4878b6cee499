#!/usr/bin/env bash
# Installs the developer tools `make lint` and `make test-chart` use, from the Go module proxy.
set -euo pipefail
gobin=$(go env GOPATH)/bin
if ! [ -x "$gobin/staticcheck" ]; then
  echo "installing staticcheck" >&2
  (cd /tmp && go install honnef.co/go/tools/cmd/staticcheck@v0.8.2)
fi
"$(dirname "$0")/install-helm.sh" >/dev/null
