#!/usr/bin/env python3
"""The tables of docs/reliability.md (run by scripts/reliability.sh).

--regex: prints the ctest regex of every test the bad-input table names.
--junit FILE --out PAGE: writes the page's generated section from ctest's JUnit output,
docs/big_inputs.json (scripts/big_inputs.sh) and docs/fuzzing.json.
"""
import argparse
import datetime
import json
import os
import re
import sys
import xml.etree.ElementTree as ET

# input, expected behaviour, message or counter, tests that prove it.
BAD_INPUTS = [
    ("Kineto JSON cut mid-event",
     "import the events before the cut, reconstruct them",
     "counter `kineto_truncated_file` (data_loss); note `FILE: truncated file: JSON ends at byte N where an event element was expected; the K complete events before the cut were imported`",
     ["BadInput.KinetoCutMidEventKeepsTheEventsBeforeTheCut",
      "KinetoImporterTest.TruncatedJsonKeepsCompleteEvents",
      "KinetoImporterTest.RandomTruncationsNeverCrashOrInvent"]),
    ("Kineto JSON too big to hold whole (1 GB or more, or `--window-events N`)",
     "build in time windows cut where no event runs: the same events, steps and trees as a whole build, memory near one window; a cut file builds what it holds",
     "counters `build_windows` (info), `build_windows_over_budget` when no quiet moment came in time; note `built in N time windows of about M events ...`; a windowed build asked of several inputs: `--window-events: a windowed build takes exactly one Kineto JSON file; got N input(s)`",
     ["WindowedBuildTest.WindowsBuildTheSameStepsTreesAndEventsAsTheWholeTrace",
      "WindowedBuildTest.ChoosingWindowsAndBadInputsAreClearErrors",
      "KinetoWindowsTest.WithoutAQuietPointTheWindowGrowsAndSaysSo",
      "KinetoWindowsTest.ATruncatedFileIsPlannedFromTheEventsBeforeTheCut"]),
    ("Kineto .json.gz cut mid-stream",
     "import what inflated before the cut",
     "counter `kineto_truncated_file`; note with the gzip reader's message",
     ["KinetoImporterTest.GzipAndTruncatedGzip"]),
    ("nsys SQLite export cut short (cut at every 4 KiB page)",
     "refuse, naming the cut: SQLite keeps schema pages at the end of the file, so no table is readable",
     "`FILE: cut short at byte N: the SQLite header expects M pages of P bytes (B bytes); its schema is unreadable: database disk image is malformed` (data_loss)",
     ["BadInput.NsysSqliteCutShortNamesTheCut"]),
    ("nsys SQLite export with a damaged page (kernel table zeroed)",
     "keep the rows read before the damage and every other table",
     "counter `nsys_table_unreadable` (data_loss); note `FILE: reading rows of \"SELECT ... FROM CUPTI_ACTIVITY_KIND_KERNEL ...\" failed: database disk image is malformed; the rows read before it were kept`",
     ["BadInput.NsysDamagedTablePageKeepsTheOtherTables"]),
    ("bundle chunk file cut mid-record",
     "keep every whole record before the cut and the other processes whole",
     "counters `bundle_chunk_truncated`, `bundle_bytes_lost` (data_loss); note naming the chunk file",
     ["BadInput.BundleChunkCutMidRecordKeepsTheRecordsBefore",
      "BundleImporterTest.TruncatedEventFileIsCountedAndTheRestImported"]),
    ("PNG named `.json`",
     "refuse before importing",
     "`FILE: binary data at offset 0 (bytes 89 50 4e 47 0d 0a 1a 0a), expected a Kineto JSON trace, an Nsight Systems SQLite export or a text log`",
     ["BadInput.PngNamedJsonIsRefusedWithItsFirstBytes"]),
    ("CSV file",
     "read as a text log, every line kept",
     "counters `log_line_unknown_format`, `log_line_no_ts` (one per line)",
     ["BadInput.CsvIsReadAsALogOfUnknownFormatLineByLine"]),
    ("text that is not an nsys export (JSON in `.sqlite`, another program's SQLite)",
     "refuse",
     "`FILE: not an SQLite database` / `FILE: not an Nsight Systems export ... found N tables`",
     ["NsysBadInput.NotSqlite", "NsysBadInput.SqliteOfAnotherProgram"]),
    ("nsys export without CUPTI_ACTIVITY_KIND_KERNEL",
     "import the host side (runtime, NVTX, memcpy) without kernels",
     "counter `nsys_missing_table_CUPTI_ACTIVITY_KIND_KERNEL`",
     ["BadInput.NsysWithoutKernelTableKeepsTheHostSide", "NsysTiny.MissingDriverTable"]),
    ("nsys export without StringIds",
     "keep every row with empty names; bindings by correlation unchanged",
     "counters `nsys_missing_table_StringIds`, `nsys_unresolved_string_id` (error, one per name looked up)",
     ["BadInput.NsysWithoutStringIdsKeepsEveryRowWithUnresolvedNames"]),
    ("nsys table without a required column (kernel `streamId`)",
     "skip that table, keep the others",
     "counter `nsys_missing_column_CUPTI_ACTIVITY_KIND_KERNEL_streamId` (data_loss, rows skipped)",
     ["NsysTiny.MissingRequiredColumnSkipsTable"]),
    ("nsys export without TARGET_INFO_SESSION_START_TIME",
     "keep relative times",
     "counter `nsys_session_start_unknown`; note",
     ["NsysTiny.MissingSessionStartKeepsRelativeTimes"]),
    ("bundle `meta.json` missing or malformed",
     "refuse",
     "`DIR/meta.json: not valid JSON at offset 1`, `DIR/meta.json: format_version: expected an integer`",
     ["BundleImporterTest.MissingOrMalformedMetaJsonIsAStatusNamingTheFile"]),
    ("clock jump in a bundle (realtime stepped 5 s back between clock pairs)",
     "times from the clock after the jump: no event reordered or negative",
     "counter `bundle_clock_jump` (data_loss); note `DIR/meta.json: host H: the realtime clock jumped by -5000000000 ns between clock pairs at monotonic A and B ns`",
     ["BadInput.BundleClockJumpIsCountedAndTimesStayOrdered"]),
    ("Kineto timestamps going back (events in reverse time order)",
     "same trace as in order: steps, bindings, nodes",
     "none needed (order-free import)",
     ["BadInput.KinetoEventsGoingBackInTimeGiveTheSameTrace"]),
    ("unmatched push/pop (B without E, stray E)",
     "close the open range at the thread's last time, flag it; ignore the stray pop",
     "counters `reconstruct_unclosed_range`, `reconstruct_unmatched_pop`; flag `truncated` on the range",
     ["BadInput.KinetoUnmatchedBeginEndAreCountedAndKept",
      "CallChainBuilderTest.PushPopMismatchesAreCountedNotFatal"]),
    ("duplicate correlation ids",
     "each kernel binds to the closest launch before it",
     "counter `reconstruct_duplicate_correlation`",
     ["BadInput.KinetoDuplicateCorrelationIdsBindToTheClosestLaunch",
      "CallChainBuilderTest.DuplicateCorrelationPicksTheClosestLaunchBefore"]),
    ("kernels without launches",
     "keep the kernel, unbound",
     "counter `reconstruct_kernels_unbound`",
     ["BadInput.KinetoKernelWithoutLaunchIsCountedAndKept",
      "CallChainBuilderTest.CorrelationIdsDoNotBindAcrossProcesses"]),
    ("malformed Kineto event (bad ts, not an object, stray `}`)",
     "skip that event, import the rest",
     "counters `kineto_event_malformed`, `kineto_event_bad_ts`, ...",
     ["KinetoImporterTest.MalformedEventIsCountedAndTheRestImports",
      "KinetoImporterTest.StrayClosingBraceIsOneMalformedElementNotAStall"]),
    ("log in an unknown format (banner, colours, line cut mid-word)",
     "every line kept as a row",
     "counters `log_line_unknown_format`, `log_line_no_ts`, `log_line_ansi_stripped`",
     ["BadInput.LogOfUnknownFormatKeepsEveryLine",
      "LogImport.RandomBytesNeverCrashAndEveryLineIsKept",
      "LogImport.VeryLongLinesAreCappedAndCounted"]),
    ("empty bundle (meta.json only)",
     "open it, say nothing was recorded",
     "counter `bundle_no_process_data` (data_loss); note `DIR: no proc-* folder, expected one per traced process`",
     ["BadInput.BundleWithOnlyMetaJsonSaysNothingWasRecorded"]),
    ("empty files (.json, .json.gz, .sqlite, .log)",
     "refuse",
     "`FILE: empty file, cannot tell its format`",
     ["BadInput.EmptyFilesAreRefusedByName", "NsysBadInput.EmptySqliteFile"]),
    ("missing file, empty directory",
     "refuse",
     "`PATH: no such file`, `DIR: directory holds no meta.json and no trace or log files`",
     ["ImportInputsTest.BadInputsAreClearErrors"]),
]

