#!/usr/bin/env bash
# Installs, builds and runs teller's main job on the shipped sample bundle:
# import and reconstruct it, localize abnormal steps and operators against the run's
# own baseline, slice around them, print the diagnosis and write it as JSON, as a
# self-contained HTML report and as a Perfetto/Chrome-trace export with the suspects
# marked (the report links each abnormal step to its window in it).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build >&2
sample=${1:-samples/vllm_tp2_sample}
mkdir -p build/sample-output
build/teller diagnose "$sample" --json build/sample-output/diagnosis.json \
  --html build/sample-output/report.html --perfetto build/sample-output/trace.perfetto.json
