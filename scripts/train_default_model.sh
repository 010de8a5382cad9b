#!/usr/bin/env bash
# Trains the models teller ships, on the paper preset scaled four times (`teller synth
# dataset --preset paper --scale 4`, seed 20260101: 120 runs, so each fault mechanism
# has runs in every part of a run-disjoint split), seed 1, horizontal view, at most 6
# epochs (4 for the one-modality variants; about 3 min per epoch on 2 cores, so 15-20 min for each
# six-epoch model and about an hour for all four; docs/learn.md):
#   models/default            split bundle_disjoint (whole runs held out: requests of
#                             one run share engine steps, so a request-level split leaks)
#   models/injection-disjoint split injection_disjoint (held-out engine and mechanisms)
#   models/trace-only, models/logs-only: the Table 5 variants on bundle_disjoint
#   models/vertical           the vertical view (one record per rank and step; paper
#                             Tables 2, 7, 8), bundle_disjoint; 3 epochs on every abnormal
#                             record and a fifth of the normal ones (--normal-share 0.2),
#                             redrawn each epoch: its 35.6 K records do not fit 30 minutes
#                             otherwise
#   models/vocab-256, models/vocab-1024: the Table 3 sweep beside models/default (512),
#                             bundle_disjoint, the default's settings but the TPE vocabulary;
#   models/vertical-vocab-256, models/vertical-vocab-1024: the same beside models/vertical
#   models/operator-tokens    names spelled as operator tokens (tpe/operator_token.h), trained
#                             on the paper preset and faults injected into the real traces of
#                             ../shared/real-traces (`--preset real`, its own seed) together,
#                             split bundle_disjoint: what `teller diagnose` runs on a trace
#                             whose operator names models/default does not know (docs/learn.md)
# Usage: scripts/train_default_model.sh [BUILD_DIR] [MODEL...]   (default: all ten)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true
wanted=("$@")
[ ${#wanted[@]} -eq 0 ] &&
  wanted=(default injection-disjoint trace-only logs-only vertical vocab-256 vocab-1024
    vertical-vocab-256 vertical-vocab-1024 operator-tokens)
data=$(mktemp -d /tmp/teller-paper-XXXXXX)
trap 'rm -rf "$data"' EXIT
"$build/teller" synth dataset --preset paper --scale 4 -o "$data/paper" -q >/dev/null
traces=${TELLER_REAL_TRACES:-../shared/real-traces}
for name in "${wanted[@]}"; do
  dataset=$data/paper
  case "$name" in
    default) args=(--split bundle_disjoint --epochs 6) ;;
    injection-disjoint) args=(--split injection_disjoint --epochs 6) ;;
    trace-only) args=(--split bundle_disjoint --variant trace-only --epochs 4) ;;
    logs-only) args=(--split bundle_disjoint --variant logs-only --epochs 4) ;;
    vertical) args=(--split bundle_disjoint --view vertical --epochs 3 --normal-share 0.2) ;;
    vocab-256) args=(--split bundle_disjoint --tpe-vocab 256 --epochs 6) ;;
    vocab-1024) args=(--split bundle_disjoint --tpe-vocab 1024 --epochs 6) ;;
    vertical-vocab-256) args=(--split bundle_disjoint --view vertical --tpe-vocab 256 --epochs 3
      --normal-share 0.2) ;;
    vertical-vocab-1024) args=(--split bundle_disjoint --view vertical --tpe-vocab 1024 --epochs 3
      --normal-share 0.2) ;;
    operator-tokens)
      args=(--split bundle_disjoint --epochs 6 --operator-tokens)
      if [ -d "$traces" ]; then
        [ -d "$data/real" ] || "$build/teller" synth dataset --preset real --traces "$traces" \
          -o "$data/real" -q >/dev/null
        [ -d "$data/paper+real" ] || python3 scripts/combine_datasets.py "$data/paper+real" \
          "paper=$data/paper" "real=$data/real"
        dataset=$data/paper+real
      fi ;;
    *) echo "unknown model $name" >&2; exit 2 ;;
  esac
  start=$(date +%s)
  rm -rf "models/$name"
  # The nine models before operator tokens spell names as written (NormalizeName).
  [ "$name" = operator-tokens ] || args+=(--no-operator-tokens)
  "$build/teller" train "$dataset" "${args[@]}" -o "models/$name" --seed 1 \
    --dropout "${TELLER_DROPOUT:-0.2}"
  echo "teller: models/$name trained in $(( $(date +%s) - start )) s" >&2
done
