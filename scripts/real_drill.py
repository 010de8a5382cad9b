#!/usr/bin/env python3
"""Real processes with real faults under `teller record` (issue 42, docs/results.md "Real
drill"). Each case runs tests/data/drill/drill_serve.py, a tensor-parallel decode loop on
CPU (gloo, one core per rank), in N ranks started torchrun-style, makes one real fault on
one rank for a window of steps, and checks what `teller diagnose` says against what the
drill did: the culprit rank, the kind, the window; the control must be healthy.

Usage: scripts/real_drill.py [--repeats 5] [--cases a,b] [--ranks 2] [--markdown FILE]
       [--json FILE] [--keep DIR] [--teller build/teller]
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DRILL = os.path.join(ROOT, "tests", "data", "drill")
PYTHON = "/usr/bin/python3"  # Debian's python3-torch lives there
STEPS, FIRST, LAST = 60, 30, 44
FAULT_RANK = 1
CGROUP_ROOT = "/sys/fs/cgroup/memory"  # cgroup v1; v2 below
NETNS = "tdrill"


class Case:
    def __init__(self, name, fault, verdict, kinds, amount=0.0, watch=False, needs=None,
                 what=""):
        self.name, self.fault, self.verdict, self.kinds = name, fault, verdict, kinds
        self.amount, self.watch, self.needs, self.what = amount, watch, needs, what


CASES = [
    Case("control", "none", "healthy", (), what="no fault"),
    Case("stall", "stall", "degraded", ("straggler", "engine_pause"), amount=12,
         what="12 ms sleep before the rank's work"),
    Case("compute", "compute", "degraded", ("host_slow", "straggler"), amount=4,
         what="4x the layer compute on the rank"),
    Case("hang", "hang", "failed", ("hang",), watch=True, what="the rank blocks forever (--watch)"),
    Case("kill", "kill", "failed", ("process_end",), what="SIGKILL"),
    Case("exception", "exception", "failed", ("process_end",), what="RuntimeError raised"),
    Case("oom", "oom", "failed", ("oom_kill",), needs="cgroup",
         what="hoards memory in a memory cgroup until the OOM killer ends it"),
    Case("link", "net_slow", "degraded", ("link_degraded", "straggler"), amount=20,
         needs="netns", what="the rank's veth shaped to 20 Mbit/s (tc tbf)"),
]


# ---- what the environment allows ----

def cgroup_parent():
    """A writable memory cgroup parent (v1 memory controller, or v2 with memory)."""
    if os.path.isdir(CGROUP_ROOT) and os.access(CGROUP_ROOT, os.W_OK):
        return CGROUP_ROOT, 1
    unified = "/sys/fs/cgroup"
    controllers = os.path.join(unified, "cgroup.controllers")
    if os.path.exists(controllers) and "memory" in open(controllers).read() and \
            os.access(unified, os.W_OK):
        return unified, 2
    return None, 0


def run_quiet(args):
    return subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def setup_netns():
    """A network namespace for the faulty rank, joined to the host by a veth pair."""
    teardown_netns()
    steps = [["ip", "netns", "add", NETNS],
             ["ip", "link", "add", "tdv0", "type", "veth", "peer", "name", "tdv1"],
             ["ip", "link", "set", "tdv1", "netns", NETNS],
             ["ip", "addr", "add", "10.77.0.1/24", "dev", "tdv0"],
             ["ip", "link", "set", "tdv0", "up"],
             ["ip", "netns", "exec", NETNS, "ip", "addr", "add", "10.77.0.2/24", "dev", "tdv1"],
             ["ip", "netns", "exec", NETNS, "ip", "link", "set", "tdv1", "up"],
             ["ip", "netns", "exec", NETNS, "ip", "link", "set", "lo", "up"],
             # The drill's link fault replaces it with a token bucket (tc tbf) for its window.
             ["ip", "netns", "exec", NETNS, "tc", "qdisc", "replace", "dev", "tdv1", "root",
              "pfifo"]]
    for step in steps:
        result = run_quiet(step)
        if result.returncode != 0:
            teardown_netns()
            return "%s: %s" % (" ".join(step), result.stderr.strip())
    return None


def teardown_netns():
    run_quiet(["ip", "link", "del", "tdv0"])
    run_quiet(["ip", "netns", "del", NETNS])


# ---- one run ----

def launch_command(case, ranks, workdir):
    serve = [os.path.join(DRILL, "drill_serve.py"), "--steps", str(STEPS), "--fault", case.fault,
             "--fault-rank", str(FAULT_RANK), "--fault-steps", "%d:%d" % (FIRST, LAST),
             "--amount", str(case.amount)]
    if case.fault == "oom":
        serve += ["--cgroup", os.path.join(workdir, "cgroup")]
    launch = [PYTHON, os.path.join(DRILL, "drill_launch.py"), "--nproc", str(ranks), "--grace", "3"]
    if case.fault == "net_slow":
        launch += ["--netns-rank", str(FAULT_RANK), "--netns", NETNS, "--master-addr", "10.77.0.1"]
    return launch + ["--"] + serve


def workload_error(ranks):
    """None when the drill's job runs a few fault-free steps without teller, else its output:
    a machine whose ranks cannot start (no loopback, no gloo) says so instead of failing
    every case."""
    control = Case("preflight", "none", "healthy", ())
    command = launch_command(control, ranks, tempfile.gettempdir())
    command[command.index("--steps") + 1] = "3"
    try:
        run = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return "%s: no end within 60 s" % " ".join(command)
    if run.returncode == 0:
        return None
    return "%s: exit %d\n%s" % (" ".join(command), run.returncode,
                                 "\n".join((run.stdout + run.stderr).splitlines()[-20:]))


def record(teller, case, ranks, bundle, workdir):
    """Runs the case under `teller record`; returns (seconds from fault to verdict or None,
    the recorder's output)."""
    command = [teller, "record", "-o", bundle, "--python-hooks",
               os.path.join(DRILL, "drill_hooks.txt")]
    if case.watch:
        command += ["--watch", "--hang-after", "2s"]
    command += ["--"] + launch_command(case, ranks, workdir)
    env = dict(os.environ, DRILL_FAULT_CLOCK=os.path.join(workdir, "fault_at"))
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=env, start_new_session=True)
    output, verdict_at = [], None
    deadline = time.monotonic() + 120
    for line in process.stdout:
        output.append(line)
        if case.watch and verdict_at is None and line.startswith("FAILED"):
            verdict_at = time.time()
            os.killpg(process.pid, signal.SIGTERM)  # the job would hang on
        if time.monotonic() > deadline:
            os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    to_verdict = None
    fault_file = os.path.join(workdir, "fault_at")
    if verdict_at is not None and os.path.exists(fault_file):
        to_verdict = verdict_at - float(open(fault_file).read().split()[0])
    return to_verdict, "".join(output)


