#!/usr/bin/env bash
# Renders the plain manifests in deploy/kubernetes from the chart: gateway.yaml (mode gateway)
# and epp.yaml (mode epp), each the chart's defaults for the release "inferrail" in the
# namespace "inference". With a directory argument it writes there instead (the chart's test
# compares such a fresh render with the committed files). Uses $HELM, else installs helm with
# scripts/install-helm.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/deploy/kubernetes}
helm=${HELM:-$("$root/scripts/install-helm.sh")}
render() {
  local mode=$1 file=$2
  {
    echo "# Rendered by scripts/render-manifests.sh from deploy/helm/inferrail (mode $mode, the"
    echo "# chart's defaults, release inferrail, namespace inference). Do not edit: change the chart"
    echo "# or its values and render again; a test fails while this file differs from a fresh render."
    "$helm" template inferrail "$root/deploy/helm/inferrail" --namespace inference --set "mode=$mode"
  } >"$out/$file.tmp"
  mv "$out/$file.tmp" "$out/$file"
}
mkdir -p "$out"
render gateway gateway.yaml
render epp epp.yaml
