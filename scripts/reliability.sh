#!/usr/bin/env bash
# Writes docs/reliability.md (issue 8) from what it runs and reads:
#  - the bad-input tests (tests/bad_inputs and the importer/reconstruct tests the table
#    names), run now with ctest: the table with pass/fail;
#  - the big-input memory figures of docs/big_inputs.json (scripts/big_inputs.sh; not rerun);
#  - the fuzzing summary of docs/fuzzing.json (facts of docs/fuzzing.md);
#  - the recording-fault tests (RecordFaults*), run now with ctest.
# Only the text between the reliability markers is replaced.
# Usage: scripts/reliability.sh          Env: TELLER_BUILD_DIR (default build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${TELLER_BUILD_DIR:-build}
if [ ! -f "$build/build.ninja" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
targets=(bad_inputs_test import_test reconstruct_test windowed_build_test)
# The recording-fault tests live in other test binaries (src/record): build those present.
while read -r target; do
  targets+=("$target")
done < <(ninja -C "$build" -t targets all 2>/dev/null | sed -n 's/^\([a-z_]*faults[a-z_]*_test\): .*/\1/p' | grep -v '^cmake_' | sort -u)
echo "reliability: building ${targets[*]}" >&2
cmake --build "$build" --target "${targets[@]}" -j 2 >/dev/null

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Every test the bad-input table names, and the recording-fault tests.
regex=$(python3 scripts/reliability_table.py --regex)
echo "reliability: ctest -R '$regex|^RecordFaults'" >&2
(cd "$build" && ctest -R "$regex|^RecordFaults" --output-junit "$work/junit.xml" \
   --timeout 300 >"$work/ctest.txt" 2>&1) || true
tail -3 "$work/ctest.txt" >&2
status=0
python3 scripts/reliability_table.py --junit "$work/junit.xml" --out docs/reliability.md || status=$?
echo "reliability: wrote docs/reliability.md" >&2
exit $status