def diagnosis(teller, bundle):
    run = subprocess.run([teller, "diagnose", bundle, "--json", "-", "-q"], capture_output=True,
                         text=True)
    if run.returncode != 0:
        return None, run.stderr.strip()
    return json.loads(run.stdout), ""


def named(d):
    """(verdict, culprit rank, kind, first step, last step) of a diagnosis."""
    verdict = d.get("verdict")
    hang, oom, crash, cause = d.get("hang"), d.get("oom"), d.get("crash"), d.get("cause")
    if hang and hang.get("culprits"):
        return verdict, hang["culprits"][0], "hang", None, None
    if crash:
        return verdict, crash.get("rank", -1), "crash", crash.get("step"), crash.get("step")
    if oom:
        return verdict, oom.get("rank", -1), "oom", None, None
    if verdict == "failed":
        for log in d.get("log_evidence", []):
            if log.get("first_cause"):
                kind = {"teller.record.oom_killed": "oom_kill"}.get(log["signature"], "process_end")
                return verdict, log.get("rank", -1), kind, log.get("step"), log.get("step")
    if cause:
        return verdict, cause.get("rank"), cause.get("kind"), cause.get("first_step"), \
            cause.get("last_step")
    return verdict, None, None, None, None


def judge(case, got):
    verdict, rank, kind, first, last = got
    if case.verdict == "healthy":
        return verdict == "healthy"
    # A link's cause names the link (every rank on it), not one of its ends.
    culprit = rank == FAULT_RANK or (kind == "link_degraded" and rank in (None, -1))
    if verdict != case.verdict or not culprit or kind not in case.kinds:
        return False
    if case.verdict == "degraded" and (first is None or last < FIRST or first > LAST):
        return False  # the window must overlap the fault's
    return True


def indented(title, output, error):
    """The tail of a wrong run's recorder output and diagnose error, so that a failure on a
    machine nobody can log into says why."""
    lines = output.splitlines()[-25:] + (["teller diagnose: " + error] if error else [])
    return "  %s:\n%s" % (title, "\n".join("    " + line for line in lines))


# ---- the table ----

