"""Fleet scale: `teller diagnose --distributed` under mpirun, P = 1, 2, 4, 8 processes, on
simulated runs of 64 and 256 ranks, beside one `teller diagnose` of the same bundle; then
a projection to 1,024 and 10,000 ranks from the measured costs.

Usage: python3 bench/fleet_bench.py TELLER OUT.md [RANKS...]   (default 64 256 1024; of three
or more, the largest is diagnosed in one process and on 8 only)
Writes the section's markdown to OUT.md (scripts/fleet_bench.sh splices it into
docs/benchmarks.md). Every process runs on this machine (oversubscribed), so the honest
figures are each process's own CPU time, its peak memory and the bytes it exchanged;
wall times are those of this machine's cores.
"""
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

PROCESSES = (1, 2, 4, 8)
REQUESTS = 12  # 101 engine steps
STEPS = 101
NETWORK_GBPS = 200  # one InfiniBand HDR port


def run(argv, env):
    """Runs argv; its wall time, stderr and the peak RSS of its largest child (wait4)."""
    with tempfile.TemporaryFile(mode="w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        err.seek(0)
        text = err.read()
    if status != 0:
        raise SystemExit(f"fleet_bench: {' '.join(argv)} failed:\n{text[-2000:]}")
    return wall, text, usage.ru_maxrss * 1024


def line_json(text, prefix):
    line = next((l for l in text.splitlines() if l.startswith(prefix)), None)
    return json.loads(line[len(prefix):]) if line else None


def diagnosis(path):
    data = json.load(open(path))
    data.get("model", {}).pop("seconds", None)
    return data


def named_rank(diagnosis):
    """The rank of the verdict's cause, or of the closest cause below the threshold."""
    top = diagnosis.get("cause") or (diagnosis.get("alternatives") or [{}])[0]
    return top.get("rank")


def measure(teller, bundle, ranks, faulty, work, processes_list=PROCESSES):
    env = dict(os.environ, TELLER_CACHE_DIR="none")
    single_json = os.path.join(work, "single.json")
    wall, text, rss = run([teller, "diagnose", bundle, "--timings", "-q", "--json", single_json],
                          env)
    single = diagnosis(single_json)
    rows = [{"ranks": ranks, "processes": "single", "wall": wall, "peak_rss": rss,
             "timings": line_json(text, "teller: timings "), "fleet": None, "same": True,
             "named": named_rank(single) == faulty}]
    for processes in processes_list:
        out = os.path.join(work, f"p{processes}.json")
        argv = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-n",
                str(processes), teller,
                "diagnose", "--distributed", bundle, "--timings", "-q", "--json", out]
        wall, text, rss = run(argv, env)
        got = diagnosis(out)
        rows.append({"ranks": ranks, "processes": processes, "wall": wall, "peak_rss": rss,
                     "timings": line_json(text, "teller: timings "),
                     "fleet": line_json(text, "teller: fleet "), "same": got == single,
                     "named": named_rank(got) == faulty})
    return rows


def mb(value):
    return f"{value / 1e6:,.1f}"


