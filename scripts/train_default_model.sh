#!/usr/bin/env bash
# Trains the model teller ships (models/default): the paper preset dataset (seed
# 20260101), split bundle_disjoint (whole runs held out: requests of one run share
# engine steps, so a request-level split leaks), horizontal view, seed 1. The injection-disjoint
# model (models/injection-disjoint) is trained the same way on that split, so its
# test mechanisms and engine stay unseen. Usage: scripts/train_default_model.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
data=$(mktemp -d /tmp/teller-paper-XXXXXX)
trap 'rm -rf "$data"' EXIT
"$build/teller" synth dataset --preset paper -o "$data" -q
for split in bundle_disjoint injection_disjoint; do
  out=models/default
  [ "$split" = injection_disjoint ] && out=models/injection-disjoint
  start=$(date +%s)
  "$build/teller" train "$data" --split "$split" -o "$out" --seed 1 --epochs 10
  echo "teller: $split model trained in $(( $(date +%s) - start )) s" >&2
done