def markdown(results, ranks, repeats, skipped):
    lines = ["%d ranks (one core each), %d steps, the fault on rank %d in steps %d-%d; %d "
             "repeat(s) per case. Right: the verdict, the culprit rank (not a survivor or a "
             "waiting peer), the kind and, for a slowdown, a window overlapping the fault's."
             % (ranks, STEPS, FAULT_RANK, FIRST, LAST, repeats), "",
             "| case | fault | right | named (rank, kind, steps) | fault to verdict |",
             "|---|---|---|---|---|"]
    for name, runs in results.items():
        case = next(c for c in CASES if c.name == name)
        right = sum(r["right"] for r in runs)
        seen = sorted({"%s, %s, %s" % (r["verdict"], "rank %s" % r["rank"] if r["rank"] is not None
                                       else "no rank", r["kind"] or "-")
                       + (", %s-%s" % (r["first"], r["last"]) if r["first"] is not None else "")
                       for r in runs})
        times = [r["to_verdict"] for r in runs if r["to_verdict"] is not None]
        lines.append("| %s | %s | %d/%d | %s | %s |" % (
            name, case.what, right, len(runs), "; ".join(seen[:3]),
            "%.1f s (median)" % sorted(times)[len(times) // 2] if times else "-"))
    for name, why in skipped.items():
        lines.append("| %s | %s | skipped | %s | - |" % (
            name, next(c for c in CASES if c.name == name).what, why))
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cases", default=",".join(c.name for c in CASES))
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--teller", default=os.path.join(ROOT, "build", "teller"))
    parser.add_argument("--markdown", help="write the table here")
    parser.add_argument("--json", help="write every run's result here")
    parser.add_argument("--keep", help="keep the bundles under this folder")
    parser.add_argument("--skip-code", type=int, default=2,
                        help="exit code when torch or the teller binary is missing (ctest: 77)")
    args = parser.parse_args()
    if subprocess.run([PYTHON, "-c", "import torch.distributed"], capture_output=True).returncode:
        print("real_drill: %s cannot import torch (apt-get install python3-torch)" % PYTHON,
              file=sys.stderr)
        return args.skip_code
    if not os.access(args.teller, os.X_OK):
        print("real_drill: %s missing; run scripts/setup.sh build" % args.teller, file=sys.stderr)
        return args.skip_code
    preflight_error = workload_error(args.ranks)
    if preflight_error:
        print("real_drill: the drill's job fails without teller, so this machine cannot run "
              "it:\n" + preflight_error, file=sys.stderr)
        return args.skip_code
    chosen = [c for c in CASES if c.name in args.cases.split(",")]
    skipped = {}
    netns_error = setup_netns() if any(c.needs == "netns" for c in chosen) else None
    parent, _ = cgroup_parent()
    results = {}
    try:
        for case in chosen:
            if case.needs == "netns" and netns_error:
                skipped[case.name] = "no network namespace: " + netns_error
                continue
            if case.needs == "cgroup" and parent is None:
                skipped[case.name] = "no writable memory cgroup"
                continue
            runs = results.setdefault(case.name, [])
            for repeat in range(args.repeats):
                workdir = tempfile.mkdtemp(prefix="drill-%s-" % case.name)
                if case.needs == "cgroup":
                    os.symlink(os.path.join(parent, "teller-drill-%d" % os.getpid()),
                               os.path.join(workdir, "cgroup"))
                bundle = os.path.join(workdir, "bundle")
                to_verdict, output = record(args.teller, case, args.ranks, bundle, workdir)
                made = case.fault == "none" or os.path.exists(os.path.join(workdir, "fault_at"))
                d, error = diagnosis(args.teller, bundle)
                got = named(d) if d else ("error", None, None, None, None)
                run = dict(zip(("verdict", "rank", "kind", "first", "last"), got),
                           right=bool(d) and judge(case, got), to_verdict=to_verdict,
                           error=error, fault_made=made)
                runs.append(run)
                print("%-10s %d/%d  %s" % (case.name, repeat + 1, args.repeats,
                                           "right" if run["right"] else
                                           "WRONG: %s" % (got,) if made else
                                           "the fault never happened: not teller's miss"),
                      flush=True)
                if not run["right"]:
                    print(indented("what `teller record` printed (last lines)", output, error),
                          flush=True)
                if args.keep:
                    shutil.copytree(bundle, os.path.join(args.keep, "%s-%d" % (case.name, repeat)),
                                    dirs_exist_ok=True)
                cgroup = os.path.join(parent or "", "teller-drill-%d" % os.getpid())
                if case.needs == "cgroup" and os.path.isdir(cgroup):
                    os.rmdir(cgroup)
                shutil.rmtree(workdir, ignore_errors=True)
    finally:
        if not netns_error:
            teardown_netns()
    table = markdown(results, args.ranks, args.repeats, skipped)
    print(table)
    if args.markdown:
        open(args.markdown, "w").write(table)
    if args.json:
        json.dump({"ranks": args.ranks, "repeats": args.repeats, "runs": results,
                   "skipped": skipped}, open(args.json, "w"), indent=1)
    wrong = sum(not r["right"] and r["fault_made"] for runs in results.values() for r in runs)
    unmade = sum(not r["fault_made"] for runs in results.values() for r in runs)
    if wrong:
        return 1
    if unmade:  # this machine could not make the fault (see the output above): nothing judged
        print("real_drill: %d run(s) where the drill could not make its fault" % unmade,
              file=sys.stderr)
        return args.skip_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
