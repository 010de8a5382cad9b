#!/usr/bin/env python3
"""`teller diagnose --distributed` under mpirun (docs/fleet.md): the diagnosis of a
simulated 16-rank run is the one a single process writes, for 1, 2 and 4 MPI
processes, and names the rank the fault was placed on; so is that of per-rank Kineto
files, and a rank whose file cannot be read is left out, named, and the diagnosis goes
on. With --store-dir the processes write a store set that `teller stats` and `teller
diagnose` read as the same trace. A glob each process resolves on its own disk (two
working folders standing for two nodes) plans the files of both. A process killed mid-run ends the job with mpirun's
message, never a hang. Exit 77 (skip) when mpirun is not installed."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

FAULTY_RANK = 11
# As root, more processes than cores, and no binding (the first process diagnoses on every core).
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]


def run(command, **kwargs):
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, **kwargs)
    if result.returncode != 0:
        sys.exit(f"FAIL: {' '.join(command)} exited {result.returncode}\n{result.stderr[-3000:]}")
    return result


def diagnosis(path):
    with open(path) as f:
        data = json.load(f)
    data.get("model", {}).pop("seconds", None)  # a timing, not a finding
    return data


def mpirun(processes, teller, *args):
    return run(MPIRUN + ["-n", str(processes), teller, "diagnose", "--distributed", *args])


def world_rank(pid):
    """The MPI rank of a process mpirun started, or None."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read().split(b"\0")
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            command = f.read()
    except OSError:
        return None
    if b"teller" not in command or b"mpirun" in command:
        return None
    for item in env:
        if item.startswith(b"OMPI_COMM_WORLD_RANK="):
            return int(item.split(b"=", 1)[1])
    return None


def kill_rank(job, rank, deadline):
    """SIGKILL the process of MPI rank `rank`; False when the job ended first."""
    while time.time() < deadline and job.poll() is None:
        for pid in os.listdir("/proc"):
            if pid.isdigit() and world_rank(pid) == rank:
                os.kill(int(pid), 9)
                return True
        time.sleep(0.005)
    return False


def check_node_local_globs(teller, fixture, work):
    """Rank files on two nodes' own disks (two working folders, one process each), named
    by one relative pattern: the diagnosis of all three files in one place."""
    nodes = {"a": (0, 1), "b": (2,), "union": (0, 1, 2)}
    for node, ranks in nodes.items():
        os.makedirs(os.path.join(work, node, "traces"))
        for rank in ranks:
            shutil.copy(fixture, os.path.join(work, node, "traces", f"trace_rank{rank}.json"))
    pattern = "traces/trace_rank*.json"
    single = os.path.join(work, "union.json")
    run([teller, "diagnose", pattern, "--json", single, "-q"], cwd=os.path.join(work, "union"))
    out = os.path.join(work, "nodes.json")
    command = list(MPIRUN)
    for node in ("a", "b"):
        if node == "b":
            command.append(":")
        command += ["--wdir", os.path.join(work, node), "-n", "1", teller, "diagnose",
                    "--distributed", pattern, "--json", out, "-q"]
    run(command)
    if diagnosis(out) != diagnosis(single):
        sys.exit(f"FAIL: files on two nodes' disks diagnosed apart differ (diff {single} {out})")
    print("ok: a pattern resolved on each node's disk plans the files of both")