BEGIN, END = "<!-- reliability:begin -->", "<!-- reliability:end -->"


def test_regex():
    names = sorted({name for row in BAD_INPUTS for name in row[3]})
    return "^(" + "|".join(re.escape(name) for name in names) + ")$"


def read_junit(path):
    """test name -> 'pass' | 'fail' | 'skip'."""
    results = {}
    if not os.path.exists(path):
        return results
    for case in ET.parse(path).getroot().iter("testcase"):
        name = case.get("name")
        status = case.get("status", "run")
        if case.find("failure") is not None or case.find("error") is not None:
            results[name] = "fail"
        elif case.find("skipped") is not None or status in ("notrun", "disabled"):
            results[name] = "skip"
        else:
            results[name] = "pass"
    return results


def bad_input_section(results):
    lines = ["## Bad inputs", "",
             "Each row is checked by the tests it names (`tests/bad_inputs/bad_inputs_test.cc` runs",
             "every input through format detection, import and reconstruction, as `teller build`",
             "does); the result is from this run. Counters are printed by `teller stats` and every",
             "report; notes go to the trace's notes.", "",
             "| input | expected behaviour | message or counter | tests | result |",
             "|---|---|---|---|---|"]
    passed = 0
    for what, behaviour, message, tests in BAD_INPUTS:
        states = [results.get(name, "not run") for name in tests]
        ok = all(state == "pass" for state in states)
        passed += ok
        test_text = "<br>".join(f"`{name}`" + ("" if state == "pass" else f" ({state})")
                                for name, state in zip(tests, states))
        lines.append(f"| {what} | {behaviour} | {message} | {test_text} | "
                     f"{'pass' if ok else 'FAIL'} |")
    lines += ["", f"{passed} of {len(BAD_INPUTS)} rows pass."]
    return lines, passed == len(BAD_INPUTS)


