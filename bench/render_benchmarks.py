"""Renders docs/benchmarks.md from the JSON lines scripts/bench.sh collected."""
import datetime
import json
import os
import sys

from machine import cpu_model

rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]


def mb(n):
    if n < 10 * 1048576:
        return f"{n / 1024:,.0f} KB"
    return f"{n / 1048576:,.0f} MB"


out = []
out.append("# Benchmarks\n")
out.append("Produced by `scripts/bench.sh` (do not edit by hand). Every ratio compares tools run")
out.append("one after another on the same file in the same run, pinned to one core.\n")
out.append(f"- date: {datetime.date.today().isoformat()}")
out.append(f"- machine: {cpu_model()}, {os.cpu_count()} cores\n")

out.append("## Kineto JSON ingest\n")
out.append("Events are the file's `traceEvents` entries (counted by the simdjson pass); rates are")
out.append("those entries per second of wall time. teller's figure is the whole import into the")
out.append("columnar model (parse, intern, classify, args); the floor only touches four fields.\n")
out.append("| file | size | tool | events | seconds | events/s | peak RSS | teller / tool |")
out.append("|---|---|---|---|---|---|---|---|")
for name in dict.fromkeys(r["input"] for r in rows if r["group"] == "kineto"):
    group = {r["tool"]: r for r in rows if r["group"] == "kineto" and r["input"] == name}
    events = group["simdjson_floor"]["result"]["events"]
    teller_rate = events / group["teller"]["result"]["seconds"]
    for tool in ("teller", "simdjson_floor", "python_json"):
        if tool not in group:
            continue
        r = group[tool]
        rate = events / r["result"]["seconds"]
        out.append(f"| {name} | {mb(r['size_bytes'])} | {tool} | {events:,} | "
                   f"{r['result']['seconds']:.3f} | {rate / 1e6:.2f} M | "
                   f"{mb(r['result']['peak_rss_bytes'])} | "
                   f"{'-' if tool == 'teller' else f'{teller_rate / rate:.2f}x'} |")
    t = group["teller"]["result"]
    out.append(f"| {name} | | teller model | {t['events']:,} model events | | | "
               f"{t['column_bytes_per_event']:.1f} B/event columns + "
               f"{mb(t['string_bytes'])} strings | |")
out.append("")
out.append("Targets (issue 2): >= 1.5 M events/s on one core, at least half the bare simdjson")
out.append("rate, <= 64 bytes per event resident plus strings.\n")

nsys = {r["tool"]: r for r in rows if r["group"] == "nsys"}
if nsys:
    out.append("## Nsight Systems SQLite ingest\n")
    out.append("The real H200 export grown 150x (`bench/make_nsys.sh`). The floor is a raw")
    out.append("`sqlite3_step` scan reading every column of the tables teller imports.\n")
    out.append("| file | tool | rows | seconds | rows/s | peak RSS |")
    out.append("|---|---|---|---|---|---|")
    rows_total = nsys["sqlite_scan_floor"]["result"]["rows"]
    for tool in ("teller", "sqlite_scan_floor"):
        r = nsys[tool]
        out.append(f"| {r['input']} | {tool} | {rows_total:,} | {r['result']['seconds']:.3f} | "
                   f"{rows_total / r['result']['seconds'] / 1e6:.2f} M | "
                   f"{mb(r['result']['peak_rss_bytes'])} |")
    ratio = nsys["sqlite_scan_floor"]["result"]["seconds"] / nsys["teller"]["result"]["seconds"]
    out.append(f"\nteller runs at {ratio:.2f}x the raw scan's rate. Target: >= 2 M rows/s.\n")

