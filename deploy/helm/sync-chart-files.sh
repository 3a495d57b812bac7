#!/usr/bin/env bash
# Helm cannot read files outside a chart, so the chart keeps copies of the
# CRD (deploy/crds) and the Grafana dashboards (deploy/grafana/*.json).
# Run this after changing either; tests/deploy/chart.test.mjs fails while the
# copies differ.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CHART="$ROOT/deploy/helm/orca"
mkdir -p "$CHART/crds" "$CHART/dashboards"
cp "$ROOT"/deploy/crds/*.yaml "$CHART/crds/"
rm -f "$CHART"/dashboards/*.json
shopt -s nullglob
for f in "$ROOT"/deploy/grafana/*.json; do cp "$f" "$CHART/dashboards/"; done
echo "synced $(ls "$CHART/crds" | wc -l) CRD(s) and $(ls "$CHART/dashboards" | wc -l) dashboard(s) into $CHART"
