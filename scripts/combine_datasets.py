#!/usr/bin/env python3
"""One dataset folder over several `teller synth dataset` folders, so that one model
trains on every preset together (docs/learn.md, "Trained on every preset"). Each
bundle keeps its folder (a symbolic link) under the name PREFIX-BUNDLE; each split's
parts are the union of the inputs' parts, so a run held out in its own dataset stays
held out. Usage:
    scripts/combine_datasets.py OUT paper=DIR modern=DIR real=DIR ...
"""
import json
import os
import sys


def rename_key(prefix, key):
    return "%s-%s" % (prefix, key)  # "bundle/request" -> "prefix-bundle/request"


def main():
    if len(sys.argv) < 3 or any("=" not in arg for arg in sys.argv[2:]):
        print(__doc__, file=sys.stderr)
        return 2
    out = sys.argv[1]
    os.makedirs(out, exist_ok=False)
    manifest = {"preset": [], "seed": [], "bundles": []}
    splits = {}
    for arg in sys.argv[2:]:
        prefix, folder = arg.split("=", 1)
        folder = os.path.abspath(folder)
        with open(os.path.join(folder, "manifest.json")) as f:
            theirs = json.load(f)
        with open(os.path.join(folder, "splits.json")) as f:
            their_splits = json.load(f)
        manifest["preset"].append("%s=%s" % (prefix, theirs.get("preset")))
        manifest["seed"].append(theirs.get("seed"))
        for entry in theirs["bundles"]:
            name = rename_key(prefix, entry["bundle"])
            os.symlink(os.path.join(folder, entry["bundle"]), os.path.join(out, name))
            entry = dict(entry, bundle=name,
                         requests=[rename_key(prefix, key) for key in entry.get("requests", [])])
            manifest["bundles"].append(entry)
        for split, parts in their_splits.items():
            if not isinstance(parts, dict):
                continue
            mine = splits.setdefault(split, {})
            for part, value in parts.items():
                if part.startswith("held_out_"):  # engines, mechanisms: the union
                    mine[part] = sorted(set(mine.get(part, [])) | set(value))
                else:
                    mine.setdefault(part, []).extend(rename_key(prefix, key) for key in value)
    manifest["preset"] = "+".join(manifest["preset"])
    manifest["seed"] = manifest["seed"][0]
    splits["seed"] = manifest["seed"]
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    with open(os.path.join(out, "splits.json"), "w") as f:
        json.dump(splits, f, indent=1)
    print("combine_datasets: %d bundles in %s" % (len(manifest["bundles"]), out), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