logs = [r for r in rows if r["group"] == "log"]
if logs:
    r = logs[0]["result"]
    out.append("## Service-log ingest\n")
    out.append("`bench/log_ingest_bench.cc`: a log of four engine line kinds in turn (vLLM request")
    out.append("lines, SGLang decode batches, NCCL INFO, uvicorn access lines), imported whole:")
    out.append("read, sanitize, parse, intern, mine templates, append.\n")
    out.append("| lines | templates | seconds | CPU seconds | lines/s | peak RSS |")
    out.append("|---|---|---|---|---|---|")
    out.append(f"| {r['lines']:,} | {r['templates']} | {r['seconds']:.3f} | {r['cpu_seconds']:.3f} | "
               f"{r['lines'] / r['seconds'] / 1e6:.2f} M | {mb(r['peak_rss_bytes'])} |")
    out.append("\nTarget (issue 3): 1 M lines in under 10 s.\n")

rec = [r for r in rows if r["group"] == "reconstruct"]
if rec:
    r = rec[0]["result"]
    out.append("## Reconstruction at paper scale\n")
    out.append("`bench/reconstruct_bench.cc`: engine steps of ~2,200 events (36 decoder layers of")
    out.append("aten op, launch, kernel; a collective per layer), bound by correlation ids.\n")
    out.append("| nodes | steps | seconds | nodes/s | peak RSS |")
    out.append("|---|---|---|---|---|")
    out.append(f"| {r['nodes']:,} | {r['steps']:,} | {r['seconds']:.3f} | "
               f"{r['nodes'] / r['seconds'] / 1e6:.2f} M | {mb(r['peak_rss_bytes'])} |")
    out.append("\nTarget: >= 5 M nodes/s. Peak RSS includes building the input trace.\n")
nvtx = [r for r in rows if r["group"] == "capture_nvtx"]
if nvtx:
    r = nvtx[0]["result"]
    out.append("## Capture overhead (CPU)\n")
    out.append("`bench/capture_nvtx_bench.cc`: an NVTX push/pop pair in a loop with no tool, with a")
    out.append("minimal tool that stores a pointer, and with teller's injection writing a bundle.\n")
    out.append("| pairs | no tool | minimal tool | teller | teller / minimal | bytes per event |")
    out.append("|---|---|---|---|---|---|")
    out.append(f"| {r['pairs']:,} | {r['no_tool_ns_per_pair']:.1f} ns | "
               f"{r['minimal_tool_ns_per_pair']:.1f} ns | {r['teller_ns_per_pair']:.1f} ns | "
               f"{r['teller_over_minimal']:.1f}x | {r['teller_bytes_per_event']:.1f} |")
    out.append("\nTarget (issue 4): teller within 2x of the minimal tool and under 100 ns per pair.")
    if "timestamp_ns" in r:
        out.append(f"One timestamp (the TSC read teller takes per push and per pop) costs "
                   f"{r['timestamp_ns']:.1f} ns on this machine, so timing a pair costs at least "
                   f"{2 * r['timestamp_ns']:.1f} ns before anything is stored; the minimal tool "
                   f"takes no time stamp, and 2x of it ({2 * r['minimal_tool_ns_per_pair']:.1f} ns) "
                   f"is below that floor.")
    out.append("")
py = [r for r in rows if r["group"] == "capture_python"]
if py:
    r = py[0]["result"]
    out.append("`bench/capture_python_bench.py`: a Python loop calling a wrapped function.\n")
    out.append("| calls | plain | hooked | overhead per call | bytes per range |")
    out.append("|---|---|---|---|---|")
    out.append(f"| {r['calls']:,} | {r['plain_ns_per_call']:.0f} ns | {r['hooked_ns_per_call']:.0f} ns |"
               f" {r['hook_overhead_ns_per_call']:.0f} ns | {r['bytes_per_range']:.1f} |\n")
    out.append("GPU overhead of `teller record` on a PyTorch loop needs a GPU machine "
               "(`tests/gpu/run.sh`); none was available when this was produced.\n")
