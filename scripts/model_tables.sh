#!/usr/bin/env bash
# The learned models' own tables in docs/results.md, one sub-section (and one key of
# docs/results.json "model_tables") per PART, so a part can be run again alone:
#   vertical       models/vertical (vertical view) beside the classical comparison methods trained
#                  on the same records (paper Tables 2, 7 and 8 for the vertical view);
#   single-stream  models/default beside the single-stream variant (paper 3.7 ii), trained
#                  on the same train part by `teller paper-tables --methods single_stream` (some
#                  25-40 minutes on 2 cores);
#   sweep          per view, the models of each TPE vocabulary size (paper Table 3;
#                  horizontal: models/vocab-256, models/default (512), models/vocab-1024;
#                  vertical: models/vertical-vocab-256, models/vertical (512),
#                  models/vertical-vocab-1024), where they are trained
#                  (scripts/train_default_model.sh);
#   fresh          the paper preset scaled four times at seed 20261203 (never used to train
#                  or tune): models/default and models/vertical beside every comparison method (not
#                  the single-stream variant) trained on that dataset's own train part.
# Every part but fresh runs `teller paper-tables` on the bundle_disjoint split of the paper preset
# scaled four times (the shipped models' dataset, seed 20260101), generated into a
# temporary folder. scripts/paper_tables.sh calls it.
# Usage: scripts/model_tables.sh [OUT_DIR] [PART...]   (default: a temporary folder, removed;
# every part). TELLER_BUILD_DIR picks the build folder (default: build); TELLER_DATASET
# reuses a dataset folder already generated the same way.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${TELLER_BUILD_DIR:-build}
scripts/setup.sh "$build" >/dev/null
out=${1:-}
[ $# -gt 0 ] && shift
parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(vertical single-stream sweep fresh)
if [ -z "$out" ]; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"
dataset=${TELLER_DATASET:-}
if [ -z "$dataset" ]; then
  dataset=$out/dataset
  rm -rf "$dataset"
  "$build/teller" synth dataset --preset paper --scale 4 -o "$dataset" -q >/dev/null
fi
evaluate() {  # NAME MODEL VIEW METHODS [DATASET]
  rm -f "$out/$1.json" "$out/$1.md"
  [ -f "models/$2/model.json" ] || return 0
  "$build/teller" paper-tables "${5:-$dataset}" --split bundle_disjoint --model "models/$2" --view "$3" \
    --methods "$4" --json "$out/$1.json" --markdown "$out/$1.md" -q >/dev/null
}
# The vertical view's 35.6 K train records make the log comparison methods (Table 2's log-based
# rows, scripts/paper_tables.sh runs them on the horizontal view) take some 20 minutes
# per evaluation here: the classical comparison methods stand beside the vertical model.
classical=kmeans,dbscan,isolation_forest,gmm,svm,random_forest,xgboost
for part in "${parts[@]}"; do
  start=$(date +%s)
  case "$part" in
    vertical) evaluate vertical vertical vertical "$classical" ;;
    single-stream) evaluate single-stream default horizontal single_stream ;;
    sweep)
      for vocab in 256 512 1024; do
        horizontal=vocab-$vocab vertical=vertical-vocab-$vocab
        [ "$vocab" = 512 ] && horizontal=default vertical=vertical
        evaluate "sweep-horizontal-$vocab" "$horizontal" horizontal none
        evaluate "sweep-vertical-$vocab" "$vertical" vertical none
      done ;;
    fresh)
      fresh=$out/fresh-dataset
      rm -rf "$fresh"
      "$build/teller" synth dataset --preset paper --scale 4 --seed 20261203 -o "$fresh" -q \
        >/dev/null
      evaluate fresh-horizontal default horizontal all "$fresh"
      evaluate fresh-vertical vertical vertical "$classical" "$fresh" ;;
    *) echo "model_tables: unknown part $part (vertical, single-stream, sweep, fresh)" >&2; exit 2 ;;
  esac
  python3 scripts/model_tables.py "$part" "$out" "$dataset" "$(( $(date +%s) - start ))"
done
