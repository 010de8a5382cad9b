"""One part of scripts/model_tables.sh into docs/results.md (its sub-section of "The learned
models", between <!-- model-PART:begin/end --> markers) and docs/results.json
("model_tables", the part's keys; others kept).
Usage: model_tables.py PART OUT_DIR DATASET SECONDS"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from doc_section import write_section  # noqa: E402

HEADING = "The learned models: vertical view, single-stream variant, vocabulary sweep, an unseen seed"


def written_by(part, seconds, what):
    return (f"Written by `scripts/model_tables.sh OUT {part}` ({seconds} s): {what}")


def table_of(out, name, dataset, where="the paper preset"):
    return open(f"{out}/{name}.md").read().strip().replace(f"`{dataset}`", where)


def vertical(out, dataset, seconds):
    lines = ["### Bundle-disjoint split, vertical view: one record per rank and step "
             "(paper Tables 2, 7 and 8)", "",
             written_by("vertical", seconds, "`teller paper-tables` of models/vertical on the "
                        "bundle_disjoint split of the paper preset scaled four times (seed "
                        "20260101) beside the classical comparison methods trained on the same records."),
             ""]
    if not os.path.exists(f"{out}/vertical.md"):
        return lines + ["models/vertical is not trained."], {}
    return lines + [table_of(out, "vertical", dataset)], {
        "vertical": json.load(open(f"{out}/vertical.json"))}


def single_stream(out, dataset, seconds):
    lines = ["### The single-stream variant beside the MoT model (bundle_disjoint, paper 3.7 ii)",
             "", written_by("single-stream", seconds,
                            "one causal transformer over the record's TPE tokens (with their "
                            "time features) and log templates that generates "
                            "`<fault_type>y</fault_type>` and the explanation (docs/learn.md), "
                            "trained by `teller paper-tables --methods single_stream` on the train "
                            "part models/default was trained on; its row is "
                            "`teller single-stream`."), ""]
    if not os.path.exists(f"{out}/single-stream.md"):
        return lines + ["Not evaluated: models/default is not trained."], {}
    return lines + [table_of(out, "single-stream", dataset)], {
        "single_stream": json.load(open(f"{out}/single-stream.json"))}


def model_name(view, vocab):
    if vocab == 512:
        return {"horizontal": "default", "vertical": "vertical"}[view]
    return f"vocab-{vocab}" if view == "horizontal" else f"vertical-vocab-{vocab}"


def fixed(x):
    return "-" if x is None else f"{x:.3f}"


def sweep_row(out, view, vocab):
    path = f"{out}/sweep-{view}-{vocab}.json"
    if not os.path.exists(path):
        return f"| {view} | {vocab} | not trained | | | | | | | | | | | |", None
    data = json.load(open(path))
    m = next(m for m in data["methods"] if m["group"] == "ours")
    s, o = m["step"], m.get("operators", {})
    best = json.load(open(f"models/{model_name(view, vocab)}/model.json")).get("best_val_step_f1")
    said = data.get("explanations", {}).get("model")
    bleu = (f"{said['decoded_bleu'][3]:.3f} ({said['grounded']}/{said['decoded']})"
            if said and said["decoded"] else "-")
    row = (f"| {view} | {vocab} | {fixed(s['accuracy'])} | {fixed(s['precision'])} | "
           f"{fixed(s['f1'])} | {fixed(s['auroc'])} | {fixed(m['type']['macro_f1'])} | "
           f"{fixed(o.get('precision'))} | {fixed(o.get('f1'))} | {fixed(o.get('jaccard'))} | "
           f"{fixed(o.get('family_precision'))} | {fixed(o.get('family_f1'))} | {bleu} | "
           f"{fixed(best)} |")
    return row, data


def sweep(out, dataset, seconds):
    lines = ["### Table 3: TPE vocabulary size (bundle_disjoint)", "",
             written_by("sweep", seconds, "`teller paper-tables` of the models of each view and TPE "
                        "vocabulary size (`scripts/train_default_model.sh`: same data, seed, "
                        "epochs and settings but the vocabulary) on the bundle_disjoint split of "
                        "the paper preset scaled four times (seed 20260101)."), "",
             "Step detection and suspect operators of the learned model per view and TPE "
             "vocabulary size; Macro+ compares operators as families (docs/metrics.md); BLEU-4: "
             "the model's decoded explanations of the faulty test runs where it flagged a step "
             "(every sentence, grounded or not; `-`: a model without a decoder), with how many "
             "of them passed the grounding check. Its compression per size is Table 6 below.", "",
             "| View | Vocab | Step Acc | Step P | Step F1 | AUROC | Type macro F1 | Macro P | "
             "Macro F1 | Jaccard | Macro+ P | Macro+ F1 | BLEU-4 (grounded) | Best val step F1 |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    numbers = {}
    for view in ("horizontal", "vertical"):
        for vocab in (256, 512, 1024):
            row, data = sweep_row(out, view, vocab)
            lines.append(row)
            if data is not None:
                numbers[f"{view}_{vocab}"] = data
    return lines, {"sweep": numbers}


def fresh(out, dataset, seconds):
    lines = ["### A seed the models never saw (paper preset x4, seed 20261203, bundle_disjoint)",
             "", written_by("fresh", seconds, "the shipped models (trained at seed 20260101) on "
                            "whole runs of a dataset generated at another seed; every comparison method "
                            "trained on this dataset's own train part."), ""]
    numbers = {}
    for view in ("horizontal", "vertical"):
        if not os.path.exists(f"{out}/fresh-{view}.md"):
            lines += [f"{view.capitalize()} view: not evaluated (no model).", ""]
            continue
        numbers[f"fresh_{view}"] = json.load(open(f"{out}/fresh-{view}.json"))
        lines += [f"#### {view.capitalize()} view", "",
                  table_of(out, f"fresh-{view}", f"{out}/fresh-dataset",
                           "the seed-20261203 dataset"), ""]
    return lines, numbers


PARTS = {"vertical": vertical, "single-stream": single_stream, "sweep": sweep, "fresh": fresh}


def main():
    part, out, dataset, seconds = sys.argv[1:5]
    lines, numbers = PARTS[part](out, dataset, seconds)
    write_section("docs/results.md", f"model-{part}", HEADING, "\n".join(lines).rstrip())
    path = "docs/results.json"
    results = json.load(open(path)) if os.path.exists(path) else {}
    results.setdefault("model_tables", {}).update(numbers)
    with open(path, "w") as f:
        json.dump(results, f, indent=1)
        f.write("\n")
    print(f"model_tables: {part} written to docs/results.md and docs/results.json",
          file=sys.stderr)


if __name__ == "__main__":
    main()
