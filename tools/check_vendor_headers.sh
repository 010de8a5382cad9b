#!/usr/bin/env bash
# Vendor headers stay at the edge: each may be included only from its folder(s).
set -u
root=${1:-$(dirname "$0")/..}
cd "$root/src" || exit 1
status=0
check() {  # pattern allowed-regex description
  local pattern=$1 allowed=$2 what=$3
  local hits
  hits=$(grep -rnE "^\s*#\s*include\s*[<\"]($pattern)" --include='*.h' --include='*.cc' --include='*.cpp' . |
         grep -vE "^\./($allowed)" || true)
  if [ -n "$hits" ]; then
    echo "$what may only be included from $allowed:"
    echo "$hits"
    status=1
  fi
}
check 'cuda|cupti|nvtx|nvToolsExt|cuda_runtime' 'capture/' 'CUDA/CUPTI/NVTX headers'
check 'torch/|ATen/|c10/' 'learn/' 'libtorch headers'
check 'simdjson' 'import/kineto' 'simdjson'
check 'sqlite3\.h' 'import/nsys|store/' 'sqlite3.h'
check 'xgboost|opencv' 'comparisons/' 'xgboost/OpenCV headers'
check 'curl/' 'explain/chat_transport_curl' 'libcurl headers'
if [ $status -eq 0 ]; then echo "vendor headers: all in their folders"; fi
exit $status
