"""Renders scripts/results_table.sh's scores into docs/results.md ("held-out-table") and
docs/results.json ("held_out"). Usage: results_table.py OUT SECONDS DECIDER SET..., each SET
name:preset:seed:scale:ranks:model as the shell script lists them."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from doc_section import write_section  # noqa: E402

PRIOR = 0.05
NAMES = {"paper13": "paper preset, seed 13 (x2)",
         "paper99": "paper preset, seed 99 (x2)",
         "modern": "modern preset",
         "real13": "real traces, faults at seed 13",
         "fleet": "fleet preset, 64 ranks"}
# The paper's Table 2 (TELLER on its own benchmark): step F1, operator-set F1, fault-type
# macro F1, F1 at a 5% prior.
PAPER = {"step_f1": 0.900, "operator_set_f1": 0.792, "type_f1": 0.476, "f1_at_5": 0.694}


def f1_at_prior(steps, prior=PRIOR):
    """F1 with the negatives weighed so that positives are `prior` of the steps."""
    tp, fp, fn, total = steps["true"], steps["false"], steps["missed"], steps["total"]
    positives = tp + fn
    negatives = max(total - positives, 0)
    if tp == 0 or positives == 0:
        return 0.0
    recall = tp / positives
    fpr = fp / negatives if negatives else 0.0
    precision = recall * prior / (recall * prior + fpr * (1 - prior))
    return 2 * precision * recall / (precision + recall)


def system_figures(totals):
    return {"step_f1": totals["cause_step_f1"], "f1_at_5": f1_at_prior(totals["cause_steps"]),
            "type_f1": totals["category_macro_f1"], "category": totals["category_accuracy"],
            "top1": totals["cause_top1_rate"], "top3": totals["cause_top3_rate"],
            "false_alarms": totals["false_alarm_rate"],
            "operator_set_f1": totals.get("operator_set", {}).get("f1"), "runs": (
                totals["cause_scored_cases"], totals["faulty_cases"], totals["normal_cases"])}


def model_figures(totals):
    m = totals["model"]
    if not m["cases"]:
        return None
    return {"step_f1": m["step_f1"], "f1_at_5": f1_at_prior(m["steps"]),
            "type_f1": m["category_macro_f1"], "category": m["category_accuracy"],
            "operator_set_f1": m.get("operator_set_f1")}


def cell(value, percent=False):
    if value is None:
        return "-"
    return "%.0f%%" % (100 * value) if percent else "%.2f" % value


def row(label, who, f, runs="", op_f1=None):
    op_f1 = f.get("operator_set_f1") if op_f1 is None else op_f1
    return "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        label, who, runs, cell(f.get("step_f1")), cell(op_f1), cell(f.get("type_f1")),
        cell(f.get("f1_at_5")), cell(f.get("category"), True), cell(f.get("top1"), True),
        cell(f.get("top3"), True), cell(f.get("false_alarms"), True))


def paper_tables_rows():
    """The model alone on its own test splits, from scripts/paper_tables.sh's figures."""
    path = "docs/results.json"
    tables = json.load(open(path)).get("paper_tables", {}) if os.path.exists(path) else {}
    rows = []
    for key, label in (("bundle_disjoint", "paper x4 seed 20260101, bundle-disjoint test part"),
                       ("injection_disjoint", "the same, injection-disjoint test part"),
                       ("preset_real", "real preset, bundle-disjoint test part")):
        methods = tables.get(key, {}).get("methods", [])
        ours = next((m for m in methods if m.get("name") == "teller"), None)
        if ours is None:
            continue
        prior = next((p for p in ours.get("priors", []) if abs(p["prior"] - PRIOR) < 1e-9), {})
        f = {"step_f1": ours["step"]["f1"], "f1_at_5": prior.get("f1"),
             "type_f1": ours.get("type", {}).get("macro_f1")}
        rows.append(row(label, "model alone", f, op_f1=ours.get("operators", {}).get("f1")))
    return rows


def main():
    out, seconds, decider, sets = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
    header = ("| held-out set | who | runs (cause scored / faulty / fault-free) | step F1 | "
              "operator-set F1 | fault-type macro F1 | F1 at 5% prior | category | "
              "cause top-1 | top-3 | false alarms |")
    lines = [header, "|" + "---|" * 11, row("the paper's Table 2", "TELLER", PAPER,
                                            op_f1=PAPER["operator_set_f1"])]
    results = {}
    for entry in sets:
        name = entry.split(":")[0]
        label = NAMES.get(name, name)
        rules = json.load(open(os.path.join(out, name + "-rules.json")))["totals"]
        system = json.load(open(os.path.join(out, name + "-system.json")))["totals"]
        figures = {"system": system_figures(system), "rules": system_figures(rules),
                   "model": model_figures(system)}
        results[name] = figures
        runs = "%d / %d / %d" % figures["system"]["runs"]
        lines.append(row(label, "teller (decider)" if decider != "rules" else "teller (rules)",
                         figures["system"], runs))
        lines.append(row(label, "rules alone", figures["rules"], runs))
        if figures["model"]:
            lines.append(row(label, "model alone", figures["model"], runs))
    lines += paper_tables_rows()
    text = "\n".join([
        "Every figure below is on data no part of teller was fitted or tuned on "
        "(`scripts/results_table.sh`, %d s; the decider: `%s`). The system is `teller "
        "diagnose` as shipped; the rules alone are `--decider rules`; the model alone is the "
        "learned model's own flagged steps and category in the same runs (it does not read "
        "the modern preset's bundles: too large for it). Step F1 is over every run's steps: "
        "the verdict's cause window, or the model's flagged steps, against the steps the fault "
        "affected. Operator-set F1 is the paper's Operator set-Macro over the affected steps of "
        "the faulty runs: per step, the names of the operators the verdict's cause says moved "
        "in it (`cause.operators`), or the model's suspects in the steps it flags, against the "
        "names of the step's affected operator instances (labels.json; docs/metrics.md). "
        "The last rows are the model alone on the test parts of its own dataset "
        "(`scripts/paper_tables.sh`). The paper's row is its Table 2, on its own benchmark."
        % (seconds, decider), ""] + lines) + "\n"
    write_section("docs/results.md", "held-out-table",
                  "Held out: the system, the rules and the model alone", text)
    path = "docs/results.json"
    data = json.load(open(path)) if os.path.exists(path) else {}
    data["held_out"] = {"sets": results, "decider": decider, "seconds": seconds}
    json.dump(data, open(path, "w"), indent=1)
    print(text)


if __name__ == "__main__":
    main()
