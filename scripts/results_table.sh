#!/usr/bin/env bash
# One table of the held-out figures (docs/results.md "Held out: the system, the rules and the
# model alone", docs/results.json "held_out"): for each held-out set, `teller diagnose` as
# shipped (the learned decider over the candidates, `--decider auto`), the rules alone
# (`--decider rules`), and the learned model alone (its own flagged steps and category in
# the same runs), beside the paper's Table 2 row; then the model alone on its own test
# splits (scripts/paper_tables.sh, read from docs/results.json "paper_tables").
#
# Sets (none fitted or tuned on: the decider is fitted on paper, fleet and real at seeds 7 and 21, the
# models trained on paper seed 20260101): the paper preset at seed 13 (x2), the paper preset
# at seed 99 (x2, a seed no script used before), the modern preset, faults injected into
# the real traces at seed 13, and the fleet preset (64 ranks, its seed 0). The learned
# model reads every set but the modern one, whose bundles (1.2 M events) take it minutes
# each: there the decider reads the rules' evidence alone.
#
# Columns: step F1 (the verdict's cause window, or the model's flagged steps, against the
# fault's affected steps, over every run), F1 at a 5% prior (the same counts with the
# fault-free steps weighed so that affected ones are 5%: precision R*p / (R*p + FPR*(1-p))),
# fault-type macro F1 (over the truth's categories, faulty runs), category accuracy, cause
# top-1 and top-3 (faulty runs whose mechanism a cause kind models), false alarms
# (fault-free runs called degraded), operator-set F1 (per affected step, the names of the
# operators the cause says moved in it, or the model's suspects in its flagged steps, against
# the step's affected operators).
# Usage: scripts/results_table.sh [OUT_DIR]   (default: a temporary folder, removed)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
eval_setup "${1:-}"
traces=${TELLER_REAL_TRACES:-../shared/real-traces}
decider=models/decider.json
[ -f "$decider" ] || decider=rules
# name:preset:seed:scale:ranks:model
sets=(paper13:paper:13:2::auto paper99:paper:99:2::auto modern:modern:0:1::none)
[ -d "$traces" ] && sets+=(real13:real:13:1::auto)
sets+=(fleet:fleet:0:1:64:auto)
for entry in "${sets[@]}"; do
  IFS=: read -r name preset seed scale ranks model <<<"$entry"
  if [ ! -d "$out/$name" ]; then
    echo "generating $name ($preset, seed $seed)" >&2
    "$build/teller" synth dataset --preset "$preset" --seed "$seed" --scale "$scale" \
      ${ranks:+--ranks "$ranks"} ${traces:+--traces "$traces"} -o "$out/$name" -q >/dev/null
  fi
  for who in rules system; do
    file=rules
    [ "$who" = system ] && file=$decider
    echo "scoring $name with the $who" >&2
    "$build/teller" score-diagnosis "$out/$name" -q --learned-model "$model" --decider "$file" \
      --json "$out/$name-$who.json" >/dev/null
  done
  # A fleet's bundles take gigabytes: only the scores are kept.
  [ "$preset" = fleet ] && rm -rf "${out:?}/$name"
done
seconds=$(( $(date +%s) - start ))
python3 scripts/results_table.py "$out" "$seconds" "$decider" "${sets[@]}"
