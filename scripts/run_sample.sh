#!/usr/bin/env bash
# Installs, builds and runs teller's main job on the shipped sample bundle:
# import and reconstruct it, print the request/step summary and one call-chain tree.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build >&2
sample=${1:-samples/vllm_tp2_sample}
build/teller show "$sample"
