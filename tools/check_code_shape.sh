#!/usr/bin/env bash
# The shape docs/architecture.md promises, checked by ctest (code_shape): no function in
# src/ over 150 lines unless tools/function_lengths_allow.txt names it with a reason, and
# no file of the thin CLI (src/cli/*.cc) over 300 lines.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 tools/function_lengths_test.py >/dev/null
python3 tools/function_lengths.py src --max 150 --allow tools/function_lengths_allow.txt
status=0
for file in src/cli/*.cc; do
  lines=$(wc -l < "$file")
  if [ "$lines" -gt 300 ]; then
    echo "$file: $lines lines; the CLI is thin (at most 300 lines a file): move the work into a stage" >&2
    status=1
  fi
done
exit $status
