#!/usr/bin/env bash
# Installs the Debian packages teller builds with (when missing) and builds it.
# Usage: scripts/setup.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}
packages=(build-essential cmake ninja-build pkg-config libsimdjson-dev libsqlite3-dev sqlite3
          zlib1g-dev libzstd-dev libfmt-dev nlohmann-json3-dev libcli11-dev libgtest-dev
          libgmock-dev libbenchmark-dev python3
          libtorch-dev libopenblas0-pthread  # the learned model: src/learn, docs/learn.md
          libopencv-ml-dev libxgboost-dev  # comparison methods: src/comparisons, docs/comparisons.md
          libcurl4-openssl-dev  # the optional LLM explainer's HTTP client: docs/explain.md
          libssl-dev  # SHA-256 with the CPU's SHA extensions (model files, snapshot keys)
          libopenmpi-dev openmpi-bin  # teller diagnose --distributed: src/fleet, docs/fleet.md
          slurm-wlm munge  # its one-node Slurm cluster (srun --mpi=pmix): tests/fleet/slurm_test.py
          clang libclang-rt-dev  # clang + libFuzzer runtime: scripts/fuzz.sh
          chromium  # the HTML report's browser test: tests/browser, docs/report.md
          python3-torch iproute2)  # real processes with real faults: scripts/real_drill.py
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "teller setup: installing ${missing[*]}" >&2
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi
jobs=$(nproc 2>/dev/null || echo 2)
# Release without debug info: it builds about a third faster on CI's 2 cores; a unity build
# (16 sources a compiler run) builds in less than half the time again. Warnings are errors
# here (so in CI); a hand-configured build keeps them warnings (TELLER_WERROR=OFF). For
# quick rebuilds while editing, configure your own build folder without TELLER_UNITY.
unity=${TELLER_UNITY:-ON}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTELLER_WERROR=ON \
  -DCMAKE_UNITY_BUILD="$unity" -DCMAKE_UNITY_BUILD_BATCH_SIZE=16 >/dev/null
cmake --build "$build_dir" -j "$jobs"