diag = [r for r in rows if r["group"] == "diagnose"]
if diag:
    r = diag[0]["result"]
    out.append("## Localization, slicing and TPE per request\n")
    out.append("`bench/diagnose_bench.cc` on every bundle of `teller synth dataset --preset paper`")
    out.append(f"({r['bundles']} bundles, {r['requests']} requests, {r['nodes']:,} call-chain nodes).")
    out.append("Per bundle, shared by its requests: phi(x) and the robust baseline. Per request:")
    out.append("for every step (and rank) serving it, score the families, slice around the top")
    out.append("family's 8 longest instances, close the slice under parents, serialize and")
    out.append("TPE-encode it (vocabulary 512). `Diagnose` is the whole `teller diagnose` after")
    out.append("loading (it slices only the top 5 findings).\n")
    out.append("| per request: median | p90 | max | baseline per bundle: median | max | "
               "Diagnose per bundle: median | max | peak RSS |")
    out.append("|---|---|---|---|---|---|---|---|")
    out.append(f"| {r['request_ms_median']:.1f} ms | {r['request_ms_p90']:.1f} ms | "
               f"{r['request_ms_max']:.1f} ms | {r['baseline_ms_median']:.1f} ms | "
               f"{r['baseline_ms_max']:.1f} ms | {r['diagnose_ms_median']:.1f} ms | "
               f"{r['diagnose_ms_max']:.1f} ms | {mb(r['peak_rss_bytes'])} |\n")
    out.append(f"Slices kept {r['slice_nodes']:,} nodes in all, encoded to {r['tpe_tokens']:,} "
               "TPE tokens. Target (issue 5): one request under 50 ms at paper scale.\n")
tpe = [r for r in rows if r["group"] == "tpe" and r["tool"] == "teller"]
if tpe:
    r = tpe[0]["result"]
    spm = {(x["input"], x["result"]["vocab_size"]): x["result"]
           for x in rows if x["group"] == "tpe" and x["tool"] == "spm_train"}
    out.append("## TPE\n")
    out.append("`bench/tpe_bench.cc` on the `teller synth dataset --preset paper` corpus: every")
    out.append("request-step record (request q's projection C_q(s), all ranks) serialized as")
    out.append(f"[layer, name] tokens: {r['steps']:,} steps, {r['nodes']:,} nodes, "
               f"{r['base_tokens']:,} base symbols")
    out.append(f"({r['distinct_symbols']} distinct), {r['chains']:,} chains "
               f"({r['distinct_chains']:,} distinct). spm_train (sentencepiece BPE, one thread)")
    out.append("gets the same chains, one per line with each base symbol one private-use")
    out.append("character (\"lines\"), and the distinct chains with counts (\"counts\",")
    out.append("`--input_format=tsv`); its vocabulary is sized to learn as many merges as teller")
    out.append("(distinct symbols + 3 meta pieces + merges). teller's time includes finding the")
    out.append("chains in the serializations (best of 3; spm one run).\n")
    out.append("| vocab | merges | teller train | spm_train, lines | spm_train, counts | "
               "spm lines / teller |")
    out.append("|---|---|---|---|---|---|")
    for t in r["train"]:
        lines = spm.get(("txt", t["vocab_size"]))
        counts = spm.get(("tsv", t["vocab_size"]))
        cell = lambda x: f"{x['seconds']:.3f} s" if x else "-"
        ratio = f"{lines['seconds'] / t['seconds']:.0f}x" if lines else "-"
        out.append(f"| {t['vocab_size']} | {t['merges']} | {t['seconds']:.3f} s | {cell(lines)} | "
                   f"{cell(counts)} | {ratio} |")
    if len({t["merges"] for t in r["train"]}) == 1 and len(r["train"]) > 1:
        out.append("\nEvery size learns the same merges: training runs out of pairs seen twice")
        out.append("once each distinct chain is one token.")
    out.append("")
    out.append(f"Encoding the whole corpus with the 512 vocabulary: {r['encode_seconds']:.3f} s, "
               f"{r['encode_symbols_per_s'] / 1e6:.1f} M base symbols/s "
               f"({r['encoded_tokens']:,} TPE tokens). Target (issue 5): >= 10 M symbols/s.\n")
print("\n".join(out))