def table(rows):
    out = ["| ranks | processes | wall s | same diagnosis | names the rank | root: join s | "
           "root: diagnose s | root peak RSS MB | worker CPU s (max) | worker RSS MB (max) | "
           "MB exchanged | KB per rank-step sent | of which summaries | map from |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        phases = r["timings"]["phases"]
        join = phases.get("join bundle", phases.get("import bundle", 0.0))
        workers = r["fleet"]["processes"][1:] if r["fleet"] else []
        exchanged = r["fleet"]["bytes_exchanged"] if r["fleet"] else 0
        sent = sum(w["units"] for w in workers)  # ranks whose units crossed the wire
        summaries = r["fleet"].get("summary_bytes_exchanged", 0) if r["fleet"] else 0
        source = r["fleet"].get("deviation_map", "-") if r["fleet"] else "-"
        out.append("| {} | {} | {:.2f} | {} | {} | {:.2f} | {:.2f} | {:,.0f} | {} | {} | {} | {} "
                   "| {} | {} |"
                   .format(r["ranks"], r["processes"], r["wall"], "yes" if r["same"] else "NO",
                           "yes" if r["named"] else "NO", join, phases.get("diagnose", 0.0),
                           r["peak_rss"] / 1e6,
                           f"{max(w['cpu_s'] for w in workers):.2f}" if workers else "-",
                           f"{max(w['max_rss_bytes'] for w in workers) / 1e6:,.0f}"
                           if workers else "-",
                           mb(exchanged) if r["fleet"] else "-",
                           f"{exchanged / 1e3 / (sent * STEPS):.1f}" if sent else "-",
                           f"{summaries / 1e3 / (sent * STEPS):.2f}" if sent else "-",
                           "parts" if source == "parts" else "joined trace"))
    return "\n".join(out)


def per_rank_step(rows, ranks, pick):
    row = next(r for r in rows if r["ranks"] == ranks and r["processes"] == max(PROCESSES))
    return pick(row) / (ranks * STEPS)


def own_work(process):
    """A process's import (the first: join) time less its time blocked on unit transfers."""
    return process["import_s"] - process.get("unit_wait_s", 0.0)


def diagnose_phase(rows, ranks, processes="single"):
    return next(r for r in rows if r["ranks"] == ranks and r["processes"] == processes
                )["timings"]["phases"]["diagnose"]


def root_and_worker_rss(rows, ranks):
    """The first process's peak memory and the largest worker's, on the most processes."""
    row = next(r for r in rows if r["ranks"] == ranks and r["processes"] == max(PROCESSES))
    return row["peak_rss"], max(w["max_rss_bytes"] for w in row["fleet"]["processes"][1:])


def projection(rows, fleets):
    """Per rank-step costs at the largest fleet run on every P, the diagnose phase measured
    at each fleet size (and its growth beyond the largest), and the time and memory they
    give for larger fleets."""
    large = max(f for f in fleets if any(r["ranks"] == f and r["fleet"] for r in rows))
    def worker_import(r):
        workers = r["fleet"]["processes"][1:]
        return sum(own_work(w) for w in workers) / sum(w["units"] for w in workers) * r["ranks"]
    exchange = per_rank_step(rows, large, lambda r: r["fleet"]["bytes_exchanged"] * r["ranks"] /
                             sum(w["units"] for w in r["fleet"]["processes"][1:]))
    join = per_rank_step(rows, large, lambda r: own_work(r["fleet"]["processes"][0]))
    waited = per_rank_step(rows, large, lambda r: r["fleet"]["processes"][0]["unit_wait_s"])
    rebuild = per_rank_step(rows, large, lambda r: r["timings"]["phases"].get("reconstruct", 0.0))
    importing = per_rank_step(rows, large, worker_import)
    # The first process's own diagnose phase on the most processes: what --distributed runs.
    most = max(PROCESSES)
    measured = sorted({r["ranks"] for r in rows if r["processes"] == most})
    small, top = measured[-2], measured[-1]
    t_small, t_top = diagnose_phase(rows, small, most), diagnose_phase(rows, top, most)
    growth = math.log(t_top / t_small) / math.log(top / small)
    root_rss, worker_rss = root_and_worker_rss(rows, top)
    rss_per = root_rss / (top * STEPS)
    lines = [
        f"Measured at {large} ranks, {max(PROCESSES)} processes, per rank and step: "
        f"{exchange / 1e3:.1f} KB exchanged, {importing * 1e3:.3f} ms of a worker's own import "
        f"(its time blocked sending left out), {join * 1e3:.3f} ms of the first process's own "
        f"join work (parsing and appending the units; {waited * 1e3:.3f} ms more blocked "
        f"receiving them while the oversubscribed workers import, not counted) and "
        f"{rebuild * 1e3:.3f} ms of its reconstruction. The first process's diagnose phase on "
        f"{most} processes (the analysis in parts' answers taken, both cores) measured at " +
        ", ".join(f"{f:,} ranks {diagnose_phase(rows, f, most):.1f} s" for f in measured) +
        f" (growth ranks^{growth:.2f} from {small:,} to {top:,}, used beyond {top:,}); its "
        f"peak memory at {top:,} ranks {rss_per / 1e3:.1f} KB per rank-step "
        f"({root_rss / 1e6:,.0f} MB, {root_rss / worker_rss:.1f} times the largest worker's "
        f"{worker_rss / 1e6:,.0f} MB). "
        f"Units cross the network to the first process at {NETWORK_GBPS} Gb/s (one "
        "InfiniBand HDR port, the first process's link the bottleneck); workers import in "
        "parallel, and the first process joins, reconstructs and diagnoses after them (a sum: "
        "an upper bound, the join overlaps the imports).",
        "",
        "| ranks x steps | processes | worker import s | bytes to the first process | "
        "transfer s | join + reconstruct s | diagnose s | total s | first process's memory |",
        "|---|---|---|---|---|---|---|---|---|"]
    goal = {}
    for ranks, processes in ((1024, 128), (10000, 1024)):
        cells = ranks * 100
        worker = importing * cells / processes
        volume = exchange * cells
        transfer = volume * 8 / (NETWORK_GBPS * 1e9)
        first = (join + rebuild) * cells
        if ranks in measured:
            diagnose = diagnose_phase(rows, ranks, most) * 100 / STEPS
        else:
            diagnose = t_top * (ranks / top) ** growth * 100 / STEPS
        total = worker + transfer + first + diagnose
        lines.append(f"| {ranks:,} x 100 | {processes} | {worker:.1f} | {volume / 1e9:.1f} GB | "
                     f"{transfer:.1f} | {first:.1f} | {diagnose:.0f}"
                     f"{'' if ranks in measured else ' (grown)'} | {total:.0f} | "
                     f"{rss_per * cells / 1e9:.1f} GB |")
        goal.setdefault("total", total)
        goal.setdefault("memory", rss_per * cells)
        goal["fleet_total"], goal["fleet_memory"] = total, rss_per * cells
    goal["rss_ratio"], goal["top"] = root_rss / worker_rss, top
    return "\n".join(lines), goal


def verdict(goal):
    """Issue 25's goals against the 1,024-rank projection."""
    time_goal = (f"the 60 s goal for 1,024 ranks x 100 steps on 128 processes is met by the "
                 f"projection ({goal['total']:.0f} s)" if goal["total"] <= 60 else
                 f"the 60 s goal for 1,024 ranks x 100 steps on 128 processes is not met by the "
                 f"projection ({goal['total']:.0f} s)")
    def met(ok):
        return "met" if ok else "not met"
    return (f"Of issue 25's goals, {time_goal}; the memory goal (one process's memory "
            "proportional to its share) is not: the first process still holds the joined trace "
            f"({goal['memory'] / 1e9:.1f} GB at 1,024 ranks). Of issue 43's: the first process's "
            f"peak memory at {goal['top']:,} ranks on {max(PROCESSES)} processes "
            f"{goal['rss_ratio']:.1f} times a worker's (at most 3: "
            f"{met(goal['rss_ratio'] <= 3)}); 10,000 ranks x 100 steps on 1,024 processes "
            f"{goal['fleet_total']:.0f} s (at most 30: {met(goal['fleet_total'] <= 30)}) with the "
            f"first process at {goal['fleet_memory'] / 1e9:.1f} GB (under 4: "
            f"{met(goal['fleet_memory'] < 4e9)}). The first process still receives every unit "
            "and joins them for what reads the joined trace after the analysis in parts "
            "(docs/fleet.md, \"Not done\", item 5).")


def main():
    teller, out_md = sys.argv[1], sys.argv[2]
    fleets = [int(r) for r in sys.argv[3:]] or [64, 256, 1024]
    if shutil.which("mpirun") is None:
        raise SystemExit("fleet_bench: mpirun not found (apt install openmpi-bin)")
    work = tempfile.mkdtemp(prefix="fleet_bench_")
    rows = []
    for ranks in fleets:
        faulty = ranks * 3 // 4 + 1
        bundle = os.path.join(work, f"run{ranks}")
        subprocess.run([teller, "synth", "run", "--ranks", str(ranks), "--requests",
                        str(REQUESTS), "--seed", "3", "--faults", f"gpu_throttle:rank={faulty}",
                        "-o", bundle], check=True, capture_output=True)
        # The largest fleet in one process and on the most processes only: the first
        # process's diagnose phase and memory there, measured, not grown.
        rows += measure(teller, bundle, ranks, faulty, work,
                        (max(PROCESSES),) if ranks == max(fleets) and len(fleets) > 2
                        else PROCESSES)
        shutil.rmtree(bundle)
        print(f"fleet_bench: {ranks} ranks done", file=sys.stderr)
    shutil.rmtree(work)
    cpu = platform.processor() or platform.machine()
    projected, goal = projection(rows, fleets)
    text = "\n".join([
        "## Fleet scale: `teller diagnose --distributed` (issue 25)", "",
        f"`scripts/fleet_bench.sh` ({time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, {cpu}): "
        f"a simulated run (`teller synth run --ranks N --requests {REQUESTS}`: {STEPS} engine "
        "steps, TP 8 in each node, one data-parallel replica per node, `gpu_throttle` on rank "
        "3N/4+1) diagnosed once by `teller diagnose` and by `mpirun -n P teller diagnose "
        "--distributed` (`--bind-to none`: OpenMPI binds each process to one core by default, "
        "which leaves the first process's analysis one thread; no snapshot cache, the shipped "
        "model on). Every process shares this "
        "machine's cores, so wall times do not fall with P; each process's own figures do. "
        "`same diagnosis`: the JSON equals the single process's (the model's timing left "
        "out). `root`: the first process (it joins the units and diagnoses); `join`: its "
        "`join bundle` phase (its own units imported, the others received and appended); "
        "`worker`: the other processes (import and send, from `--timings`' fleet line); "
        "peak RSS of the first process: wait4 of mpirun's largest child; `KB per rank-step sent`: "
        "the bytes exchanged over the ranks the workers sent and the steps; `of which "
        "summaries`: the analysis in parts' messages and answers (`summary_bytes_exchanged`); "
        "`map from`: where the deviation map was fitted (the units' rows, or the joined "
        "trace).", "",
        table(rows), "",
        "### Projection", "", projected, "", verdict(goal)])
    open(out_md, "w").write(text + "\n")


if __name__ == "__main__":
    main()