def big_input_section():
    lines = ["## Big inputs: peak memory", ""]
    path = "docs/big_inputs.json"
    if not os.path.exists(path):
        return lines + ["No figures yet: run `scripts/big_inputs.sh` (writes docs/big_inputs.json",
                        "and its section of docs/benchmarks.md)."]
    facts = json.load(open(path))
    if "table" not in facts:
        return lines + ["docs/big_inputs.json is from an older scripts/big_inputs.sh: rerun it."]
    lines += [f"From `{facts['command']}` ({facts['date']}, {facts['machine']}, binary "
              f"`{facts.get('teller', '')}`); the same table is in docs/benchmarks.md. Kineto",
              "JSON of the real vLLM trace's shape, generated by `bench/make_big_kineto.cc`.", ""]
    lines += facts["table"] + [""] + facts["summary"]
    return lines


def fuzz_section():
    lines = ["## Fuzzing", ""]
    path = "docs/fuzzing.json"
    if not os.path.exists(path):
        return lines + ["No fuzzing facts (docs/fuzzing.json missing)."]
    facts = json.load(open(path))
    lines += ["From docs/fuzzing.json (the facts of docs/fuzzing.md; runs by `scripts/fuzz.sh`).",
              "Time is the exploratory runs plus the 30-second regression run.", "",
              "| target | time fuzzed | executions | bugs found | fixed | open |",
              "|---|---|---|---|---|---|"]
    total = 0
    for t in facts["targets"]:
        seconds = sum(t["runs_seconds"]) + t.get("regression_seconds", 0)
        total += seconds
        bugs = t["bugs"]
        fixed = [b for b in bugs if b["status"] == "fixed"]
        open_bugs = [b for b in bugs if b["status"] != "fixed"]
        lines.append(f"| `{t['target']}` | {seconds / 60:.1f} min | {t['executions']:,} | "
                     f"{len(bugs)} | {len(fixed)} | {len(open_bugs)} |")
    lines += ["", f"Total {total / 3600:.2f} hours of fuzzing (ASan + UBSan, 2-core machine)."]
    for t in facts["targets"]:
        for b in t["bugs"]:
            lines.append(f"- `{t['target']}`: {b['what']}: {b['status']} (`{b['test']}`)")
    for item in facts.get("not_yet", []):
        lines.append(f"- not fuzzed yet: {item}")
    return lines


def record_faults_section(results):
    lines = ["## Faults while recording", ""]
    names = sorted(n for n in results if n.startswith("RecordFaults"))
    if not names:
        return lines + ["No `RecordFaults*` test exists (or none was built) yet."], True
    lines += ["The `RecordFaults*` tests, run now (`src/record/`).", "",
              "| test | result |", "|---|---|"]
    for name in names:
        lines.append(f"| `{name}` | {results[name]} |")
    passed = sum(results[n] == "pass" for n in names)
    lines += ["", f"{passed} of {len(names)} pass."]
    return lines, passed == len(names)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--regex", action="store_true")
    parser.add_argument("--junit")
    parser.add_argument("--out")
    args = parser.parse_args()
    if args.regex:
        print(test_regex())
        return 0
    results = read_junit(args.junit)
    bad, bad_ok = bad_input_section(results)
    faults, faults_ok = record_faults_section(results)
    block = [BEGIN,
             f"Generated by `scripts/reliability.sh` on {datetime.date.today().isoformat()}; do "
             "not edit between the markers by hand.", ""]
    block += bad + [""] + big_input_section() + [""] + fuzz_section() + [""] + faults + [END]
    text = "\n".join(block) + "\n"
    page = open(args.out).read() if os.path.exists(args.out) else (
        "# Reliability\n\nteller reads files other tools wrote, often cut short by the crash being "
        "diagnosed, and runs inside other people's processes (issue 8). This page is the "
        "evidence: what bad inputs do, how much memory big inputs take, how long the importers "
        "were fuzzed and what recording survives.\n\n")
    if BEGIN in page and END in page:
        page = page[: page.index(BEGIN)] + text + page[page.index(END) + len(END) + 1:]
    else:
        page = page.rstrip("\n") + "\n\n" + text
    open(args.out, "w").write(page)
    print(f"bad inputs: {'all pass' if bad_ok else 'FAILURES'}; recording faults: "
          f"{'all pass' if faults_ok else 'FAILURES'}", file=sys.stderr)
    return 0 if bad_ok and faults_ok else 1


if __name__ == "__main__":
    sys.exit(main())
