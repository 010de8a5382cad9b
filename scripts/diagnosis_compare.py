#!/usr/bin/env python3
"""Compares two captures of scripts/diagnosis_capture.sh: every diagnosis JSON and
terminal summary must be the same, apart from what a change says it renamed.

Left out of the comparison: the `tuning` record (new in teller-diagnosis/3), the
schema name, and timings (model.seconds). Field renames of the schema are applied to
the BEFORE side: teller-diagnosis/2 -> /3 renamed `abnormal` and
`abnormal_probability` (the run's) to `degraded` and `degraded_probability`.

Usage: scripts/diagnosis_compare.py BEFORE_DIR AFTER_DIR   (exit 1 when they differ)
"""
import json
import pathlib
import sys

RENAMED = {"abnormal": "degraded", "abnormal_probability": "degraded_probability"}


def normalized(path, rename):
    diagnosis = json.loads(path.read_text())
    diagnosis.pop("tuning", None)
    diagnosis.pop("schema", None)
    if "model" in diagnosis:
        diagnosis["model"].pop("seconds", None)
    if rename:
        diagnosis = {RENAMED.get(key, key): value for key, value in diagnosis.items()}
    return diagnosis


def first_difference(a, b, where="$"):
    if type(a) is not type(b):
        return f"{where}: {a!r} != {b!r}"
    if isinstance(a, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                return f"{where}.{key}: only in {'after' if key in b else 'before'}"
            found = first_difference(a[key], b[key], f"{where}.{key}")
            if found:
                return found
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{where}: {len(a)} items != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            found = first_difference(x, y, f"{where}[{i}]")
            if found:
                return found
        return None
    return None if a == b else f"{where}: {a!r} != {b!r}"


def main():
    before, after = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    differ = 0
    names = sorted(p.name for p in before.glob("*.json"))
    for name in names:
        if not (after / name).exists():
            print(f"{name}: missing after")
            differ += 1
            continue
        found = first_difference(normalized(before / name, True), normalized(after / name, False))
        if found:
            print(f"{name}: {found}")
            differ += 1
        text = name[: -len(".json")] + ".txt"
        if not (before / text).exists():
            continue
        summary_before = (before / text).read_text().replace(str(before), "CAPTURE")
        summary_after = (after / text).read_text().replace(str(after), "CAPTURE")
        if summary_before != summary_after:
            print(f"{text}: the terminal summary differs")
            differ += 1
    print(f"{len(names)} diagnoses compared, {differ} differences")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
