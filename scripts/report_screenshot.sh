#!/usr/bin/env bash
# The HTML report of the shipped sample and its screenshot for the docs:
#   build/sample_report.html and docs/images/sample_report.png (1366 px wide).
# Usage: scripts/report_screenshot.sh [BUILD_DIR]   (default: build; needs chromium)
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}
teller="$build_dir/teller"
chromium=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
[[ -x "$teller" ]] || { echo "build teller first: ninja -C $build_dir teller" >&2; exit 1; }
[[ -n "$chromium" ]] || { echo "chromium is not installed (apt-get install chromium)" >&2; exit 1; }
report="$build_dir/sample_report.html"
"$teller" diagnose samples/vllm_tp2_sample --html "$report" --color never
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
mkdir -p docs/images
"$chromium" --headless=new --disable-gpu --no-sandbox --no-first-run --hide-scrollbars \
  --user-data-dir="$profile" --screenshot=docs/images/sample_report.png \
  --window-size=1366,1500 "file://$PWD/$report" 2>/dev/null
echo "wrote $report and docs/images/sample_report.png"
