# Set-up shared by the evaluation scripts (decider_eval.sh, results_table.sh, paper_tables.sh,
# table6.sh); sourced, not run.

# eval_setup [OUT_DIR]: from the repository root, builds teller into $build
# (TELLER_BUILD_DIR, default build) with scripts/setup.sh; sets $out to OUT_DIR, or to a
# temporary folder removed when the script exits, and $start to the time it began (s).
eval_setup() {
  cd "$(dirname "${BASH_SOURCE[0]}")/.."
  build=${TELLER_BUILD_DIR:-build}
  scripts/setup.sh "$build" >/dev/null
  out=${1:-}
  if [ -z "$out" ]; then
    out=$(mktemp -d)
    trap 'rm -rf "$out"' EXIT
  fi
  start=$(date +%s)
}