def check_a_dying_process_ends_the_job(teller, bundle):
    job = subprocess.Popen(MPIRUN + ["-n", "4", teller, "diagnose", "--distributed", bundle, "-q"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed = kill_rank(job, 2, time.time() + 60)
    try:
        _, err = job.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        job.kill()
        sys.exit("FAIL: the job hangs 120 s after one of its processes was killed")
    if not killed:
        sys.exit("FAIL: the job ended before its process 2 could be killed")
    # mpirun names the signal, or (killed before MPI_Init) says it aborted the job.
    said = [line.strip() for line in err.splitlines() if "signal 9" in line or "aborted" in line]
    if job.returncode == 0 or not said:
        sys.exit(f"FAIL: killing process 2 ended the job with {job.returncode} and no "
                 f"word of it:\n{err[-2000:]}")
    print(f"ok: a killed process ends the job ({job.returncode}): {said[0]}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--teller", required=True)
    parser.add_argument("--fixture", required=True, help="a Kineto JSON file")
    args = parser.parse_args()
    if shutil.which("mpirun") is None:
        print("SKIP: mpirun not installed (apt install openmpi-bin)")
        return 77
    os.environ["TELLER_CACHE_DIR"] = "none"
    work = tempfile.mkdtemp(prefix="teller_fleet_")
    bundle = os.path.join(work, "run")
    run([args.teller, "synth", "run", "--ranks", "16", "--requests", "6", "--seed", "5",
         "--faults", f"gpu_throttle:rank={FAULTY_RANK}", "-o", bundle])
    single = os.path.join(work, "single.json")
    run([args.teller, "diagnose", bundle, "--json", single, "-q"])
    expected = diagnosis(single)
    if expected["cause"]["rank"] != FAULTY_RANK:
        sys.exit(f"FAIL: the single process names rank {expected['cause']['rank']}, "
                 f"not {FAULTY_RANK}")
    for processes in (1, 2, 4):
        out = os.path.join(work, f"p{processes}.json")
        mpirun(processes, args.teller, bundle, "--json", out, "-q")
        if diagnosis(out) != expected:
            sys.exit(f"FAIL: {processes} processes wrote another diagnosis than one process "
                     f"(diff {single} {out})")
        print(f"ok: {processes} processes, the same diagnosis")

    # A store set written by 4 processes reads back as the same trace.
    stores = os.path.join(work, "stores")
    mpirun(4, args.teller, bundle, "--store-dir", stores, "-q")
    units = sorted(name for name in os.listdir(stores) if name.startswith("unit-"))
    if len(units) != 16 or not os.path.exists(os.path.join(stores, "set.json")):
        sys.exit(f"FAIL: the store set holds {units}, not 16 unit stores and set.json")
    stats = [run([args.teller, "stats", path]).stdout for path in
             (bundle, stores)]
    if stats[0] != stats[1]:
        sys.exit(f"FAIL: teller stats of the store set differs from the run's:\n{stats[1][:2000]}")
    out = os.path.join(work, "set.json")
    run([args.teller, "diagnose", stores, "--json", out, "-q"])
    if diagnosis(out) != expected:
        sys.exit(f"FAIL: the store set's diagnosis differs (diff {single} {out})")
    print("ok: the store set of 4 processes is read as the run")
    check_a_dying_process_ends_the_job(args.teller, bundle)
    check_node_local_globs(args.teller, args.fixture, os.path.join(work, "nodes"))

    # Per-rank Kineto files, one of them cut before its events: left out and named.
    ranks = os.path.join(work, "ranks")
    os.mkdir(ranks)
    for rank in range(3):
        shutil.copy(args.fixture, os.path.join(ranks, f"trace_rank{rank}.json"))
    single = os.path.join(work, "ranks.json")
    run([args.teller, "diagnose", ranks, "--json", single, "-q"])
    out = os.path.join(work, "ranks_p2.json")
    mpirun(2, args.teller, ranks, "--json", out, "-q")
    if diagnosis(out) != diagnosis(single):
        sys.exit(f"FAIL: per-rank Kineto files diagnosed apart differ (diff {single} {out})")
    with open(args.fixture, "rb") as f:
        head = f.read(200)
    with open(os.path.join(ranks, "trace_rank3.json"), "wb") as f:
        f.write(head)
    out = os.path.join(work, "cut.json")
    text = mpirun(2, args.teller, ranks, "--json", out, "-q", "--color", "never").stdout
    notes = diagnosis(out)["collection"]["notes"]
    left_out = [note for note in notes if note.startswith("rank 3 ") and "left out" in note]
    if not left_out or "missing: rank 3" not in text:
        sys.exit(f"FAIL: the cut trace_rank3.json is not named: notes {notes}")
    print(f"ok: {left_out[0][:120]}...")
    shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
